"""A first view that tells the truth (issue 16, items 9 and 11-15), checked in headless Chromium:
status visible, smoothing that never hides a divergence, non-finite values counted instead of
blanking a chart, axis titles, long names, legends that tell runs apart, bands that can be off."""

from __future__ import annotations

import math

import pytest

import tallyboard as tb

TIMEOUT = 15_000
CHART = "document.querySelector('.chart-card[data-metric=\"{}\"]')"
BAND_AND_SMOOTHED = """card => {
    const u = card.chart.plot, out = [];
    u.series.forEach((s, k) => {
        if (!s.label || !s.label.endsWith(' (smoothed)')) return;
        const name = s.label.slice(0, -' (smoothed)'.length);
        const low = u.series.findIndex(x => x.label === name + ' min');
        const high = u.series.findIndex(x => x.label === name + ' max');
        u.data[k].forEach((v, i) => out.push([v, u.data[low][i], u.data[high][i]]));
    });
    return out;
}"""


@pytest.fixture
def table(sample_db):
    result_table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    yield result_table
    result_table.close()


def log_run(
    table, comment: str, hparams: dict, series: dict[str, list[float]], note: str = "", seed: int = 0
) -> int:
    with table.new_run("view", cli={**hparams, "seed": seed}, comment=comment, auto_log_plt=False) as run:
        run.add_hparams(**hparams)
        if note:
            run.set_note(note)
        for tag, values in series.items():
            for step, value in enumerate(values):
                run.add_scalar(tag, value, step=step)
    return run.run_id


def open_chart(page, url: str, metric: str):
    page.goto(url)
    page.wait_for_function(f"() => {CHART.format(metric)}?.dataset.points > 0", timeout=TIMEOUT)
    return page.locator(f'.chart-card[data-metric="{metric}"]').first


def test_a_failed_run_shows_its_status_with_nothing_clipped(page, base_url, table):
    page.goto(base_url + "/")
    page.wait_for_selector('#runs tr[data-run="2"]', timeout=TIMEOUT)
    page.evaluate("""() => fetch('/api/runs/2', {method: 'POST', body: JSON.stringify({status: 'failed'}),
        headers: {'Content-Type': 'application/json',
                  'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content}})""")
    page.reload()
    dot = page.wait_for_selector('#runs tr[data-run="2"] td.pick .dot.failed', timeout=TIMEOUT)
    cell = page.query_selector('#runs tr[data-run="2"] td.pick').bounding_box()
    box, tick = dot.bounding_box(), page.query_selector('#runs tr[data-run="2"] td.pick input').bounding_box()
    assert box["width"] >= 7 and box["x"] + box["width"] <= cell["x"] + cell["width"]  # not clipped
    assert tick["width"] < 30 and tick["x"] + tick["width"] <= box["x"]  # a checkbox, not a 120 px box
    assert dot.get_attribute("title") == "failed"


def test_the_table_keeps_its_last_column_in_view_at_1600_px(page, base_url, table):
    for name in ("note", "status", "start_time", "end_time", "config_hash", "color"):
        table.show_column(name, 1)
    page.set_viewport_size({"width": 1600, "height": 900})
    page.goto(base_url + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    right = page.eval_on_selector("#runs thead th.tools", "th => th.getBoundingClientRect().right")
    assert right <= 1600
    hide = page.query_selector('#runs tr[data-run="1"] td.tools button').bounding_box()
    assert hide["x"] + hide["width"] <= 1600


def test_hparams_named_like_object_members_do_not_leak_into_other_rows(page, base_url, table):
    odd = log_run(table, "odd", {"constructor": 1, "toString": "x", "valueOf": 2.5}, {})
    page.goto(base_url + "/?experiment=*")  # every experiment's runs: "odd" is one of its own
    page.wait_for_selector(f'#runs tr[data-run="{odd}"]', timeout=TIMEOUT)
    for name in ("constructor", "toString", "valueOf"):
        selector = f"#runs tbody tr[data-run] td:nth-child({_column(page, name)})"
        cells = page.eval_on_selector_all(selector, "tds => tds.map(t => t.textContent)")
        assert sorted(cells) == sorted(
            ["", "", "", "", {"constructor": "1", "toString": "x", "valueOf": "2.5"}[name]]
        )
    assert "native code" not in page.inner_text("#runs")
    assert page.errors == []


def _column(page, name: str) -> int:
    """1-based position of a column in the runs table."""
    return page.eval_on_selector_all(
        "#runs thead th", f"ths => ths.findIndex(th => th.dataset.column === {name!r}) + 1"
    )


def test_default_smoothing_is_off_for_short_series_and_stays_in_the_band(page, base_url, table):
    diverging = [1.0 / (step + 1) for step in range(30)] + [10.0 * step for step in range(10)]
    short = log_run(table, "short", {"lr": 5}, {"train/loss": diverging})
    card = open_chart(page, f"{base_url}/runs/{short}", "loss")
    assert card.get_attribute("data-smoothed") == "0"  # 40 points: drawn as logged
    assert page.inner_text("#smoothing-label") == "auto"
    noisy = [math.sin(step / 50) + (3 if step % 97 == 0 else 0) for step in range(5000)]
    long = log_run(table, "long", {"lr": 1}, {"train/loss": noisy})
    page.set_viewport_size({"width": 900, "height": 900})
    card = open_chart(page, f"{base_url}/runs/{long}", "loss")
    assert card.get_attribute("data-smoothed") == "1" and int(card.get_attribute("data-bands")) == 1
    triples = card.evaluate(BAND_AND_SMOOTHED)
    assert len(triples) > 100
    assert all(low - 1e-9 <= value <= high + 1e-9 for value, low, high in triples if value is not None)


def test_non_finite_values_are_gaps_with_a_note_and_the_axis_stays(page, base_url, table):
    values = [1.0, 2.0, math.inf, 3.0, math.nan, -math.inf, 4.0]
    run_id = log_run(table, "inf", {"lr": 3}, {"train/loss": values})
    other = log_run(table, "fine", {"lr": 4}, {"train/loss": [1.0, 1.5, 2.0]})
    for url in (f"{base_url}/runs/{run_id}", f"{base_url}/compare?runs={run_id},{other}"):
        card = open_chart(page, url, "loss")
        assert card.get_attribute("data-nonfinite") == "3"
        assert "3 non-finite values" in card.locator(".chart-note").inner_text()  # inf, NaN, -inf
        scale = card.evaluate("c => [c.chart.plot.scales.y.min, c.chart.plot.scales.y.max]")
        assert all(math.isfinite(v) for v in scale) and scale[0] <= 1 and scale[1] >= 4
    assert page.errors == []


def test_charts_have_axis_titles_also_in_their_png(page, base_url):
    card = open_chart(page, base_url + "/runs/2?x=epoch", "accuracy")
    labels = card.evaluate("c => c.chart.plot.axes.map(a => a.label)")
    assert labels == ["epoch", "accuracy"]
    size = card.evaluate("async c => (await c.chart.png('Run 2 · accuracy')).size")
    assert size > 1000  # the PNG is the chart's canvas, where uPlot draws the axis titles


def test_long_metric_names_chart_export_and_fit_their_card(page, base_url, table):
    # The longest name the store holds (values.MAX_KEY_BYTES, 1024 bytes) is well under what a
    # chart can ask for in its URL, so every stored name charts.
    long_name = "m" * 1000
    run_id = log_run(table, "x" * 3000, {"lr": 7}, {f"train/{long_name}": [1.0, 2.0]}, "y" * 3000)
    card = open_chart(page, f"{base_url}/runs/{run_id}", long_name)
    assert card.evaluate("c => c.scrollWidth <= c.clientWidth + 1")
    csv = page.evaluate(
        f"async () => (await fetch('/api/runs/{run_id}/scalars.csv?tag=train/{long_name}')).status"
    )
    assert csv == 200
    page.goto(f"{base_url}/compare?runs=1,{run_id}")
    page.wait_for_function(f"() => {CHART.format(long_name)}?.dataset.points > 0", timeout=TIMEOUT)
    assert page.eval_on_selector("aside.side", "a => a.scrollWidth <= a.clientWidth + 1")
    assert page.errors == []


def test_the_compare_legend_names_what_differs_and_group_colours_match(page, base_url, table):
    runs = [
        log_run(table, "sweep", {"lr": lr, "depth": 2}, {"train/loss": [lr + seed / 100, lr / 2]}, seed=seed)
        for seed, lr in enumerate((0.1, 0.2, 0.1))
    ]
    ids = ",".join(map(str, runs))
    page.goto(f"{base_url}/compare?runs={ids}")
    page.wait_for_selector("#runs-legend span[data-run]", timeout=TIMEOUT)
    names = page.eval_on_selector_all("#runs-legend > span", "s => s.map(x => x.textContent)")
    assert names == [f"#{runs[0]} lr=0.1 sweep", f"#{runs[1]} lr=0.2 sweep", f"#{runs[2]} lr=0.1 sweep"]
    page.select_option("#group", "lr")
    page.wait_for_function(
        "() => document.querySelector('.chart-card').dataset.lines === '2'", timeout=TIMEOUT
    )
    sidebar = page.eval_on_selector_all("#runs-legend > span", "s => s.map(x => x.dataset.colour)")
    lines = "document.querySelector('.chart-card').chart.lines"
    chart = page.evaluate(f"() => Object.fromEntries({lines}.map(l => [l.label.split(' ')[0], l.color]))")
    assert sidebar == [chart["lr=0.1"], chart["lr=0.2"], chart["lr=0.1"]]
    assert int(page.get_attribute(".chart-card", "data-bands")) == 1  # lr=0.1 has two runs
    page.select_option("#band", "none")
    page.wait_for_function(
        "() => document.querySelector('.chart-card').dataset.bands === '0'", timeout=TIMEOUT
    )
    assert "band=none" in page.url

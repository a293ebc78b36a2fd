"""The deciding views in headless Chromium on a real sweep (8 runs, lr x batch_size, 3 repetitions):
brushing filters the table, the scatter's points are the table's numbers, the statistics table
shows scipy's numbers, the diff and the runs table show what changed."""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path

import pytest
from scipy import stats as sp

from dashboard.sweep_table import BATCHES, LRS, final_value, log_sweep
from e2e.browser import running_dashboard

TIMEOUT = 15_000


@pytest.fixture
def sweep(tmp_path: Path):
    runs = log_sweep(tmp_path / "sweep.db", tmp_path)
    with running_dashboard(str(tmp_path / "sweep.db")) as url:
        yield url, runs


def table_rows(page, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"{selector} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )


def open_hparams(page, url: str, runs: dict) -> None:
    ids = ",".join(map(str, runs))
    page.goto(f"{url}/hparams?runs={ids}&metric=val/accuracy")
    page.wait_for_selector("#parcoords path.pc-line", state="attached", timeout=TIMEOUT)
    page.wait_for_selector("#scatter g.sc-point", timeout=TIMEOUT)
    # The plots are drawn again when the page's width settles (a scroll bar appearing): a drag
    # started before that redraw would hold an axis that is no longer in the page.
    page.wait_for_function(
        "() => { const box = document.getElementById('parcoords');"
        " return Math.abs(box.clientWidth - +box.dataset.drawnWidth) <= 2; }",
        timeout=TIMEOUT,
    )


def brush(page, axis: str, top: float, bottom: float) -> None:
    """Drag along an axis from position `top` down to `bottom` (0 = axis bottom, 1 = top)."""
    box = page.locator(f"g.pc-axis[data-axis='{axis}'] rect.pc-grab").bounding_box()
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + (1 - top) * box["height"])
    page.mouse.down()
    page.mouse.move(x, box["y"] + (1 - bottom) * box["height"], steps=6)
    page.mouse.up()


def test_brushing_an_axis_filters_the_table_and_the_selection(page, sweep):
    url, runs = sweep
    open_hparams(page, url, runs)
    assert len(table_rows(page, "#hp-runs")) == 8
    # lr runs on a log axis over 1e-4..0.1: 0.01 sits at 2/3 of its height.
    brush(page, "lr", 0.75, 0.55)
    kept = [int(row[0].lstrip("#")) for row in table_rows(page, "#hp-runs")]
    assert kept == [run_id for run_id, (lr, _) in runs.items() if lr == 0.01]
    assert page.text_content("#kept-count") == "2 of 8 runs pass the brushes"
    dimmed = page.eval_on_selector_all("path.pc-line.dim", "paths => paths.map(p => +p.dataset.run)")
    assert sorted(dimmed) == sorted(set(runs) - set(kept))
    assert sorted(page.eval_on_selector_all("g.sc-point", "gs => gs.map(g => +g.dataset.run)")) == kept
    brush(page, "batch_size", 1.0, 0.8)  # batch 64 only: the brushes combine
    assert [int(r[0].lstrip("#")) for r in table_rows(page, "#hp-runs")] == [
        run_id for run_id, (lr, batch) in runs.items() if lr == 0.01 and batch == 64
    ]
    page.click("#hp-compare")
    page.wait_for_url("**/compare?runs=*")
    assert page.url.endswith(f"/compare?runs={kept[1]}")
    assert page.errors == []


def test_scatter_points_are_the_tables_numbers_and_open_their_run(page, sweep):
    url, runs = sweep
    open_hparams(page, url, runs)
    points = page.eval_on_selector_all(
        "g.sc-point", "gs => gs.map(g => [+g.dataset.run, +g.dataset.x, +g.dataset.y, +g.dataset.n])"
    )
    rows = {int(r[0].lstrip("#")): r for r in table_rows(page, "#hp-runs")}
    assert sorted(p[0] for p in points) == sorted(runs)
    for run_id, x, y, n in points:
        lr, batch = runs[run_id]
        assert (x, n) == (lr, 3)
        assert y == pytest.approx(sum(final_value(lr, batch, rep) for rep in range(3)) / 3)
        assert float(rows[run_id][-1]) == pytest.approx(y, rel=1e-4)  # the table's val/accuracy
    assert page.locator("#hp-logx").is_checked()  # lr spans three decades: log by default
    assert page.locator("g.sc-point line.sc-err").count() == 8  # repetitions as error bars
    top = points[-1][0]  # drawn last, so on top of a run with the same x
    page.locator(f"g.sc-point[data-run='{top}'] circle").hover()
    assert page.text_content("#hp-readout").startswith(f"#{top} lr=")
    page.locator(f"g.sc-point[data-run='{top}'] circle").click()
    page.wait_for_url(f"**/runs/{top}")
    assert page.errors == []


def test_importance_table_lists_lr_first(page, sweep):
    url, runs = sweep
    open_hparams(page, url, runs)
    assert page.eval_on_selector_all("#importance tbody tr", "rs => rs.map(r => r.dataset.hparam)") == [
        "lr",
        "batch_size",
    ]


def test_stats_table_shows_scipys_numbers(page, sweep):
    url, runs = sweep
    page.goto(f"{url}/compare?runs={','.join(map(str, runs))}&sm=val/accuracy&by=lr")
    page.wait_for_selector("#stats-pairs tbody tr", timeout=TIMEOUT)
    groups = table_rows(page, "#stats-groups")
    samples = {lr: [final_value(lr, b, rep) for b in BATCHES for rep in range(3)] for lr in LRS}
    assert [row[0] for row in groups] == [f"lr={lr}" for lr in LRS]
    for row, lr in zip(groups, LRS, strict=True):
        values = samples[lr]
        low, high = sp.t.interval(0.95, len(values) - 1, loc=sp.tmean(values), scale=sp.sem(values))
        assert int(row[1]) == 6
        assert float(row[2]) == pytest.approx(sp.tmean(values), rel=1e-3)
        assert float(row[3]) == pytest.approx(sp.tstd(values), rel=1e-3)
        shown_low, shown_high = (float(v) for v in row[4].strip("[]").split(","))
        assert (shown_low, shown_high) == (pytest.approx(low, rel=1e-3), pytest.approx(high, rel=1e-3))
    pairs = table_rows(page, "#stats-pairs")
    tests = [sp.ttest_ind(samples[b], samples[a], equal_var=False) for a, b in combinations(LRS, 2)]
    ordered = sorted(range(len(tests)), key=lambda i: tests[i].pvalue)
    holm, running = [0.0] * len(tests), 0.0
    for rank, i in enumerate(ordered):
        running = max(running, min(1.0, (len(tests) - rank) * tests[i].pvalue))
        holm[i] = running
    for row, test, p_holm in zip(pairs, tests, holm, strict=True):
        assert float(row[3]) == pytest.approx(test.pvalue, rel=1e-3)
        assert float(row[4]) == pytest.approx(p_holm, rel=1e-3)
        assert row[5].endswith(f"p = {float(f'{p_holm:.2g}'):.2g}") and " > " in row[5]
    page.check("input[data-by='batch_size']")  # regroup by two hparams: 8 groups of 3
    page.wait_for_function("() => document.querySelectorAll('#stats-groups tbody tr').length === 8")
    assert "sm=val%2Faccuracy" in page.url and "by=lr%2Cbatch_size" in page.url
    page.check("#log-y")  # a chart setting is saved beside the panel's keys, not instead of them
    page.wait_for_function("() => location.search.includes('log=1')")
    assert "sm=val%2Faccuracy" in page.url and "by=lr%2Cbatch_size" in page.url
    assert not math.isnan(float(table_rows(page, "#stats-groups")[0][2]))
    assert page.errors == []


def test_diff_page_shows_the_changed_hparam_and_config_line(page, sweep):
    url, runs = sweep
    first, second = list(runs)[:2]  # same lr, batch 32 vs 64
    page.goto(f"{url}/diff?runs={first},{second}")
    page.wait_for_selector("#diff-hparams", timeout=TIMEOUT)
    assert page.eval_on_selector_all("#diff-hparams tr.differs", "rs => rs.map(r => r.dataset.hparam)") == [
        "batch_size"
    ]
    config = page.locator("[data-field='config_content'] table.diff")
    assert config.locator("tr.replace td.del").inner_text() == "batch_size: 32"
    assert config.locator("tr.replace td.add").inner_text() == "batch_size: 64"
    assert "same in every run" in page.text_content("[data-field='git_commit']")
    assert page.errors == []


def test_runs_table_highlights_the_hparams_that_differ_among_the_selected(page, sweep):
    url, runs = sweep
    first, second = list(runs)[:2]
    page.goto(url + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    assert page.locator("#diff").is_disabled()
    for run_id in (first, second):
        page.click(f"#runs tbody tr[data-run='{run_id}'] td.pick input")
    differing = page.eval_on_selector_all("#runs th.differs", "ths => ths.map(t => t.dataset.column)")
    assert differing == ["batch_size"]
    assert page.locator(f"#runs tr[data-run='{first}'] td.differs").count() == 1
    assert page.locator(f"#runs tr[data-run='{list(runs)[2]}'] td.differs").count() == 0  # not selected
    page.click("#diff")
    page.wait_for_url(f"**/diff?runs={first},{second}")
    page.wait_for_selector("#diff-hparams tr.differs")
    assert page.errors == []


HOSTILE = '<img src=x onerror="window.pwned=1">'


def test_hostile_names_and_values_stay_text_on_every_deciding_view(page, tmp_path):
    import tallyboard as tb

    path = tmp_path / "hostile.db"
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    for i, value in enumerate([HOSTILE, HOSTILE + "2"]):
        config = tmp_path / f"c{i}.yaml"
        config.write_text(f"name: {value}\n")
        with table.new_run("x", configfile=str(config), cli={HOSTILE: value}, auto_log_plt=False) as run:
            run.add_hparams(**{HOSTILE: value, "lr": 0.1 * (i + 1)})
            for rep in range(2):
                if rep:
                    run.new_repetition()
                run.add_scalar(f"val/{HOSTILE}", 0.5 + i / 10 + rep / 100, step=0)
            run.write_result(**{HOSTILE: 0.5 + i})
    table.close()
    with running_dashboard(str(path)) as url:
        views = [
            (f"/hparams?runs=1,2&metric={HOSTILE}", "#importance tbody tr"),
            (f"/compare?runs=1,2&sm={HOSTILE}&by={HOSTILE}", "#stats-groups tbody tr"),
            ("/diff?runs=1,2", "#diff-hparams tr.differs"),
        ]
        for view, ready in views:
            page.goto(url + view.replace("#", "%23").replace('"', "%22"))
            page.wait_for_selector(ready, state="attached", timeout=TIMEOUT)
            assert HOSTILE in page.text_content("main")
            assert page.evaluate("() => window.pwned") is None
            assert page.locator("main img").count() == 0
    assert page.errors == []


def test_hparams_of_the_filtered_table_from_the_runs_page(page, sweep):
    url, runs = sweep
    page.goto(url + "/?filter=" + "batch_size%20%3D%3D%2064")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    page.click("#hparams")  # nothing ticked: the filtered table
    page.wait_for_selector("#hp-runs tbody tr", timeout=TIMEOUT)
    shown = [int(r[0].lstrip("#")) for r in table_rows(page, "#hp-runs")]
    assert shown == [run_id for run_id, (_, batch) in runs.items() if batch == 64]
    assert page.errors == []

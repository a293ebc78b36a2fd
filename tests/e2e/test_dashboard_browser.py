"""The dashboard in real headless Chromium: table, run view, zoom, compare, live growth, and that
hostile logged HTML and notes execute nothing in the dashboard's origin."""

from __future__ import annotations

import tallyboard as tb
from dashboard.sample_table import log_windows_run

TIMEOUT = 15_000  # ms; generous for a loaded CI machine, never reached when things work
LOSS_POINTS = "document.querySelector('.chart-card[data-metric=loss]')?.dataset.points"
POST_NOTE = """note => fetch('/api/runs/2', {method: 'POST', body: JSON.stringify({note}), headers: {
    'Content-Type': 'application/json',
    'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content}})"""


def row_ids(page) -> list[int]:
    return [
        int(v)
        for v in page.eval_on_selector_all("#runs tbody tr[data-run]", "rows => rows.map(r => r.dataset.run)")
    ]


def chart(page, metric: str):
    return page.locator(f'.chart-card[data-metric="{metric}"]').first


def test_table_opens_sorts_and_filters(page, base_url):
    page.goto(base_url + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    assert row_ids(page) == [-1, 1, 2, 3]
    page.click('#runs th[data-column="lr"]')
    page.wait_for_function(
        "() => document.querySelector('#runs th.sorted')?.dataset.column === 'lr'", timeout=TIMEOUT
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('#runs tbody tr')].map(r => r.dataset.run).join() === '1,3,2,-1'"
    )
    page.click('#runs th[data-column="lr"]')  # descending: strings first, empty cells still last
    page.wait_for_function(
        "() => [...document.querySelectorAll('#runs tbody tr')].map(r => r.dataset.run).join() === '2,3,1,-1'"
    )
    page.fill("#filter", "lr < 0.005 or accuracy > 0.94")
    page.press("#filter", "Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#runs tbody tr')].map(r => r.dataset.run).join() === '2,1'"
    )
    assert "filter=" in page.url  # the view state is in the URL
    page.fill("#filter", "lr <")
    page.press("#filter", "Enter")
    page.wait_for_function("() => document.querySelector('#filter-error').textContent.includes('filter')")
    assert page.errors == []


def test_new_runs_appear_in_the_table_without_a_reload(page, base_url, sample_db):
    page.goto(base_url + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    page.evaluate("window.marker = 'same page'")
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={"lr": 0.9}, auto_log_plt=False) as run:
        run.add_hparams(lr=0.9)
    table.close()
    page.wait_for_selector(f'#runs tr[data-run="{run.run_id}"]', timeout=TIMEOUT)
    assert page.evaluate("window.marker") == "same page"


def test_note_tag_and_status_are_edited_in_the_table(page, base_url, sample_db):
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    table.show_column("note", 1)
    table.show_column("status", 2)
    table.close()
    page.goto(base_url + "/")
    note = '#runs tr[data-run="2"] td.editable >> nth=0'
    page.wait_for_selector(note, timeout=TIMEOUT)
    page.click(note)
    page.fill('#runs tr[data-run="2"] td.editable input', "try a warmup")
    page.press('#runs tr[data-run="2"] td.editable input', "Enter")
    page.wait_for_function(
        "() => document.querySelector('#runs tr[data-run=\"2\"]').textContent.includes('warmup')"
    )
    page.click('#runs tr[data-run="2"] td.editable >> nth=1')
    page.select_option('#runs tr[data-run="2"] td select', "failed")
    page.wait_for_function("() => document.querySelector('#runs tr[data-run=\"2\"] .status.failed')")
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    run = table.get_experiment_raw(2)
    table.close()
    assert (run["note"], run["status"]) == ("try a warmup", "failed")
    assert page.url.rstrip("/") == base_url  # editing did not open the run


def test_a_rows_colour_swatch_opens_the_colour_input_and_saves_the_colour(page, base_url, sample_db):
    page.goto(base_url + "/")
    swatch = '#runs tr[data-run="3"] td.tools button.colour'
    page.wait_for_selector(swatch, timeout=TIMEOUT)
    assert page.locator('#runs tr[data-run] input[type="color"]').count() == 0  # none until asked for
    page.click(swatch)
    picker = '#runs tr[data-run="3"] td.tools input[type="color"]'
    page.wait_for_selector(picker, timeout=TIMEOUT)
    page.fill(picker, "#ff8800")  # what choosing a colour does: the value, then its change event
    page.wait_for_function(
        "() => getComputedStyle(document.querySelector('#runs tr[data-run=\"3\"] td')).borderLeftColor"
        " === 'rgb(255, 136, 0)'",
        timeout=TIMEOUT,
    )
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    colours = {run_id: table.get_experiment_raw(run_id)["color"] for run_id in (2, 3)}
    table.close()
    assert colours[3] == "ff8800" and colours[2] != "ff8800"  # read back as DeepBoard did, no '#'
    assert page.url.rstrip("/") == base_url  # choosing a colour did not open the run
    assert page.errors == []


def test_run_view_draws_one_chart_per_metric_with_a_line_per_split_and_rep(page, base_url):
    page.goto(base_url + "/runs/1?reps=lines")
    page.wait_for_selector('.chart-card[data-metric="loss"] canvas', timeout=TIMEOUT)
    metrics = page.eval_on_selector_all(".chart-card", "cards => cards.map(c => c.dataset.metric)")
    assert sorted(metrics) == ["accuracy", "loss"]
    # loss: train/loss and val/loss, each in repetitions 0 and 1
    page.wait_for_function(
        "() => document.querySelector('.chart-card[data-metric=loss]').dataset.lines === '4'"
    )
    page.select_option("#reps", "minmax")  # mean + band: one line per split
    page.wait_for_function(
        "() => document.querySelector('.chart-card[data-metric=loss]').dataset.lines === '2'"
    )
    assert page.errors == []


def test_zoom_requeries_the_range_at_full_resolution(page, base_url):
    page.set_viewport_size({"width": 900, "height": 900})  # narrow charts: 300 points get bucketed
    page.goto(base_url + "/runs/2")
    card = chart(page, "accuracy")
    card.locator(".u-over").wait_for(timeout=TIMEOUT)
    before = int(card.get_attribute("data-points"))
    over = card.locator(".u-over").bounding_box()
    y = over["y"] + over["height"] / 2
    page.mouse.move(over["x"] + over["width"] * 0.4, y)
    page.mouse.down()
    page.mouse.move(over["x"] + over["width"] * 0.5, y, steps=5)
    page.mouse.up()
    page.wait_for_function(
        "() => document.querySelector('.chart-card[data-metric=accuracy]').dataset.range", timeout=TIMEOUT
    )
    low, high = (int(v) for v in card.get_attribute("data-range").split("-"))
    assert 60 < low < high < 240
    after = int(card.get_attribute("data-points"))
    assert after == high - low + 1 and after < before  # every step of the range, nothing else
    card.locator("text=Reset zoom").click()
    page.wait_for_function("() => !document.querySelector('.chart-card[data-metric=accuracy]').dataset.range")


def test_compare_two_runs_from_the_table(page, base_url):
    page.goto(base_url + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    page.check('#runs tr[data-run="2"] input[type=checkbox]')
    page.check('#runs tr[data-run="3"] input[type=checkbox]')
    page.click("#compare")
    page.wait_for_url("**/compare?runs=2,3")
    page.wait_for_selector('.chart-card[data-split="val"] canvas', timeout=TIMEOUT)
    cards = page.eval_on_selector_all(
        ".chart-card", "cs => cs.map(c => c.dataset.split + '/' + c.dataset.metric)"
    )
    assert sorted(cards) == ["train/accuracy", "train/loss", "val/loss"]
    page.wait_for_function(
        "() => [...document.querySelectorAll('.chart-card')].every(c => c.dataset.lines === '2')",
        timeout=TIMEOUT,
    )
    page.check("input[data-by='lr']")  # one Group by: the statistics' hparams group the charts too
    page.wait_for_function("() => location.search.includes('by=lr')")
    page.wait_for_function(  # the legend says each run's group, as the charts' lines do
        "() => [...document.querySelectorAll('.group-key')].map(g => g.textContent).join()"
        " === '(lr=auto),(lr=0.01)'",
        timeout=TIMEOUT,
    )
    assert page.errors == []


def test_a_live_run_grows_without_a_reload(page, base_url, sample_db):
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("live", cli={"lr": 0.2}, auto_log_plt=False)
    for step in range(20):
        run.add_scalar("train/loss", 1 / (step + 1), step=step)
    run.flush()
    try:
        page.goto(f"{base_url}/runs/{run.run_id}")
        page.wait_for_function(f"() => {LOSS_POINTS} === '20'", timeout=TIMEOUT)
        page.evaluate("window.marker = 'same page'")
        for step in range(20, 35):
            run.add_scalar("train/loss", 1 / (step + 1), step=step)
        run.flush()
        page.wait_for_function(f"() => {LOSS_POINTS} === '35'", timeout=TIMEOUT)
        assert page.evaluate("window.marker") == "same page"  # grown in place, not reloaded
    finally:
        run.close()
        table.close()
    assert page.errors == []


def test_hostile_notes_and_fragments_execute_nothing(page, base_url, sample_db):
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    table.show_column("note", 1)
    table.close()
    note = "<img src=x onerror=\"document.title='pwned'; window.pwned=1\"><script>window.pwned=2</script>"
    page.goto(base_url + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    page.evaluate(POST_NOTE, note)
    page.reload()
    page.wait_for_selector('#runs tr[data-run="2"]', timeout=TIMEOUT)
    assert note in page.inner_text('#runs tr[data-run="2"]')  # shown as text
    assert page.query_selector("#runs img") is None
    page.goto(base_url + "/runs/1?tab=fragment")
    frame_element = page.wait_for_selector("iframe.fragment", timeout=TIMEOUT)
    assert frame_element.get_attribute("sandbox") == "allow-scripts"
    frame = frame_element.content_frame()
    frame.wait_for_selector("#frag", timeout=TIMEOUT)  # the fragment itself renders
    page.wait_for_timeout(300)  # let its script run (and fail to reach us)
    for url in ("/", "/runs/1?tab=fragment", "/runs/2"):
        if url != "/runs/1?tab=fragment":
            page.goto(base_url + url)
            page.wait_for_load_state("networkidle")
        assert page.evaluate("[document.title.includes('pwned'), window.pwned === undefined]") == [
            False,
            True,
        ]


def test_a_chart_of_stat_windows_says_window_under_its_x_axis(page, base_url, sample_db):
    """A run that logged only a monitor Stat: its steps are the windows' indices (runs.window_tags),
    and its chart says so; the sample runs' charts, logged at training steps, say "step"."""
    run_id = log_windows_run(sample_db)
    page.goto(f"{base_url}/runs/{run_id}")
    card = '.chart-card[data-metric="step_time.mean"]'
    page.wait_for_selector(f"{card} .uplot", timeout=TIMEOUT)
    assert page.get_attribute(card, "data-x") == "window"
    page.goto(f"{base_url}/runs/1")
    page.wait_for_selector('.chart-card[data-metric="loss"] .uplot', timeout=TIMEOUT)
    assert page.get_attribute('.chart-card[data-metric="loss"]', "data-x") == "step"
    assert page.errors == []

"""Alerts in real headless Chromium: the runs table marks the runs that have any, the run page
lists them above its tabs (text, never markup), and new ones reach both pages live."""

from __future__ import annotations

import tallyboard as tb

TIMEOUT = 15_000  # ms; generous for a loaded CI machine, never reached when things work
HOSTILE = '<img src=x onerror="window.pwned=1">'


def test_alerts_are_marked_listed_and_pushed_live(page, base_url, sample_db):
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("alerting", auto_log_plt=False)
    try:
        run.alert("loss is not finite", f"loss = nan at step 4 {HOSTILE}", level="error", step=4)
        run.flush()
        page.goto(base_url + "/")
        mark = f'#runs tr[data-run="{run.run_id}"] .alert-mark'
        page.wait_for_selector(f"{mark}.error", timeout=TIMEOUT)
        assert page.get_attribute(mark, "title") == "1 alert, latest: loss is not finite"
        marked = "els => els.map(e => e.closest('tr').dataset.run)"
        assert page.eval_on_selector_all("#runs .alert-mark", marked) == [str(run.run_id)]  # only that run
        run.alert("disk almost full", level="warn")
        run.flush()
        page.wait_for_function(
            "sel => (document.querySelector(sel) || {}).title === '2 alerts, latest: disk almost full'",
            arg=mark, timeout=TIMEOUT,
        )  # fmt: skip

        page.goto(f"{base_url}/runs/{run.run_id}")
        page.wait_for_selector("#alerts li.alert", timeout=TIMEOUT)
        titles = "els => els.map(e => e.querySelector('strong').textContent)"
        assert page.eval_on_selector_all("#alerts li.alert", titles) == [
            "disk almost full",
            "loss is not finite",
        ]
        assert HOSTILE in page.inner_text("#alerts") and page.query_selector("#alerts img") is None
        run.alert("stalled", "no change for 200 steps", level="info")
        run.flush()
        page.wait_for_function(
            "() => document.querySelectorAll('#alerts li.alert').length === 3", timeout=TIMEOUT
        )
        assert page.eval_on_selector_all("#alerts li.alert", titles)[0] == "stalled"
        assert page.evaluate("window.pwned") is None and page.errors == []
    finally:
        run.close()
        table.close()


def test_a_run_without_alerts_shows_no_list(page, base_url):
    page.goto(base_url + "/runs/1")
    page.wait_for_selector(".run-title", timeout=TIMEOUT)
    assert page.query_selector("#alerts").is_hidden() and page.errors == []

"""The run page shows how a failed run failed (type and message at the top, the traceback folded
under them) and the tables it logged, in real headless Chromium; every logged string is text."""

from __future__ import annotations

from pathlib import Path

import tallyboard as tb
from e2e.browser import running_dashboard

TIMEOUT = 15_000  # ms; generous for a loaded CI machine, never reached when things work
HOSTILE = '<img src=x onerror="window.pwned=1">'


def failed_run_with_a_table(path: Path) -> int:
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    try:
        with table.new_run("fails", auto_log_plt=False) as run:
            run.add_table(
                ["input", "score"], [[HOSTILE, 0.5], ["b", float("nan")]], step=3, tag="predictions"
            )
            raise ValueError(f"bad batch {HOSTILE}")
    except ValueError:
        pass
    table.close()
    return run.run_id


def test_a_failed_run_says_why_and_shows_its_tables(page, tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    run_id = failed_run_with_a_table(path)
    with running_dashboard(str(path)) as url:
        page.goto(f"{url}/runs/{run_id}")
        page.wait_for_selector("#run-failure", timeout=TIMEOUT)
        head = page.inner_text("#run-failure .failure-head")
        assert head == f"ValueError: bad batch {HOSTILE}"  # the markup is text
        assert not page.is_visible("#failure-traceback")  # folded until asked for
        page.click("#run-failure summary")
        assert "in failed_run_with_a_table" in page.inner_text("#failure-traceback")
        page.click('.tabs button[data-tab="table"]')
        page.wait_for_selector("#logged-tables .logged-table", timeout=TIMEOUT)
        cells = page.eval_on_selector_all("#logged-tables td", "tds => tds.map(td => td.textContent)")
        assert cells == [HOSTILE, "0.5", "b", "NaN"]
        headers = page.eval_on_selector_all("#logged-tables th", "ths => ths.map(th => th.textContent)")
        assert headers == ["input", "score"]
        assert "predictions · step 3" in page.inner_text("#logged-tables .meta")
        assert page.evaluate("window.pwned") is None
        assert page.errors == []


def test_a_finished_run_has_no_failure_and_says_it_logged_no_tables(page, tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP) as table:
        run = table.new_run("fine", auto_log_plt=False)
        run.write_result(acc=1.0)
    with running_dashboard(str(path)) as url:
        page.goto(f"{url}/runs/{run.run_id}?tab=table")
        page.wait_for_selector("text=no tables logged", timeout=TIMEOUT)
        assert page.query_selector("#run-failure") is None
        assert page.errors == []

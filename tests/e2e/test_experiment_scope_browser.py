"""A table of several experiments opens on the latest one, with its runs and only its columns, and
the selector switches the runs table (and the hparams page it opens) to another or to all, in real
headless Chromium."""

from __future__ import annotations

from pathlib import Path

import tallyboard as tb
from e2e.browser import running_dashboard

TIMEOUT = 15_000  # ms; generous for a loaded CI machine, never reached when things work
SHOWN = "() => [...document.querySelectorAll('#runs tbody tr[data-run]')].map(r => r.dataset.run).join()"
HEADERS = "ths => ths.map(th => th.dataset.column)"


def two_projects(path: Path) -> None:
    with tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP) as table:
        for experiment, name in (("vision", "kernel"), ("text", "vocab")):
            for seed in range(2):
                run = table.new_run(experiment, cli={"seed": seed}, auto_log_plt=False)
                run.add_hparams(**{name: seed + 1, "lr": 0.1})
                run.write_result(acc=0.5 + seed / 10)


def test_the_runs_table_is_scoped_to_the_latest_experiment_with_a_selector(page, tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    two_projects(path)
    with running_dashboard(str(path)) as url:
        page.goto(url)
        page.wait_for_function(f"() => ({SHOWN})() === '3,4'", timeout=TIMEOUT)
        assert page.input_value("#experiment") == "text"
        headers = page.eval_on_selector_all("#runs thead th[data-column]", HEADERS)
        assert "vocab" in headers and "kernel" not in headers
        page.select_option("#experiment", "vision")
        page.wait_for_function(f"() => ({SHOWN})() === '1,2'", timeout=TIMEOUT)
        assert "experiment=vision" in page.url
        headers = page.eval_on_selector_all("#runs thead th[data-column]", HEADERS)
        assert "kernel" in headers and "vocab" not in headers
        page.select_option("#experiment", "*")
        page.wait_for_function(f"() => ({SHOWN})() === '1,2,3,4'", timeout=TIMEOUT)
        page.click("#hparams")  # no selection: the hparams page of the table as shown
        page.wait_for_selector("#experiment", timeout=TIMEOUT)
        assert page.input_value("#experiment") == "*"
        assert page.errors == []


def test_a_table_of_one_experiment_has_no_selector(page, tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP) as table:
        table.new_run("only", auto_log_plt=False).close()
    with running_dashboard(str(path)) as url:
        page.goto(url)
        page.wait_for_function(f"() => ({SHOWN})() === '1'", timeout=TIMEOUT)
        assert page.query_selector("#experiment") is None
        assert page.errors == []

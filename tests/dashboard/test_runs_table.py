"""The in-memory runs table follows the store: new, edited, replaced and hidden runs."""

from __future__ import annotations

import tallyboard as tb
from tallyboard.dashboard.runs_table import RunsTable
from tallyboard.store.queries import DashboardQueries


def test_refresh_picks_up_new_edited_and_replaced_runs(sample_db):
    queries = DashboardQueries(str(sample_db))
    runs = RunsTable(queries)
    assert runs.page().total == 4
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={"lr": 0.3}, auto_log_plt=False) as run:
        run.add_hparams(lr=0.3)
    debug = table.new_debug_run("debug again", auto_log_plt=False)  # replaces run -1
    debug.close()
    table.hide_run(2)
    table.close()
    page = runs.page(show_hidden=True)
    rows = {row["run_id"]: row for row in page.rows}
    assert page.total == 5 and rows[run.run_id]["cells"] == {"lr": 0.3}
    assert rows[-1]["experiment"] == "debug again" and rows[2]["hidden"] is True
    assert [row["run_id"] for row in runs.page().rows] == [-1, 1, 3, run.run_id]
    queries.close()


def test_columns_follow_the_store_and_include_every_value(sample_db):
    queries = DashboardQueries(str(sample_db))
    runs = RunsTable(queries)
    runs.refresh()
    columns = {c.name: c for c in runs.columns()}
    assert {"lr", "optimizer", "batch_size", "accuracy"} <= set(columns)
    assert columns["run_id"].alias == "Run ID" and columns["run_id"].position == 0
    assert "git_diff" not in columns  # too long for a cell: the run page shows it
    queries.close()


def test_the_first_screen_read_from_the_store_equals_the_loaded_table(sample_db):
    """Before every row is loaded, the default view comes straight from the store: it must be the
    page the loaded table gives (rows, total, and the columns of its rows in the same order)."""
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={"lr": 0.5}, auto_log_plt=False) as run:
        run.add_hparams(zeta=1, lr=0.5, alpha="a")  # names new to the table, out of order
        run.write_result(constructor=2)
    table.hide_run(2)
    table.close()
    for options in ({}, {"descending": True}, {"show_hidden": True}, {"offset": 1, "limit": 2}):
        early = RunsTable(DashboardQueries(str(sample_db)))
        window = early.page(**options)
        assert early.wait_until_loaded(30)
        loaded = RunsTable(DashboardQueries(str(sample_db)))
        loaded.refresh()
        full = loaded.page(**options)
        assert (window.total, window.rows) == (full.total, full.rows), options
        known = {name for row in window.rows for name in row["cells"]}
        known |= {c["name"] for c in loaded.queries.columns()}  # the store's own column list
        run_columns = [c for c in full.columns if c.kind == "run" or c.name in known]
        assert window.partial and not full.partial
        assert [c.name for c in window.columns] == [c.name for c in run_columns], options

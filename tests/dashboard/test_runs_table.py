"""The runs table follows the store: new, edited, replaced and hidden runs, from SQL and from memory."""

from __future__ import annotations

import tallyboard as tb
from tallyboard.dashboard.runs_table import RunsTable, _public
from tallyboard.store import open_queries


def test_refresh_picks_up_new_edited_and_replaced_runs(sample_db):
    queries = open_queries(str(sample_db))
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
    queries = open_queries(str(sample_db))
    runs = RunsTable(queries)
    runs.refresh()
    columns = {c.name: c for c in runs.columns()}
    assert {"lr", "optimizer", "batch_size", "accuracy"} <= set(columns)
    assert columns["run_id"].alias == "Run ID" and columns["run_id"].position == 0
    assert "git_diff" not in columns  # too long for a cell: the run page shows it
    queries.close()


VIEW_DEFAULTS = (("sort", "run_id"), ("descending", False), ("filter_text", ""), ("show_hidden", False))


def test_a_fresh_server_answers_from_sql_with_every_column_and_loads_nothing(sample_db):
    """A fresh server's first screen (and any view SQL can say) is read from the store, without
    loading every run: it must be the page the loaded table gives, with every column (the names of
    runs on other pages too, in the same order)."""
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={"lr": 0.5}, auto_log_plt=False) as run:
        run.add_hparams(zeta=1, lr=0.5, alpha="a")  # names new to the table, out of order
        run.write_result(constructor=2)
    table.hide_run(2)
    table.close()
    views = ({}, {"descending": True}, {"show_hidden": True}, {"offset": 1, "limit": 2},
             {"sort": "lr", "filter_text": "lr > 0"})  # fmt: skip
    for options in views:
        fresh = RunsTable(open_queries(str(sample_db)))
        page = fresh.page(**options)
        assert not fresh._rows, options  # nothing loaded into memory
        loaded = RunsTable(open_queries(str(sample_db)))
        loaded.refresh()
        view = [options.get(name, default) for name, default in VIEW_DEFAULTS]
        rows = loaded._select(loaded.columns(), *view[:3], "", view[3], None)
        offset, limit = options.get("offset", 0), options.get("limit", 100)
        assert (page.total, page.rows) == (len(rows), [_public(row) for row in rows[offset : offset + limit]])
        assert page.columns == loaded.columns()
        assert {"zeta", "alpha", "constructor"} <= {c.name for c in page.columns}


def test_a_kept_view_follows_edits_alias_changes_and_new_runs(sample_db):
    queries = open_queries(str(sample_db))
    runs = RunsTable(queries)
    view = {"sort": "lr", "filter_text": "lr > 0"}
    first = runs.page(**view)
    assert len(first.rows) >= 2
    assert runs.page(**view, offset=1).rows == first.rows[1:]  # a later page of the kept view
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    table.set_column_alias({"lr": "learning rate"})
    assert runs.page(sort="learning rate", filter_text="lr > 0").rows == first.rows  # aliases resolve anew
    with table.new_run("exp", cli={"lr": 5.0}, auto_log_plt=False) as run:
        run.add_hparams(lr=5.0)
    table.hide_run(first.rows[0]["run_id"])
    table.close()
    again = runs.page(**view)
    assert again.rows[-1]["run_id"] == run.run_id  # the new run, sorted last by lr
    assert [row["run_id"] for row in again.rows[:-1]] == [row["run_id"] for row in first.rows[1:]]
    queries.close()


def test_values_come_back_with_their_json_types_however_often_they_repeat(tmp_path):
    values = {
        "i": 3,
        "f": 3.0,
        "e": 1e-05,
        "big": 10**20,
        "neg": -0.5,
        "text": "1e5",
        "flag": True,
        "none": None,
    }
    table = tb.ResultTable(tmp_path / "t.db", nocommit_action=tb.NoCommitAction.NOP)
    for i in range(3):  # the same texts in several runs (parsed once, shared)
        with table.new_run("exp", cli={"i": i}, auto_log_plt=False) as run:
            run.add_hparams(**values)
            run.write_result(nan=float("nan"), inf=float("inf"))
    table.close()
    queries = open_queries(str(tmp_path / "t.db"))
    for run in queries.runs():
        assert {name: (type(v), repr(v)) for name, v in run["hparams"].items()} == {
            name: (type(v), repr(v)) for name, v in values.items()
        }
        assert sorted((k, repr(v)) for k, v in run["results"].items()) == [("inf", "inf"), ("nan", "nan")]
    queries.close()

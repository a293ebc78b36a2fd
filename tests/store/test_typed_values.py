"""The typed copy of hparams and results (schema v10): what it holds, that every write keeps it, and
that a table written before it gets it at its first write (then filters in SQL find old values)."""

from __future__ import annotations

import math

import tallyboard as tb
from store.schema_versions import downgrade
from tallyboard.dashboard.runs_table import RunsTable
from tallyboard.store import open_queries, open_store
from tallyboard.store.indexed_values import BOOL, EMPTY_TEXT, NAN, NUMBER, TEXT, typed
from tallyboard.store.schema import SCHEMA_VERSION, TYPED_VALUES_STEP

VALUES = {"lr": 0.01, "steps": 3, "opt": "Adam", "flag": True, "none": None, "empty": "", "nan": math.nan}


def test_each_json_value_has_the_rank_number_and_text_the_filter_compares_by() -> None:
    assert typed("0.01") == (NUMBER, 0.01, None)
    assert typed("3") == (NUMBER, 3.0, None)
    assert typed("Infinity") == (NUMBER, math.inf, None)
    assert typed('"ÉTÉ"') == (TEXT, None, "été")  # lower-cased as Python does, not ASCII only
    assert typed("true") == (BOOL, 1.0, None) and typed("false") == (BOOL, 0.0, None)
    assert typed('""') == (EMPTY_TEXT, None, "")
    assert typed("NaN") == (NAN, None, None)
    assert typed("null") == (None, None, None)
    assert typed("not json") == (TEXT, None, "not json")  # shown as the text it is


def stored(url: str) -> dict[tuple[str, int, str], tuple]:
    """{(table, run id, name): (value, value_rank, value_number, value_text)} of every value row."""
    store = open_store(url)
    try:
        return {
            (table, run_id, name): tuple(row)
            for table in ("hparams", "results")
            for run_id, name, *row in store.execute(
                f"SELECT run_id, name, value, value_rank, value_number, value_text FROM {table}"
            )
        }
    finally:
        store.close()


def test_every_write_keeps_the_typed_copy_also_when_a_value_is_overwritten(db_url: str) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={}, auto_log_plt=False) as run:
        run.add_hparams(**VALUES)
        run.add_hparams(opt=7)  # the last one wins, its type too
        run.write_result(acc="n/a")
    table.close()
    rows = stored(db_url)
    assert all(row[1:] == typed(row[0]) for row in rows.values())
    assert rows[("hparams", run.run_id, "opt")] == ("7", NUMBER, 7.0, None)
    assert rows[("results", run.run_id, "acc")] == ('"n/a"', TEXT, None, "n/a")


def test_a_table_written_before_v10_gets_typed_values_at_its_first_write(db_url: str) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    for lr in (0.1, 0.01, "high"):
        with table.new_run("exp", cli={"lr": lr}, auto_log_plt=False) as run:
            run.add_hparams(lr=lr, **{k: v for k, v in VALUES.items() if k != "lr"})
            run.write_result(acc=lr)
    table.close()
    downgrade(db_url, TYPED_VALUES_STEP)  # what the version before typed values left
    store = open_store(db_url)
    assert store.schema_version == TYPED_VALUES_STEP
    store.close()
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={"lr": 1}, auto_log_plt=False) as run:  # the first write migrates
        run.add_hparams(lr=1)
    table.close()
    store = open_store(db_url)
    assert store.schema_version == SCHEMA_VERSION
    store.close()
    rows = stored(db_url)
    assert len(rows) == 3 * (len(VALUES) + 1) + 1 and all(row[1:] == typed(row[0]) for row in rows.values())
    queries = open_queries(db_url)
    try:
        page = RunsTable(queries).page(filter_text="lr < 0.5", sort="lr", descending=True)
        assert [row["cells"]["lr"] for row in page.rows] == [0.1, 0.01]
        by_text = RunsTable(queries).page(filter_text="acc == 'HIGH'")
        assert [row["cells"]["acc"] for row in by_text.rows] == ["high"]
    finally:
        queries.close()

"""The run row is described once (store/run_row.py): every other list of run fields agrees with it."""

from __future__ import annotations

import sqlite3

from tallyboard import query
from tallyboard.dashboard.runs_table import TABLE_RUN_FIELDS
from tallyboard.exchange.export import RUNS
from tallyboard.store import open_store
from tallyboard.store.run_fields import DEFAULT_UNIQUE_COLUMNS, FIELDS, RUN_FIELDS, UNIQUE_CANDIDATES


def test_the_table_has_exactly_the_described_columns(tmp_path):
    open_store(tmp_path / "t.db").close()
    with sqlite3.connect(tmp_path / "t.db") as conn:
        columns = [name for (_, name, *_) in conn.execute("PRAGMA table_info(runs)")]
    assert sorted(columns) == sorted(RUN_FIELDS)


def test_default_unique_columns_are_candidates():
    assert set(DEFAULT_UNIQUE_COLUMNS) <= set(UNIQUE_CANDIDATES)


def test_queries_return_short_run_fields_and_tags():
    assert "tags" in query.RUN_QUERY_FIELDS
    for name in query.RUN_QUERY_FIELDS:
        assert name == "tags" or (name in FIELDS and not FIELDS[name].long), name


def test_exports_keep_every_field_but_the_update_time_with_its_type():
    assert set(RUNS.names) == set(RUN_FIELDS) - {"updated_at"}
    for name, kind, nullable in RUNS.columns:
        assert (kind, nullable) == (FIELDS[name].type, FIELDS[name].nullable)


def test_runs_table_cells_are_result_table_columns():
    assert all(FIELDS[name].alias is not None for name in TABLE_RUN_FIELDS if name != "tags")

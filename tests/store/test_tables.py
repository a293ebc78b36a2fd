"""store/tables.py describes the schema a new table has, on every engine, and every list written to it.

A table or a column added to schema.py, or a list added to `Batch` or `ImportRecords`, without its
entry in tables.py fails here: a copy, deleting a run, the spool and the sink derive from that entry.
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any, get_type_hints

from tallyboard.store import Batch, Store, open_store, schema
from tallyboard.store.imported import ImportRecords
from tallyboard.store.quarantine import DESCRIBERS
from tallyboard.store.tables import RUN_TABLES, TABLES

# The engine's own bookkeeping, not part of the versioned schema (store/postgres.py: COMMITS_DDL).
ENGINE_TABLES = {"tallyboard_commits"}

PG_TABLES = (
    "SELECT table_name FROM information_schema.tables"
    " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
)
PG_COLUMNS = (
    "SELECT table_name, column_name, is_identity FROM information_schema.columns"
    " WHERE table_schema = current_schema()"
)
PG_KEYS = (
    "SELECT k.table_name, k.column_name FROM information_schema.table_constraints c"
    " JOIN information_schema.key_column_usage k ON k.constraint_schema = c.constraint_schema"
    " AND k.constraint_name = c.constraint_name"
    " WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema()"
    " ORDER BY k.table_name, k.ordinal_position"
)

# What a table is compared by: its key's columns in order, all its columns sorted, and the key
# columns the database numbers itself.
Shape = tuple[list[str], list[str], list[str]]


def created_tables(store: Store) -> dict[str, Shape]:
    """The tables of the store's schema as the database reports them."""
    if store.dialect == "sqlite":
        names = store.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        found = {}
        for (name,) in names:
            if name.startswith("sqlite_"):
                continue
            info = store.execute(f"PRAGMA table_info({name})")  # (cid, name, type, notnull, default, pk)
            key = [column for _, column, _, _, _, pk in sorted(info, key=lambda row: row[5]) if pk]
            # A rowid table's one INTEGER PRIMARY KEY is the rowid: SQLite numbers it.
            types = {column: kind for _, column, kind, *_ in info}
            numbered = key if len(key) == 1 and types[key[0]] == "INTEGER" else []
            found[name] = (key, sorted(types), numbered)
        return found
    shapes: dict[str, Shape] = {name: ([], [], []) for (name,) in store.execute(PG_TABLES)}
    for name, column, identity in store.execute(PG_COLUMNS):
        if name not in shapes:  # a view's (scalar_points: store/points_view.py)
            continue
        shapes[name][1].append(column)
        if identity == "YES":
            shapes[name][2].append(column)
    for name, column in store.execute(PG_KEYS):
        shapes[name][0].append(column)
    return {
        name: (key, sorted(columns), numbered)
        for name, (key, columns, numbered) in shapes.items()
        if name not in ENGINE_TABLES
    }


def test_the_described_tables_are_exactly_those_a_new_table_has(db_url: str) -> None:
    with open_store(db_url) as store:
        created = created_tables(store)
    described = {
        table.name: (
            list(table.key),
            sorted((*table.key, *table.columns)),
            list(table.key) if table.numbered else [],
        )
        for table in TABLES
    }
    assert created == described


def test_each_table_is_described_with_the_schema_version_that_creates_it() -> None:
    created_by = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)")
    since = dict.fromkeys(created_by.findall(schema.SCHEMA_V1), 1)
    for version, step in sorted(schema.MIGRATIONS.items()):
        for name in created_by.findall(step):
            since.setdefault(name, version + 1)
    # v14 (in Python) replaces `scalars` and the old summaries by blocks under the summaries' name.
    for name in re.findall(r"DROP TABLE (\w+)", schema.BLOCKS_SWAP):
        del since[name]
    since.update(dict.fromkeys(re.findall(r"RENAME TO (\w+)", schema.BLOCKS_SWAP), schema.BLOCKS_STEP + 1))
    assert since == {table.name: table.since for table in TABLES}


def test_every_batch_list_is_written_into_one_table_as_its_record() -> None:
    lists = get_type_hints(Batch)
    written: dict[str, Any] = {table.batch_field: table for table in TABLES if table.batch_field is not None}
    assert sorted(written) == sorted(f.name for f in fields(Batch))
    assert len(written) == sum(table.batch_field is not None for table in TABLES)
    # Every list holds the table's record but `scalars`, which holds series of plain rows.
    assert {name for name, table in written.items() if table.record is None} == {"scalars"}
    for name, table in written.items():
        if table.record is not None:
            assert lists[name] == list[table.record], name


def test_every_import_list_is_written_into_one_table() -> None:
    written = [table.import_field for table in TABLES if table.import_field is not None]
    assert sorted(written) == sorted(f.name for f in fields(ImportRecords))


def test_the_quarantine_keeps_a_record_of_every_batch_list() -> None:
    assert sorted(DESCRIBERS) == sorted(f.name for f in fields(Batch))


def test_parents_come_first_and_every_table_with_a_run_id_goes_with_its_run() -> None:
    seen: set[str] = set()
    for table in TABLES:
        assert table.parent is None or table.parent in seen, table.name
        seen.add(table.name)
    with_run_id = {table.name for table in TABLES if "run_id" in (*table.key, *table.columns)}
    assert set(RUN_TABLES) == with_run_id
    assert RUN_TABLES[-1] == "runs"

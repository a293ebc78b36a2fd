"""Turning a table back into what an older tallyboard left, to test that the first write migrates it."""

from __future__ import annotations

import re
from collections.abc import Callable

from tallyboard.store import Store, block_reads, open_store, schema
from tallyboard.store.indexed_values import TYPED_COLUMNS
from tallyboard.store.migrations import RUN_END_AND_RERUNS_COLUMNS, WINDOW_TAGS_COLUMNS
from tallyboard.store.schema import BLOCKS_STEP, RUN_END_AND_RERUNS_STEP, TYPED_VALUES_STEP, WINDOW_TAGS_STEP
from tallyboard.store.tables import IMPORT_RUN_TABLES

# The tables each schema version added (v4 changed columns only: its step runs again harmlessly).
TABLES_ADDED: dict[int, tuple[str, ...]] = {
    2: ("scalar_blocks",),
    3: ("quarantine",),
    5: IMPORT_RUN_TABLES,
    6: ("run_tags",),
    7: ("histograms",),
    8: ("console", "environments"),  # and texts.markdown (COLUMNS_ADDED)
    9: ("artifacts",),
    12: ("environment_contents",),  # after `environments` is given back its v8-v11 shape (RESHAPED)
}
# Versions that added columns ({table: columns}) and indexes to tables older versions had.
COLUMNS_ADDED: dict[int, dict[str, tuple[str, ...]]] = {
    8: {"texts": ("markdown",)},
    TYPED_VALUES_STEP + 1: {"hparams": TYPED_COLUMNS, "results": TYPED_COLUMNS},
    RUN_END_AND_RERUNS_STEP + 1: {"runs": tuple(RUN_END_AND_RERUNS_COLUMNS)},
    WINDOW_TAGS_STEP + 1: {"runs": tuple(WINDOW_TAGS_COLUMNS)},
}
INDEXES_ADDED: dict[int, tuple[str, ...]] = {
    TYPED_VALUES_STEP + 1: ("hparams_by_value", "results_by_value", "runs_hidden"),
}


# Versions that changed the shape of a table older versions had: what turns it back, before the
# tables that version added are dropped.
def _unshare_environments(store: Store) -> None:
    store.execute("CREATE TABLE environments_v11 (run_id BIGINT PRIMARY KEY, content TEXT NOT NULL)")
    store.execute(
        "INSERT INTO environments_v11 (run_id, content) SELECT e.run_id, c.content"
        " FROM environments e JOIN environment_contents c ON c.sha256 = e.sha256"
    )
    store.execute("DROP TABLE environments")
    store.execute("ALTER TABLE environments_v11 RENAME TO environments")


def _rows_per_point(store: Store) -> None:
    """v14's blocks back into v1's `scalars` and v2's `scalar_blocks` summaries."""
    postgres = store.url.is_postgres
    rows = [
        (run_id, tag_id, rep, *row)
        for run_id, tag_id, rep in store.execute("SELECT DISTINCT run_id, tag_id, rep FROM scalar_blocks")
        for points in block_reads.blocks(store.execute, (run_id, tag_id, rep))
        for row in block_reads.rows(points)
    ]
    if postgres:
        store.execute("DROP VIEW scalar_points")
    store.execute("DROP TABLE scalar_blocks")
    scalars = re.search(r"CREATE TABLE scalars \(.*?\) \{without_rowid\}", schema.SCHEMA_V1, re.S)
    assert scalars is not None
    without_rowid = "" if postgres else "WITHOUT ROWID"
    store.execute(scalars.group(0).format(without_rowid=without_rowid))
    store.executemany(
        "INSERT INTO scalars (run_id, tag_id, rep, step, epoch, walltime_ms, value)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    store.execute(schema.SCALAR_BLOCKS.format(without_rowid=without_rowid))
    store.execute(schema.BACKFILL_BLOCKS)


RESHAPED: dict[int, Callable[[Store], None]] = {12: _unshare_environments, BLOCKS_STEP + 1: _rows_per_point}
# Versions that added rows of `meta` (their keys).
META_ADDED: dict[int, tuple[str, ...]] = {11: ("runs_deleted",)}


def downgrade(url: str, version: int) -> None:
    """Drop the tables, indexes and columns that versions after `version` added and record `version`
    as the table's schema."""
    store = open_store(url)
    drop = [table for added, tables in TABLES_ADDED.items() if added > version for table in tables]
    indexes = [index for added, names in INDEXES_ADDED.items() if added > version for index in names]
    columns = [
        (table, column)
        for added, tables in COLUMNS_ADDED.items()
        if added > version
        for table, names in tables.items()
        for column in names
    ]

    def work() -> None:
        for added, reshape in sorted(RESHAPED.items(), reverse=True):
            if added > version:
                reshape(store)
        for table in drop:
            store.execute(f"DROP TABLE {table}")
        for index in indexes:
            store.execute(f"DROP INDEX {index}")
        for table, column in columns:
            store.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        for added, keys in META_ADDED.items():
            if added > version:
                store.executemany("DELETE FROM meta WHERE key = ?", [(key,) for key in keys])
        store.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))

    try:
        store.atomic(work)
    finally:
        store.close()

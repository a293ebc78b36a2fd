"""Creating a store's schema, and bringing an older one forward.

Engine-neutral: the DDL in `schema` is formatted with the engine's type names, and every step runs
inside the engine's `atomic`, so two processes opening a new file at once create it once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from tallyboard.store import environments, open_blocks, points_view
from tallyboard.store.block_codec import NAN, Points
from tallyboard.store.indexed_values import TYPED_COLUMNS, with_types
from tallyboard.store.records import QueuedEnvironment
from tallyboard.store.run_fields import RUN_COLUMNS
from tallyboard.store.schema import (
    BLOCK_POINTS,
    BLOCKS_STEP,
    BLOCKS_SWAP,
    ENVIRONMENT_LINKS,
    ENVIRONMENT_LINKS_SWAP,
    MIGRATIONS,
    RUN_END_AND_RERUNS_STEP,
    SCALAR_BLOCKS_V14,
    SCHEMA_V1,
    SHARED_ENVIRONMENTS_STEP,
    TYPED_VALUE_INDEXES,
    TYPED_VALUES_STEP,
    WINDOW_TAGS_STEP,
)
from tallyboard.store.schema import (
    SCHEMA_VERSION as SCHEMA_VERSION,  # re-exported: engine.py reads it here (tests replace it here)
)

if TYPE_CHECKING:
    from tallyboard.store.engine import Engine


def _statements(script: str, ddl_types: dict[str, str]) -> list[str]:
    return [s.strip() for s in script.format(**ddl_types).split(";") if s.strip()]


def stored_version(store: Engine) -> int | None:
    """The schema version of the store, or None for a store without our tables."""
    if not store.table_exists("meta"):
        return None
    rows = store.execute("SELECT value FROM meta WHERE key = 'schema_version'")
    return int(rows[0][0]) if rows else None


def ensure_schema(store: Engine, ddl_types: dict[str, str], unique_columns: tuple[str, ...]) -> None:
    """Create the schema (recording `unique_columns`) or migrate it to `SCHEMA_VERSION`.

    Raises `StoreError` for a store written by a newer tallyboard, naming the versions.
    """
    from tallyboard.errors import StoreError

    def upgrade() -> None:
        version = stored_version(store)
        if version is None:
            for sql in _statements(SCHEMA_V1, ddl_types):
                store.execute(sql)
            store.execute(
                "INSERT INTO meta (key, value) VALUES ('unique_columns', ?)", (json.dumps(unique_columns),)
            )
            store.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
            for name, alias, position in RUN_COLUMNS:
                store.execute(
                    "INSERT INTO columns (name, kind, alias, position) VALUES (?, 'run', ?, ?)",
                    (name, alias, position),
                )
            version = 1
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{store.url} has schema version {version}, but this tallyboard reads versions "
                f"up to {SCHEMA_VERSION}: upgrade tallyboard to open it"
            )
        for step in range(version, SCHEMA_VERSION):
            for sql in _statements(MIGRATIONS.get(step, ""), ddl_types):
                store.execute(sql)
            if step in PYTHON_MIGRATIONS:  # after the step's SQL, if it has both
                PYTHON_MIGRATIONS[step](store)
            store.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(step + 1),))

    if stored_version(store) != SCHEMA_VERSION:
        store.atomic(upgrade)


# ---- v3 -> v4: an empty note or tag is NULL -----------------------------------------------------
# Why: the docs' filter `note == null` / `tag == null` ("null matches empty cells") found nothing,
# because v1 to v3 stored "no note" as ''. From v4 on, `Store.create_run` / `update_run` store '' as NULL
# (`empty_text_as_null`), and this step drops the NOT NULL DEFAULT '' of both columns and turns
# existing '' into NULL. PostgreSQL alters the columns in place. SQLite cannot drop a NOT NULL, so
# the table is rebuilt from its own stored DDL (whatever columns later steps added stay), rows
# copied with their ids, and its indexes recreated.
_RUNS_TABLE = re.compile(r'CREATE TABLE\s+"?runs"?', re.IGNORECASE)  # after a rename SQLite quotes it
_NOT_NULL_EMPTY = re.compile(r"\b(note|tag)(\s+TEXT)\s+NOT\s+NULL\s+DEFAULT\s+''", re.IGNORECASE)


def nullable_note_and_tag(store: Engine) -> None:
    if store.url.is_postgres:
        store.execute(
            "ALTER TABLE runs ALTER COLUMN note DROP NOT NULL, ALTER COLUMN note DROP DEFAULT,"
            " ALTER COLUMN tag DROP NOT NULL, ALTER COLUMN tag DROP DEFAULT"
        )
    else:
        table_sql = store.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'")
        indexes = store.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' AND sql IS NOT NULL"
        )
        rebuilt = _NOT_NULL_EMPTY.sub(r"\1\2", table_sql[0][0])
        rebuilt = _RUNS_TABLE.sub("CREATE TABLE runs_v3", rebuilt, count=1)
        store.execute(rebuilt)
        store.execute("INSERT INTO runs_v3 SELECT * FROM runs")
        store.execute("DROP TABLE runs")
        store.execute("ALTER TABLE runs_v3 RENAME TO runs")
        for (index_sql,) in indexes:
            store.execute(index_sql)
    store.execute(
        "UPDATE runs SET note = NULLIF(note, ''), tag = NULLIF(tag, '') WHERE note = '' OR tag = ''"
    )


# ---- v7 -> v8: texts.markdown (the tables of the step are SQL: schema.CONSOLE_AND_ENVIRONMENT) --
# Why in Python: neither engine's ALTER TABLE ADD COLUMN can say "unless it exists" the same way
# (SQLite has no IF NOT EXISTS there), and the step must be safe to run on a table that has it.
def markdown_flag_on_texts(store: Engine) -> None:
    if store.url.is_postgres:
        store.execute("ALTER TABLE texts ADD COLUMN IF NOT EXISTS markdown INTEGER NOT NULL DEFAULT 0")
    elif not any(row[1] == "markdown" for row in store.execute("PRAGMA table_info(texts)")):
        store.execute("ALTER TABLE texts ADD COLUMN markdown INTEGER NOT NULL DEFAULT 0")


# ---- v9 -> v10: typed copies of hparam and result values (store/indexed_values.py) ---------------
# Why in Python: the backfill parses each value's JSON as Python does (the SQL engines' JSON
# readers differ from it and from each other on NaN, Infinity and case folding).
TYPED_VALUE_TYPES = {"value_rank": "INTEGER", "value_number": "DOUBLE PRECISION", "value_text": "TEXT"}
BACKFILL_CHUNK = 50_000


def typed_values(store: Engine) -> None:
    postgres = store.url.is_postgres
    for table in ("hparams", "results"):
        for column in TYPED_COLUMNS:
            kind = TYPED_VALUE_TYPES[column] + (' COLLATE "C"' if postgres and column == "value_text" else "")
            store.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        backfill_typed_values(store, table)
    for sql in _statements(TYPED_VALUE_INDEXES, {}):
        store.execute(sql)


def backfill_typed_values(store: Engine, table: str) -> None:
    """Fill the typed columns of every row of `table` from its JSON text, in key order by chunks."""
    select = f"SELECT run_id, name, value FROM {table}"
    order = f" ORDER BY run_id, name LIMIT {BACKFILL_CHUNK}"
    rows = store.execute(select + order)
    while rows:
        store.executemany(
            f"UPDATE {table} SET value_rank = ?, value_number = ?, value_text = ?"
            " WHERE run_id = ? AND name = ?",
            [(*typed, run_id, name) for run_id, name, _, *typed in with_types(rows)],
        )
        if len(rows) < BACKFILL_CHUNK:
            return
        rows = store.execute(select + " WHERE (run_id, name) > (?, ?)" + order, rows[-1][:2])


# ---- v11 -> v12: each distinct environment stored once (store/environments.py) ------------------
# Why in Python: a text is named by its sha256, which neither engine's SQL computes alike (SQLite
# has no sha256 at all).
ENVIRONMENTS_CHUNK = 500  # rows of some 20 kB each


def shared_environments(store: Engine) -> None:
    store.execute(ENVIRONMENT_LINKS.strip())
    select = "SELECT run_id, content FROM environments"
    order = f" ORDER BY run_id LIMIT {ENVIRONMENTS_CHUNK}"
    rows = store.execute(select + order)
    while rows:
        environments.insert(store, [QueuedEnvironment(*row) for row in rows], into="environments_v12")
        if len(rows) < ENVIRONMENTS_CHUNK:
            break
        rows = store.execute(select + " WHERE run_id > ?" + order, (rows[-1][0],))
    for sql in _statements(ENVIRONMENT_LINKS_SWAP, {}):
        store.execute(sql)


# ---- v12 -> v13: runs.error and runs.rerun_of; v14 -> v15: runs.window_tags --------------------
# Why in Python: as for texts.markdown, the step must be safe on a table that has the columns (two
# processes migrating one PostgreSQL table), which SQLite's ADD COLUMN cannot say.
RUN_END_AND_RERUNS_COLUMNS = {"error": "TEXT", "rerun_of": "BIGINT"}
WINDOW_TAGS_COLUMNS = {"window_tags": "TEXT"}


def _add_run_columns(store: Engine, columns: dict[str, str]) -> None:
    if store.url.is_postgres:
        for name, kind in columns.items():
            store.execute(f"ALTER TABLE runs ADD COLUMN IF NOT EXISTS {name} {kind}")
    else:
        present = {row[1] for row in store.execute("PRAGMA table_info(runs)")}
        for name, kind in columns.items():
            if name not in present:
                store.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")


def run_end_and_reruns(store: Engine) -> None:
    _add_run_columns(store, RUN_END_AND_RERUNS_COLUMNS)
    if not store.execute("SELECT 1 FROM columns WHERE name = 'rerun_of'"):  # hidden by default
        store.execute(
            "INSERT INTO columns (name, kind, alias, position) VALUES ('rerun_of', 'run', 'Rerun Of', NULL)"
        )


def window_tags(store: Engine) -> None:
    _add_run_columns(store, WINDOW_TAGS_COLUMNS)  # bookkeeping: not a column of the result table


# ---- v13 -> v14: scalars as blocks of points (store/block_codec.py) ------------------------------
# Why in Python: the blocks are packed by the codec. The old rows are read in key order a chunk at a
# time (keyset paging) and each series cut into blocks of BLOCK_POINTS, so memory stays bounded by
# a chunk whatever the table's size; the whole step is one transaction, like every other, so a
# process killed in it leaves the file at v13 and the next open starts the step again.
SCALARS_CHUNK = 50_000


def scalars_as_blocks(store: Engine) -> None:
    blob = "BYTEA" if store.url.is_postgres else "BLOB"  # the {blob} of each engine's DDL types
    store.execute(SCALAR_BLOCKS_V14.format(table="scalar_blocks_v14", blob=blob).strip())
    fill_blocks(store, "scalar_blocks_v14", squeeze=not store.url.is_postgres)
    for sql in _statements(BLOCKS_SWAP, {}):
        store.execute(sql)
    if store.url.is_postgres:  # points as rows for SQL users (SQLite: points_view.materialise)
        for sql in points_view.postgres_statements():
            store.execute(sql)


def fill_blocks(store: Engine, table: str, squeeze: bool, rows_from: str = "scalars") -> None:
    """Fill `table` (of `scalar_blocks`' v14 shape) with the blocks of every series of `rows_from`
    (v13's `scalars`, one row per point; `squeeze`: zlib'd integer columns, block_codec.pack), a
    chunk of rows at a time."""
    insert = open_blocks.INSERT_BLOCK.format(table=table)
    select = f"SELECT run_id, tag_id, rep, step, epoch, walltime_ms, value FROM {rows_from}"
    order = f" ORDER BY run_id, tag_id, rep, step LIMIT {SCALARS_CHUNK}"
    key: tuple[int, int, int] | None = None
    points = Points([], [], [], [])
    rows = store.execute(select + order)
    while rows:
        blocks = []
        for run_id, tag_id, rep, step, epoch, walltime, value in rows:
            if (run_id, tag_id, rep) != key or len(points.steps) == BLOCK_POINTS:
                if key is not None:
                    blocks.append(open_blocks.block_row(key, points, squeeze))
                key, points = (run_id, tag_id, rep), Points([], [], [], [])
            points.steps.append(step)
            points.epochs.append(epoch)
            points.walltimes_ms.append(walltime)
            points.values.append(NAN if value is None else value)
        store.executemany(insert, blocks)
        if len(rows) < SCALARS_CHUNK:
            break
        after = " WHERE (run_id, tag_id, rep, step) > (?, ?, ?, ?)"
        rows = store.execute(select + after + order, rows[-1][:4])
    if key is not None:
        store.execute(insert, open_blocks.block_row(key, points, squeeze))


# An older SQLite table opened without being migrated (a program that only reads it) is read
# through blocks all the same: TEMP tables come first in SQLite's name lookup, so a TEMP
# `scalar_blocks` made from its `scalars` is what every reader finds, on this connection only. It
# is dropped before the table is migrated (`Engine.ready_for_writing`).
OLDER_BLOCKS = "temp.scalar_blocks"


def read_older_scalars_as_blocks(store: Engine) -> None:
    store.execute(SCALAR_BLOCKS_V14.format(table=OLDER_BLOCKS, blob="BLOB").strip())
    fill_blocks(store, OLDER_BLOCKS, squeeze=True)


# Steps (or parts of steps) that are not one SQL script for both engines, by the version they
# upgrade from; they run after that step's SQL in `MIGRATIONS`, if any.
PYTHON_MIGRATIONS: dict[int, Callable[[Engine], None]] = {
    3: nullable_note_and_tag,
    7: markdown_flag_on_texts,
    TYPED_VALUES_STEP: typed_values,
    SHARED_ENVIRONMENTS_STEP: shared_environments,
    RUN_END_AND_RERUNS_STEP: run_end_and_reruns,
    BLOCKS_STEP: scalars_as_blocks,
    WINDOW_TAGS_STEP: window_tags,
}

"""`tallyboard copy SRC DST`: a whole result table into another file or engine, row for row.

Why it is built this way:
- Lossless: every row of every table is copied with its ids, so run 42 is run 42 on both sides (run
  ids are what people quote and link), NaN stays NaN (NULL), PNGs stay byte-identical.
- Idempotent: every row is upserted on its primary key, so copying twice changes nothing, an
  interrupted copy is completed by running it again, and a source that kept logging meanwhile is
  brought up to date. Ids are kept, so the destination must be empty or an earlier copy of the same
  source: a destination where the same run id or tag id means something else is refused before
  anything is written.
- Flat memory: tables are read in primary-key order a chunk at a time (keyset pagination, which
  both engines answer from the primary key's index), each chunk one transaction at the destination.
- Engine-neutral: it speaks only the `Store` primitives, so any pair of engines works.
- Safe on a live source: the source is opened read-only and read in one snapshot, so a table being
  logged to meanwhile is copied as it was at one instant. Into a new SQLite file, a SQLite source
  is copied with SQLite's online backup API instead (page by page, the `-wal` included): that is
  how to copy a table that is being written to, which `cp results.db` is not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

from tallyboard.progress import progress_bar
from tallyboard.store import Access, Store, StoreError, open_store, tables
from tallyboard.store.location import Kind, Location, LocationLike, require_current
from tallyboard.store.records import DEBUG_RUN_ID

# Rows per chunk (one transaction at the destination): fewer of the tables whose rows are large.
CHUNK_ROWS = {
    "scalar_events": 50_000,
    **dict.fromkeys(("runs", "texts", "histograms", "quarantine", "raw_summaries"), 2_000),
    "scalar_blocks": 500,  # a row holds up to 2,048 points: some 10 kB
    **dict.fromkeys(("media", "environment_contents"), 200),
}
# (table, primary key, other columns, rows per chunk), parents before children: every table but
# `meta`, which the destination has of its own (its schema version and the deleted runs' count;
# the unique columns, which must be the source's, are checked). Scalar blocks are copied like any
# row, their packed points as they are (a destination's block of a series the source does not have
# can only belong to a debug run, which `_refuse_conflicts` deletes whole). `artifacts` is the
# list only: the files (not in the database) are carried by `artifacts.plan_carry`.
TABLES: tuple[tuple[str, tuple[str, ...], tuple[str, ...], int], ...] = tuple(
    (table.name, table.key, table.columns, CHUNK_ROWS.get(table.name, 10_000))
    for table in tables.TABLES
    if table.name != "meta"
)


def copy_table(source: LocationLike, destination: LocationLike, progress: bool = True) -> dict[str, int]:
    """Copy every row of the result table at `source` into `destination` (created if missing, with
    the source's unique columns). Returns the number of rows copied per table.

    Raises `StoreError` when the destination holds other runs or tags under the same ids, or was
    created with other unique columns."""
    source, destination = Location.of(source), Location.of(destination)
    src = open_store(source, access=Access.READ)
    try:
        new_file = destination.sqlite_path
        if not source.is_postgres and new_file is not None and _new_sqlite_file(new_file):
            return _backup(src, new_file, progress)
        require_current(src.url, src.schema_version, "a copy into an existing table or PostgreSQL")
        unique_columns = tuple(json.loads(src.meta("unique_columns") or "[]"))
        dst = open_store(destination, unique_columns)
        try:
            dst.ready_for_writing()
            with src.snapshot():
                return _copy(src, dst, unique_columns, progress)
        finally:
            dst.close()
    finally:
        src.close()


def _new_sqlite_file(path: str) -> bool:
    from tallyboard.store.sqlite import describe_file

    return describe_file(path).kind is Kind.NOTHING


def _backup(src: Store, dst_path: str, progress: bool) -> dict[str, int]:
    """Copy a SQLite table into a new file with the online backup API (a consistent snapshot of a
    live source), then bring the copy to the current schema version.

    In one step: a backup done in steps starts over whenever another process commits to the
    source, so a table logged to twice a second might never finish. The bar reports the rows."""
    from tallyboard.store.sqlite import SqliteStore

    assert isinstance(src, SqliteStore)
    src.backup_to(dst_path)
    dst = open_store(dst_path)
    try:
        dst.ready_for_writing()
        counts = {table: dst.execute(f"SELECT count(*) FROM {table}")[0][0] for table, *_ in TABLES}
    finally:
        dst.close()
    total = sum(counts.values())
    with progress_bar(total, f"copying to {dst_path}", enabled=progress, unit="row") as bar:
        bar.update(total)
    return counts


def _copy(src: Store, dst: Store, unique_columns: tuple[str, ...], progress: bool) -> dict[str, int]:
    if tuple(json.loads(dst.meta("unique_columns") or "[]")) != unique_columns:
        raise StoreError(
            f"{dst.url} checks uniqueness on {dst.meta('unique_columns')}, {src.url} on "
            f"{list(unique_columns)}: copy into a new table instead"
        )
    _refuse_conflicts(src, dst)
    counts = {table: src.execute(f"SELECT count(*) FROM {table}")[0][0] for table, *_ in TABLES}
    with progress_bar(sum(counts.values()), f"copying to {dst.url}", enabled=progress, unit="row") as bar:
        for table, key, columns, chunk in TABLES:
            upsert = _upsert_sql(table, key, columns)
            for rows in _chunks(src, table, key, columns, chunk):
                dst.atomic(partial(dst.executemany, upsert, rows))
                bar.update(len(rows))
    dst.sync_id_sequences()  # new ids must start above the copied ones
    dst.gather_statistics()
    return counts


def _refuse_conflicts(src: Store, dst: Store) -> None:
    """Raise unless every run and tag id present on both sides names the same run or tag.

    A run is the same when experiment and start time agree. The debug run (-1) is the exception: it
    is overwritten by the next debug run anyway, so the source's replaces the destination's."""
    runs = "SELECT run_id, experiment, start_time FROM runs"
    theirs = {row[0]: row[1:] for row in dst.execute(runs)}
    clashes = [row[0] for row in src.execute(runs) if row[0] in theirs and theirs[row[0]] != tuple(row[1:])]
    debug_differs = -1 in clashes
    if debug_differs:
        clashes.remove(-1)
    tag_names = dict(dst.execute("SELECT tag_id, name FROM tags"))
    tag_ids = {name: tag_id for tag_id, name in tag_names.items()}
    tags = [name for tag_id, name in src.execute("SELECT tag_id, name FROM tags")
            if tag_names.get(tag_id, name) != name or tag_ids.get(name, tag_id) != tag_id]  # fmt: skip
    if clashes or tags:
        what = f"run ids {clashes}" if clashes else f"tags {tags}"
        raise StoreError(
            f"{dst.url} already holds other {what} than {src.url} under the same ids; "
            "copy into a new (empty) table, or export and import to merge tables"
        )
    if debug_differs:
        dst.delete_run(DEBUG_RUN_ID)


def _chunks(
    src: Store, table: str, key: tuple[str, ...], columns: tuple[str, ...], size: int
) -> Iterator[list[Any]]:
    """Rows of `table` (key columns first) in key order, `size` at a time."""
    select = f"SELECT {', '.join(key + columns)} FROM {table}"
    order = f" ORDER BY {', '.join(key)} LIMIT {int(size)}"
    after = f" WHERE ({', '.join(key)}) > ({', '.join('?' * len(key))})"
    rows = src.execute(select + order)
    while rows:
        yield rows
        if len(rows) < size:
            return
        rows = src.execute(select + after + order, rows[-1][: len(key)])


def _upsert_sql(table: str, key: tuple[str, ...], columns: tuple[str, ...]) -> str:
    names = key + columns
    updates = ", ".join(f"{name} = excluded.{name}" for name in columns)
    conflict = f"DO UPDATE SET {updates}" if columns else "DO NOTHING"  # a key-only row (run_tags)
    return (
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        f" ON CONFLICT ({', '.join(key)}) {conflict}"
    )

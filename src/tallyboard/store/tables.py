"""Every table of the schema, described once: its key, its columns, what it hangs off, what writes it.

schema.py says how the tables are created, version by version, and what their values mean. This
module says what the code that treats tables alike needs to know of each one, so that no list of
tables is written out a second time: what a copy carries (`copy.TABLES`), what deleting a run
clears (`RUN_TABLES`), which keys PostgreSQL numbers anew after a copy
(`PostgresStore.sync_id_sequences`), the records the spool journals and the sink weighs
(`BATCH_RECORDS`), and the schema version a reader of an older table asks for (`since`).
tests/store/test_tables.py holds it to the schema a new table has on every engine, to `Batch`
and to `ImportRecords`: a table or a column added to schema.py without its entry here fails it.

What is left to the modules themselves: the SQL that writes and reads each table (writes.py,
logged.py, imported.py), the lossless JSON of a quarantined record (quarantine.py), and the
export's files, whose columns are a file format of their own (exchange/export.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tallyboard.store.block_codec import BLOCK_COLUMNS
from tallyboard.store.indexed_values import TYPED_COLUMNS
from tallyboard.store.records import (
    ArtifactRow,
    Column,
    Quarantined,
    QueuedEnvironment,
    QueuedHistogram,
    QueuedLine,
    QueuedMedia,
    QueuedRecord,
    QueuedRepetition,
    QueuedText,
    QueuedValue,
    RunUpdate,
)
from tallyboard.store.run_fields import RUN_FIELDS
from tallyboard.store.schema import BLOCKS_STEP

# What a row of a table crosses the store's boundary as (`Table.record`).
Record = QueuedRecord | ArtifactRow | Quarantined | Column


@dataclass(frozen=True)
class Table:
    """One table of the schema.

    key: the primary key's columns, in its order; columns: the others (a copy carries them all).
    parent: the table its rows hang off ('runs': a run's own; 'scalar_blocks': a series'), None for the
      tables of the whole result table. A table whose parents lead to `runs` goes with its run.
    since: the schema version that added the table.
    numbered: the key is one number the database assigns (`{pk}` in schema.py).
    batch_field: the `Batch` list that `Store.write_batch` writes into it.
    import_field: the `ImportRecords` list (store/imported.py) that `Store.write_import` writes into it.
    record: the class of records.py that carries one row across the store's boundary: what
      `batch_field` holds, else what the store takes and answers (None: plain tuples).
    """

    name: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    parent: str | None = None
    since: int = 1
    numbered: bool = False
    batch_field: str | None = None
    import_field: str | None = None
    record: type[Record] | None = None


# Where a logged record sits: its run, series (tag), repetition and step, and when it was logged.
_POSITION = ("run_id", "tag_id", "rep", "step", "epoch", "walltime_ms")

# Parents before their children: the order a copy fills the tables in (and, reversed, the order
# deleting a run empties them).
TABLES: tuple[Table, ...] = (
    Table("meta", ("key",), ("value",)),
    Table(
        "runs",
        ("run_id",),
        tuple(name for name in RUN_FIELDS if name != "run_id"),
        numbered=True,
        batch_field="run_updates",
        record=RunUpdate,
    ),
    Table("tags", ("tag_id",), ("name",), numbered=True),
    Table(
        "repetitions",
        ("run_id", "rep"),
        ("start_time",),
        "runs",
        batch_field="repetitions",
        record=QueuedRepetition,
    ),
    Table(
        "hparams",
        ("run_id", "name"),
        ("value", *TYPED_COLUMNS),
        "runs",
        batch_field="hparams",
        record=QueuedValue,
    ),
    Table(
        "results",
        ("run_id", "name"),
        ("value", *TYPED_COLUMNS),
        "runs",
        batch_field="results",
        record=QueuedValue,
    ),
    Table("columns", ("name",), ("kind", "alias", "position"), record=Column),
    # A series' points as blocks (schema v14, store/block_codec.py): the `Batch` rows of
    # `scalars` become these rows (store/open_blocks.py).
    Table(
        "scalar_blocks",
        ("run_id", "tag_id", "rep", "first_step"),
        BLOCK_COLUMNS,
        "runs",
        since=BLOCKS_STEP + 1,
        batch_field="scalars",
    ),
    Table(
        "media",
        ("media_id",),
        (*_POSITION, "kind", "width", "height", "png"),
        "runs",
        numbered=True,
        batch_field="media",
        record=QueuedMedia,
    ),
    Table(
        "texts",
        ("text_id",),
        (*_POSITION, "kind", "content", "markdown"),
        "runs",
        numbered=True,
        batch_field="texts",
        record=QueuedText,
    ),
    Table(
        "histograms",
        ("histogram_id",),
        (*_POSITION, "count", "nonfinite", "minimum", "maximum", "total", "total_squares", "edges", "counts"),
        "runs",
        since=7,
        numbered=True,
        batch_field="histograms",
        record=QueuedHistogram,
    ),
    Table("run_tags", ("run_id", "tag"), (), "runs", since=6),
    Table(
        "quarantine",
        ("quarantine_id",),
        ("run_id", "kind", "tag", "error", "record", "quarantined_at"),
        "runs",
        since=3,
        numbered=True,
        record=Quarantined,
    ),
    Table(
        "scalar_events",
        ("run_id", "tag_id", "rep", "seq"),
        ("step", "epoch", "walltime_ms", "value"),
        "scalar_blocks",
        since=5,
        import_field="scalar_events",
    ),
    Table(
        "raw_summaries",
        ("raw_id",),
        (*_POSITION[:4], "walltime_ms", "kind", "format", "data"),
        "runs",
        since=5,
        numbered=True,
        import_field="raw",
    ),
    Table(
        "import_files",
        ("source", "name"),
        ("run_id", "read_to", "last_wall", "plugins"),
        "runs",
        since=5,
        import_field="files",
    ),
    Table(
        "console",
        ("console_id",),
        ("run_id", "rep", "walltime_ms", "stream", "line"),
        "runs",
        since=8,
        numbered=True,
        batch_field="console",
        record=QueuedLine,
    ),
    # A run's link to its environment (its columns since v12), whose text is shared (store/environments.py).
    Table(
        "environments",
        ("run_id",),
        ("sha256",),
        "runs",
        since=8,
        batch_field="environments",
        record=QueuedEnvironment,
    ),
    Table("environment_contents", ("sha256",), ("content",), since=12),
    # The list only: the files live in the artefact store (store/artifacts.py).
    Table(
        "artifacts",
        ("run_id", "name"),
        ("kind", "size", "sha256", "step", "logged_at"),
        "runs",
        since=9,
        record=ArtifactRow,
    ),
)
BY_NAME = {table.name: table for table in TABLES}


def _of_a_run(table: Table) -> bool:
    while table.parent is not None:
        table = BY_NAME[table.parent]
    return table.name == "runs"


# Every table a run's rows are in, children first (`runs` last): what deleting a run clears.
RUN_TABLES = tuple(table.name for table in reversed(TABLES) if _of_a_run(table))
# The tables only imports of foreign logs write (store/imported.py).
IMPORT_RUN_TABLES = tuple(table.name for table in TABLES if table.import_field is not None)
# The record each `Batch` list of records holds (all but `scalars`, which holds series of plain
# rows): what a spool's journal entry is read back as, and what the sink weighs a record by.
BATCH_RECORDS: dict[str, type[Record]] = {
    table.batch_field: table.record
    for table in TABLES
    if table.batch_field is not None and table.record is not None
}

"""The engine interface: what `table`, `writer` and `sink` ask of a database, and nothing more.

`Store` is written once, in SQL that SQLite (>= 3.35) and PostgreSQL both accept: `?`
placeholders (an engine with another paramstyle rewrites them in `execute`), `ON CONFLICT ...
DO UPDATE`, `RETURNING`. An engine module (store/sqlite.py, store/postgres.py) supplies only the
primitives: a connection, `atomic` (one transaction, retried when the database is busy),
`execute`/`executemany`, `_lock_runs`, and the DDL type names. Keeping the SQL here is what
lets the two engines behave identically without a second copy of every query.

Threading: a `Store` is used by one thread at a time (its methods take `self._lock`); the sink's
writer thread and a `ResultTable` each open their own.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from tallyboard.store import histograms as histogram_rows
from tallyboard.store.imported import IMPORT_RUN_TABLES, ImportedLogs
from tallyboard.store.run_row import EDITABLE_RUN_FIELDS, RUN_FIELDS, empty_text_as_null
from tallyboard.store.schema import BLOCK_BITS, BLOCK_STEPS, RUN_TAGS_SINCE, UNIQUE_KEY_PREFIX

if TYPE_CHECKING:
    from tallyboard.histogram import HistogramRecord
    from tallyboard.store.location import Access, Found

T = TypeVar("T")

# Rows a writer hands to the sink. `walltime` is in seconds; the store converts it to
# schema's `walltime_ms`. A scalar row is (rep, step, epoch, walltime, value) with value None for NaN.
ScalarRow = tuple[int, int, "int | None", float, "float | None"]


DEBUG_RUN_ID = -1  # the debug run's id: replaced by the next debug run, never a real run's


class StoreError(Exception):
    """The database cannot be used as a result table (wrong version, bad unique columns, ...)."""


class DuplicateRunError(RuntimeError):
    """A visible, non-failed run with the same unique columns exists already."""

    def __init__(self, run_id: int) -> None:
        super().__init__(
            f"Configuration has already been run with run id {run_id}. Change a unique column "
            "(experiment, config, cli, comment, tag, ...), or hide that run, to run it again."
        )
        self.run_id = run_id


@dataclass
class Batch:
    """Everything the sink commits in one transaction, in the order it is applied.

    scalars: (run_id, tag, rows) with rows of `ScalarRow`; one entry per series so that the
      engine can insert a series with one prepared statement.
    media: (run_id, tag, rep, step, epoch, walltime, kind, width, height, png).
    texts: (run_id, tag, rep, step, epoch, walltime, kind, content).
    histograms: (run_id, tag, rep, step, epoch, walltime, count, nonfinite, minimum, maximum,
      total, total_squares, edges, counts) with edges/counts packed (`store/histograms.queued_row`).
    texts: (run_id, tag, rep, step, epoch, walltime, kind, content[, markdown]), markdown 0 (default) or 1.
    console: (run_id, rep, walltime, stream, line): captured console lines (console.py).
    environments: (run_id, json_text): a run's environment (environment.py); a later one replaces.
    hparams / results: (run_id, name, json_value); later values of a name overwrite.
    repetitions: (run_id, rep, start_time).
    run_updates: (run_id, {column: value}) applied last (e.g. status and end_time on close).
    """

    scalars: list[tuple[int, str, list[ScalarRow]]] = field(default_factory=list)
    media: list[tuple] = field(default_factory=list)
    texts: list[tuple] = field(default_factory=list)
    histograms: list[tuple] = field(default_factory=list)
    hparams: list[tuple[int, str, str]] = field(default_factory=list)
    results: list[tuple[int, str, str]] = field(default_factory=list)
    repetitions: list[tuple[int, int, float]] = field(default_factory=list)
    console: list[tuple[int, int, float, str, str]] = field(default_factory=list)
    environments: list[tuple[int, str]] = field(default_factory=list)
    run_updates: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def __len__(self) -> int:
        return (
            sum(len(rows) for _, _, rows in self.scalars)
            + len(self.media)
            + len(self.texts)
            + len(self.histograms)
            + len(self.hparams)
            + len(self.results)
            + len(self.repetitions)
            + len(self.console)
            + len(self.environments)
            + len(self.run_updates)
        )


class ConsoleLine(NamedTuple):
    """One captured console line (schema v8): `walltime_ms` since its repetition started."""

    console_id: int
    rep: int
    walltime_ms: int
    stream: str
    line: str


def console_query(
    run_id: int, after: int = 0, limit: int | None = None, search: str | None = None
) -> tuple[str, list[Any]]:
    """The SQL and parameters of `Store.console` (shared with the dashboard's queries)."""
    sql = "SELECT console_id, rep, walltime_ms, stream, line FROM console WHERE run_id = ? AND console_id > ?"
    params: list[Any] = [run_id, after]
    if search:
        sql += " AND LOWER(line) LIKE ? ESCAPE '!'"
        params.append("%" + re.sub(r"([!%_])", r"!\1", search.lower()) + "%")
    sql += " ORDER BY console_id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, params


class ResumePoint(NamedTuple):
    """Where a run's logging stopped (`Store.reopen_run`): its last repetition, that repetition's
    start time (seconds since the epoch), and the next auto step of each tag logged in it."""

    rep: int
    rep_start: float
    next_steps: dict[str, int]


@dataclass(frozen=True)
class Column:
    """One column of the result table: `kind` is 'run', 'hparam' or 'result'; position None = hidden."""

    name: str
    kind: str
    alias: str
    position: int | None


class ArtifactRow(NamedTuple):
    """One row of `artifacts` (schema v9): a file kept with a run, its bytes named by `sha256`."""

    run_id: int
    name: str
    kind: str
    size: int
    sha256: str
    step: int | None
    logged_at: float


ARTIFACT_COLUMNS = ", ".join(ArtifactRow._fields)


def artifacts_query(run_id: int, name: str | None) -> tuple[str, list[Any]]:
    """The SELECT of a run's artefacts (or the one called `name`), by name, and its parameters."""
    sql, params = f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE run_id = ?", [run_id]
    if name is not None:
        sql, params = sql + " AND name = ?", [run_id, name]
    return sql + " ORDER BY name", params


@dataclass(frozen=True)
class Quarantined:
    """One record the database rejected: what it was (`kind`, `tag`), why (`error`), and the whole
    of it (`record`, as JSON text; see `record_json`)."""

    quarantine_id: int | None
    run_id: int | None
    kind: str
    tag: str | None
    error: str
    record: str
    quarantined_at: float


# Tables that hold a run's rows, children first: what deleting a run clears.
RUN_TABLES = (
    *("scalars", "scalar_blocks", "media", "texts", "histograms", "hparams", "results", "repetitions"),
    "quarantine",
    *IMPORT_RUN_TABLES,
    "run_tags",
    "console",
    "environments",
    "artifacts",
    "runs",
)
_SCALAR_COLUMNS = {name: name for name in ("rep", "step", "epoch", "walltime_ms", "value")}
_SCALAR_COLUMNS["value_or_nan"] = "COALESCE(value, 'nan')"
_SCALAR_COLUMNS["epoch_or_minus_one"] = "COALESCE(epoch, -1)"
_MEDIA_COLUMNS = "m.media_id, m.step, m.epoch, m.rep, t.name, m.walltime_ms, m.width, m.height, m.png"
_TEXT_COLUMNS = "x.text_id, x.step, x.epoch, x.rep, t.name, x.walltime_ms, x.content"
# Seconds -> whole milliseconds, to the nearest (halves away from zero): SQLite's ROUND adds 0.5 to
# the magnitude and truncates; `walltime_ms` does that same float arithmetic, for engines that COPY.
WALLTIME_MS_SQL = "CAST(ROUND(? * 1000) AS BIGINT)"


# One block of one series recomputed from its scalars. An aggregate without GROUP BY is one pass
# over the block's primary-key range: a third of the cost of grouping a batch's rows by block.
# The range is closed, [first step, last step]: the last block's end, 2**63, is no 64-bit integer.
REBUILD_BLOCK = (
    "INSERT INTO scalar_blocks (run_id, tag_id, rep, block, lowest, highest)"
    " SELECT ?, ?, ?, ?, MIN(value), MAX(value) FROM scalars"
    " WHERE run_id = ? AND tag_id = ? AND rep = ? AND step >= ? AND step <= ?"
    " ON CONFLICT (run_id, tag_id, rep, block)"
    " DO UPDATE SET lowest = excluded.lowest, highest = excluded.highest"
)


def touched_blocks(run_id: int, tag_id: int, rows: Iterable[ScalarRow]) -> list[tuple[int, ...]]:
    """`REBUILD_BLOCK`'s parameters for every block of a series that `rows` were written to."""
    return [
        (run_id, tag_id, rep, block, run_id, tag_id, rep, first, first + BLOCK_STEPS - 1)
        for rep, block in sorted({(row[0], row[1] >> BLOCK_BITS) for row in rows})
        for first in (block << BLOCK_BITS,)
    ]


def walltime_ms(seconds: float) -> int:
    """Exactly the milliseconds that WALLTIME_MS_SQL stores in SQLite for `seconds`."""
    ms = seconds * 1000
    return int(ms + 0.5) if ms >= 0 else -int(0.5 - ms)


class Store(ImportedLogs, ABC):
    """A result table in one database. Subclasses provide the connection and the primitives."""

    url: str
    schema_version: int | None  # of the table as opened (None: none yet)
    # How long one call waits for a database it lost (a server restarting) before it raises;
    # meaningful for engines that can lose one (PostgreSQL). The sink shortens it for its store.
    retry_for: float = 0.0

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tag_ids: dict[str, int] = {}
        self._opened_by = os.getpid()
        _live_stores.add(self)
        self._migrate_with: tuple[str, ...] | None = None  # see `_opened`

    # ---- creating and migrating the schema (see store/location.py for when) -----------------
    @abstractmethod
    def _prepare_schema(self, unique_columns: tuple[str, ...]) -> None:
        """Create the schema (recording `unique_columns`) or migrate it to the current version."""

    def _schema_version(self) -> int | None:
        from tallyboard.store.migrations import stored_version

        with self._lock:
            return stored_version(self)

    def _opened(self, found: Found, access: Access, unique_columns: tuple[str, ...]) -> None:
        """What opening does with what it found (store/location.py): a writing open creates a table
        where there is nothing; an existing table is left for the first write to migrate if it is
        older, so that a program that opens a table only to read it leaves it as it was."""
        from tallyboard.store.location import Access, Kind

        self.schema_version = found.version
        if access is not Access.WRITE:
            return
        if found.kind is Kind.NOTHING:
            self._prepare_schema(unique_columns)
        else:
            self._migrate_with = unique_columns

    def _engine_ready(self) -> bool:
        """Whether the engine's own bookkeeping exists (PostgreSQL's commit log); see `_prepare_schema`."""
        return True

    def ready_for_writing(self) -> None:
        """Migrate an older table now (every write does it first; `tallyboard migrate` calls this)."""
        from tallyboard.store import migrations

        with self._lock:
            if self._migrate_with is None:
                return
            if migrations.stored_version(self) != migrations.SCHEMA_VERSION or not self._engine_ready():
                self._prepare_schema(self._migrate_with)
            self._migrate_with = None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside the block see one consistent state of the table (engines override it)."""
        yield

    # ---- engine primitives ------------------------------------------------------------------
    # Public (as Datasette's `Database.execute`) so that the store's own modules -- migrations,
    # copy, histograms, series, imported logs -- speak SQL through the store's one connection and
    # lock rather than reaching into it; only `store/` calls them (only `store/` speaks SQL).
    @abstractmethod
    def atomic(self, work: Callable[[], T]) -> T:
        """Run `work` in one write transaction and commit; when the database is busy, roll back and
        run `work` again (so `work` must only touch the database), never raising "busy" to the caller."""

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Execute one statement (in the current transaction, if any, else on its own under the
        store's lock) and return all its rows."""

    @abstractmethod
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Execute one statement for every row, inside the current transaction."""

    @abstractmethod
    def _lock_runs(self) -> None:
        """Inside `atomic`: make the uniqueness check and the insert of a run atomic across processes."""

    @abstractmethod
    def table_exists(self, name: str) -> bool:
        """Whether a table of that name exists (used to tell a new database from an old one)."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection; the store is unusable afterwards."""

    @abstractmethod
    def is_record_error(self, error: BaseException) -> bool:
        """Whether a failed write was refused for its data (the same records fail again whatever
        happens: split the batch and quarantine them), rather than because the database cannot be
        used now (busy, gone, disk full: keep the records and try again later)."""

    def sync_id_sequences(self) -> None:
        """After rows were inserted with explicit ids (a copy), make new ids start above them.

        Nothing to do where new ids already follow the largest one (SQLite); engines whose id
        sequences ignore explicit ids (PostgreSQL) override it."""

    # ---- table settings -------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        with self._lock:
            rows = self.execute("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    # ---- runs ----------------------------------------------------------------------------
    def create_run(self, fields: dict[str, Any], debug: bool = False) -> int:
        """Insert a run; `fields` maps `runs` columns to values (start_time required).

        A debug run replaces run `DEBUG_RUN_ID` and everything logged under it. Otherwise, when
        `fields['unique_key']` is not None and a visible run that is not failed has the same key,
        raise `DuplicateRunError` -- checked and inserted in one transaction.

        A new run's id is one more than the largest id in the table (or 1), chosen under the runs
        lock rather than by the engine: SQLite's rowid would follow the debug run's -1 with 0, and
        a PostgreSQL sequence leaves a hole for every rolled-back insert. So ids are positive and
        dense on both engines, whatever order debug and real runs come in. An import that keeps its
        own ids passes `run_id` in `fields`.
        """
        self.ready_for_writing()
        fields = empty_text_as_null(fields)
        names = [name for name in fields if name in RUN_FIELDS]
        now = time.time()

        def insert() -> int:
            self._lock_runs()
            if debug:
                self._delete_run(DEBUG_RUN_ID)
            else:
                self._refuse_duplicate(fields.get("unique_key"))
            cols = ["updated_at", *names]
            values = [now, *(fields[name] for name in names)]
            if "run_id" not in fields:
                cols.append("run_id")
                values.append(DEBUG_RUN_ID if debug else self._next_run_id())
            marks = ", ".join("?" * len(cols))
            rows = self.execute(
                f"INSERT INTO runs ({', '.join(cols)}) VALUES ({marks}) RETURNING run_id", values
            )
            run_id = rows[0][0]
            self.execute(
                "INSERT INTO repetitions (run_id, rep, start_time) VALUES (?, 0, ?)",
                (run_id, fields["start_time"]),
            )
            return run_id

        with self._lock:
            return self.atomic(insert)

    def _next_run_id(self) -> int:
        """Inside the runs lock: the id of the next real run (see `create_run`)."""
        largest = self.execute("SELECT MAX(run_id) FROM runs")[0][0]
        return max(largest or 0, 0) + 1

    def _refuse_duplicate(self, unique_key: str | None, run_id: int | None = None) -> None:
        """Inside the runs lock: raise `DuplicateRunError` if a visible run other than `run_id` that
        is not failed has this unique key (NULL, the debug run's key, never matches)."""
        if unique_key is None:
            return
        same = self.execute(  # the prefix through the index (schema v3), then the whole key
            f"SELECT run_id FROM runs WHERE substr(unique_key, 1, {UNIQUE_KEY_PREFIX})"
            f" = substr(?, 1, {UNIQUE_KEY_PREFIX}) AND unique_key = ? AND hidden = 0"
            " AND status <> 'failed' AND run_id <> ? ORDER BY run_id LIMIT 1",
            (unique_key, unique_key, DEBUG_RUN_ID if run_id is None else run_id),
        )
        if same:
            raise DuplicateRunError(same[0][0])

    def reopen_run(self, run_id: int) -> ResumePoint:
        """Set a run back to 'running' (no end time) and return where its logging stopped.

        Like `create_run`, atomic with a uniqueness check: a failed run whose configuration was
        run again since cannot come back to life beside that run (`DuplicateRunError`). Raises
        `KeyError` for an unknown run."""
        self.ready_for_writing()

        def reopen() -> ResumePoint:
            self._lock_runs()
            row = self.execute("SELECT unique_key, hidden FROM runs WHERE run_id = ?", (run_id,))
            if not row:
                raise KeyError(f"no run with id {run_id}")
            if not row[0][1]:
                self._refuse_duplicate(row[0][0], run_id)
            self._update_run(run_id, {"status": "running", "end_time": None})
            return self._resume_point(run_id)

        with self._lock:
            return self.atomic(reopen)

    def _resume_point(self, run_id: int) -> ResumePoint:
        """The last repetition of a run, its start time and, per tag, the step after its last one.
        The tags come from `scalar_blocks` and each last step from one index seek, so it costs
        the same for a run of a million points as for one of ten."""
        reps = self.execute(
            "SELECT rep, start_time FROM repetitions WHERE run_id = ? ORDER BY rep DESC LIMIT 1", (run_id,)
        )
        rep, start = reps[0] if reps else (0, time.time())
        tags = self.execute(
            "SELECT t.tag_id, t.name FROM tags t WHERE EXISTS (SELECT 1 FROM scalar_blocks b"
            " WHERE b.run_id = ? AND b.rep = ? AND b.tag_id = t.tag_id)",
            (run_id, rep),
        )
        next_steps = {}
        for tag_id, name in tags:
            last = self.execute(
                "SELECT step FROM scalars WHERE run_id = ? AND tag_id = ? AND rep = ?"
                " ORDER BY step DESC LIMIT 1",
                (run_id, tag_id, rep),
            )
            if last:
                next_steps[name] = last[0][0] + 1
        return ResumePoint(rep, start, next_steps)

    def _delete_run(self, run_id: int) -> None:
        for table in RUN_TABLES:
            self.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))

    def delete_run(self, run_id: int) -> None:
        """Delete a run and everything logged under it, in its own transaction."""
        self.ready_for_writing()
        with self._lock:
            self.atomic(lambda: self._delete_run(run_id))

    def update_run(self, run_id: int, **values: Any) -> None:
        """Set editable columns of a run now (in its own transaction) and bump `updated_at`."""
        self.ready_for_writing()
        with self._lock:
            self.atomic(lambda: self._update_run(run_id, values))

    def _update_run(self, run_id: int, values: dict[str, Any]) -> None:
        unknown = set(values) - EDITABLE_RUN_FIELDS
        if unknown:
            raise ValueError(f"cannot edit run column(s) {sorted(unknown)}")
        values = empty_text_as_null(values)
        assignments = ", ".join(f"{name} = ?" for name in values)
        self.execute(
            f"UPDATE runs SET {assignments}, updated_at = ? WHERE run_id = ?",
            (*values.values(), time.time(), run_id),
        )

    # ---- several tags per run (schema v6) ------------------------------------------------------
    def change_run_tags(self, run_id: int, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        """Add and remove tags of a run now, in one transaction, and bump its `updated_at` (live
        views see the change). Adding a tag the run has, or removing one it lacks, does nothing."""
        self.ready_for_writing()

        def change() -> None:
            self.executemany(
                "INSERT INTO run_tags (run_id, tag) VALUES (?, ?) ON CONFLICT (run_id, tag) DO NOTHING",
                [(run_id, tag) for tag in add],
            )
            self.executemany(
                "DELETE FROM run_tags WHERE run_id = ? AND tag = ?", [(run_id, t) for t in remove]
            )
            self.execute("UPDATE runs SET updated_at = ? WHERE run_id = ?", (time.time(), run_id))

        with self._lock:
            self.atomic(change)

    def run_tags(self, run_id: int | None = None) -> dict[int, list[str]]:
        """{run_id: sorted tags} of one run or of every run that has any (none in a table older than
        the tags, which reading commands read as it is: see store/location.py)."""
        from tallyboard.store.migrations import stored_version

        with self._lock:
            if (stored_version(self) or 0) < RUN_TAGS_SINCE:
                return {}
        sql, params = "SELECT run_id, tag FROM run_tags", ()
        if run_id is not None:
            sql, params = sql + " WHERE run_id = ?", (run_id,)
        with self._lock:
            rows = self.execute(sql + " ORDER BY run_id, tag", params)
        out: dict[int, list[str]] = {}
        for rid, tag in rows:
            out.setdefault(rid, []).append(tag)
        return out

    def run(self, run_id: int) -> dict[str, Any] | None:
        """The row of one run as a dict of `runs` columns, or None."""
        rows = self.runs(run_id=run_id, show_hidden=True)
        return rows[0] if rows else None

    def runs(self, run_id: int | None = None, show_hidden: bool = False) -> list[dict[str, Any]]:
        """Rows of `runs` ordered by run id, as dicts (all columns)."""
        where, params = [], []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        if not show_hidden:
            where.append("hidden = 0")
        sql = f"SELECT {', '.join(RUN_FIELDS)} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self.execute(sql + " ORDER BY run_id", params)
        return [dict(zip(RUN_FIELDS, row, strict=True)) for row in rows]

    def values(self, kind: str, run_id: int | None = None) -> dict[int, dict[str, Any]]:
        """Hparams (`kind='hparams'`) or results (`'results'`) as {run_id: {name: value}}."""
        if kind not in ("hparams", "results"):
            raise ValueError(f"kind must be 'hparams' or 'results', not {kind!r}")
        sql = f"SELECT run_id, name, value FROM {kind}"
        params: tuple = ()
        if run_id is not None:
            sql, params = sql + " WHERE run_id = ?", (run_id,)
        with self._lock:
            rows = self.execute(sql + " ORDER BY run_id, name", params)
        out: dict[int, dict[str, Any]] = {}
        for rid, name, value in rows:
            out.setdefault(rid, {})[name] = json.loads(value)
        return out

    # ---- columns of the result table ----------------------------------------------------------
    def columns(self) -> list[Column]:
        """Every column, shown ones first in display order, then hidden ones by name."""
        with self._lock:
            rows = self.execute(
                "SELECT name, kind, alias, position FROM columns ORDER BY position IS NULL, position, name"
            )
        return [Column(*row) for row in rows]

    def set_columns(self, changes: dict[str, dict[str, Any]]) -> None:
        """Set `alias` and/or `position` of columns ({name: {"alias": .., "position": ..}}) atomically;
        unknown column names raise `KeyError` and change nothing."""
        self.ready_for_writing()

        def update() -> None:
            known = {row[0] for row in self.execute("SELECT name FROM columns")}
            missing = set(changes) - known
            if missing:
                raise KeyError(f"no such column(s): {sorted(missing)}")
            for name, change in changes.items():
                for key, value in change.items():
                    if key not in ("alias", "position"):
                        raise ValueError(f"cannot set {key!r} of a column")
                    self.execute(f"UPDATE columns SET {key} = ? WHERE name = ?", (value, name))

        with self._lock:
            self.atomic(update)

    # ---- the sink's one write path ---------------------------------------------------------
    def write_batch(self, batch: Batch) -> None:
        """Commit everything in `batch` in one transaction (retried as a whole when busy)."""
        self.ready_for_writing()
        with self._lock:
            new_tags: dict[str, int] = {}
            self.atomic(lambda: self._write(batch, new_tags))
            self._tag_ids.update(new_tags)  # only ids whose insert was committed

    def _write(self, batch: Batch, new_tags: dict[str, int]) -> None:
        new_tags.clear()

        def tag_id(name: str) -> int:
            return self._tag_id(name, new_tags)

        for run_id, tag, rows in batch.scalars:
            # Ids are trusted ints, inlined so one prepared statement serves the whole series.
            self.executemany(
                "INSERT INTO scalars (run_id, tag_id, rep, step, epoch, walltime_ms, value)"
                f" VALUES ({int(run_id)}, {int(tag_id(tag))}, ?, ?, ?, {WALLTIME_MS_SQL}, ?)"
                " ON CONFLICT (run_id, tag_id, rep, step) DO UPDATE SET epoch = excluded.epoch,"
                " walltime_ms = excluded.walltime_ms, value = excluded.value",
                rows,
            )
        if batch.scalars:
            self._rebuild_blocks([(run_id, tag_id(tag), rows) for run_id, tag, rows in batch.scalars])
        if batch.media:
            self.executemany(
                "INSERT INTO media (run_id, tag_id, rep, step, epoch, walltime_ms, kind, width, height, png)"
                f" VALUES (?, ?, ?, ?, ?, {WALLTIME_MS_SQL}, ?, ?, ?, ?)",
                [(r[0], tag_id(r[1]), *r[2:]) for r in batch.media],
            )
        if batch.texts:
            self.executemany(
                "INSERT INTO texts (run_id, tag_id, rep, step, epoch, walltime_ms, kind, content, markdown)"
                f" VALUES (?, ?, ?, ?, ?, {WALLTIME_MS_SQL}, ?, ?, ?)",
                [(r[0], tag_id(r[1]), *r[2:8], r[8] if len(r) > 8 else 0) for r in batch.texts],
            )
        if batch.histograms:
            histogram_rows.insert(self, batch.histograms, tag_id, WALLTIME_MS_SQL)
        for kind, rows in (("hparams", batch.hparams), ("results", batch.results)):
            if rows:
                self._write_values(kind, rows)
        if batch.repetitions:
            self.executemany(
                "INSERT INTO repetitions (run_id, rep, start_time) VALUES (?, ?, ?)"
                " ON CONFLICT (run_id, rep) DO UPDATE SET start_time = excluded.start_time",
                batch.repetitions,
            )
        self._write_console_and_environments(batch)
        for run_id, values in batch.run_updates:
            self._update_run(run_id, values)

    def _write_console_and_environments(self, batch: Batch) -> None:
        if batch.console:
            self.executemany(
                "INSERT INTO console (run_id, rep, walltime_ms, stream, line)"
                f" VALUES (?, ?, {WALLTIME_MS_SQL}, ?, ?)",
                batch.console,
            )
        if batch.environments:
            self.executemany(
                "INSERT INTO environments (run_id, content) VALUES (?, ?)"
                " ON CONFLICT (run_id) DO UPDATE SET content = excluded.content",
                batch.environments,
            )

    def put_values(self, kind: str, rows: list[tuple[int, str, str]]) -> None:
        """Write hparams (`kind='hparams'`) or results (`'results'`) now, in their own transaction:
        rows of (run_id, name, json_value); a name already set is overwritten."""
        self.ready_for_writing()
        if kind not in ("hparams", "results"):
            raise ValueError(f"kind must be 'hparams' or 'results', not {kind!r}")
        with self._lock:
            self.atomic(lambda: self._write_values(kind, rows))

    def _write_values(self, kind: str, rows: list[tuple[int, str, str]]) -> None:
        """Hparams or results, each name also a column of the table, and the runs' `updated_at`."""
        self.executemany(
            f"INSERT INTO {kind} (run_id, name, value) VALUES (?, ?, ?)"
            " ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value",
            rows,
        )
        self.executemany(
            "INSERT INTO columns (name, kind, alias, position)"
            " SELECT ?, ?, ?, COALESCE(MAX(position), -1) + 1 FROM columns WHERE true"
            " ON CONFLICT (name) DO NOTHING",
            [(name, kind[:-1], name) for name in dict.fromkeys(name for _, name, _ in rows)],
        )
        now = time.time()
        touched = {run_id for run_id, _, _ in rows}
        self.executemany("UPDATE runs SET updated_at = ? WHERE run_id = ?", [(now, r) for r in touched])

    def _tag_id(self, name: str, new_tags: dict[str, int]) -> int:
        """The id of tag `name`, interned inside the current transaction when new (and then
        remembered in `new_tags`, which the caller keeps only once the transaction committed)."""
        known = self._tag_ids.get(name) or new_tags.get(name)
        if known is None:
            self.execute("INSERT INTO tags (name) VALUES (?) ON CONFLICT (name) DO NOTHING", (name,))
            known = self.execute("SELECT tag_id FROM tags WHERE name = ?", (name,))[0][0]
            new_tags[name] = known
        return known

    def _rebuild_blocks(self, series: list[tuple[int, int, list[ScalarRow]]]) -> None:
        """Recompute, from `scalars`, the `scalar_blocks` rows of the blocks that the rows of
        `series` ((run_id, tag_id, rows) each) were written to.

        Recomputed rather than merged with the new values: a step logged again with another value
        must not leave its old value as a block's extreme, and MIN/MAX skip NaN (NULL) alike on
        both engines. It re-reads at most the rest of the first and last block a series touched."""
        self.executemany(
            REBUILD_BLOCK,
            [block for run_id, tag_id, rows in series for block in touched_blocks(run_id, tag_id, rows)],
        )

    # ---- records the database rejected (see store/quarantine.py) -------------------------------
    def quarantine(self, record: Quarantined) -> None:
        """Set a rejected record aside, in its own transaction."""
        self.ready_for_writing()
        row = (record.run_id, record.kind, record.tag, record.error, record.record, record.quarantined_at)
        with self._lock:
            self.atomic(
                lambda: self.execute(
                    "INSERT INTO quarantine (run_id, kind, tag, error, record, quarantined_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    row,
                )
            )

    def quarantined(self, run_id: int | None = None) -> list[Quarantined]:
        """The records set aside (of one run, or all), oldest first."""
        sql = "SELECT quarantine_id, run_id, kind, tag, error, record, quarantined_at FROM quarantine"
        params: tuple = ()
        if run_id is not None:
            sql, params = sql + " WHERE run_id = ?", (run_id,)
        with self._lock:
            rows = self.execute(sql + " ORDER BY quarantine_id", params)
        return [Quarantined(*row) for row in rows]

    # ---- artefacts listed with their run (the bytes: tallyboard/artifacts.py) -------------------
    def add_artifact(self, row: ArtifactRow) -> None:
        """List an artefact with its run, in its own transaction; a name logged again is replaced."""
        self.ready_for_writing()
        with self._lock:
            self.atomic(
                lambda: self.execute(
                    f"INSERT INTO artifacts ({ARTIFACT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (run_id, name) DO UPDATE SET kind = excluded.kind, size = excluded.size,"
                    " sha256 = excluded.sha256, step = excluded.step, logged_at = excluded.logged_at",
                    tuple(row),
                )
            )

    def artifacts(self, run_id: int, name: str | None = None) -> list[ArtifactRow]:
        """The artefacts of a run (or the one called `name`), by name."""
        with self._lock:
            if not self.table_exists("artifacts"):  # a table older than schema v9, opened to read
                return []
            return [ArtifactRow(*row) for row in self.execute(*artifacts_query(run_id, name))]

    def artifact_hashes(self) -> list[str]:
        """The sha256 of every blob some artefact of the table names (what a copy must carry)."""
        with self._lock:
            if not self.table_exists("artifacts"):
                return []
            return [
                sha256 for (sha256,) in self.execute("SELECT DISTINCT sha256 FROM artifacts ORDER BY sha256")
            ]

    # ---- reads of logged records --------------------------------------------------------------
    def tag_names(self, run_id: int, table: str = "scalars") -> list[str]:
        """Tags used by a run in `table` ('scalars', 'media', 'texts' or 'histograms'), sorted."""
        if table not in ("scalars", "media", "texts", "histograms"):
            raise ValueError(f"no logged records in table {table!r}")
        with self._lock:
            rows = self.execute(  # one index seek per known tag, never a scan of the run's rows
                "SELECT t.name FROM tags t WHERE EXISTS"
                f" (SELECT 1 FROM {table} x WHERE x.run_id = ? AND x.tag_id = t.tag_id) ORDER BY t.name",
                (run_id,),
            )
        return [row[0] for row in rows]

    def scalars(
        self,
        run_id: int,
        tag: str,
        rep: int | None = None,
        columns: tuple[str, ...] = ("rep", "step", "epoch", "walltime_ms", "value"),
    ) -> list[tuple]:
        """One series ordered by (rep, step), as rows of `columns` (names of `scalars` columns, or
        'value_or_nan': the value with NaN as the text 'nan', which float() and numpy read as NaN,
        or 'epoch_or_minus_one'; a fast path asks only for what it needs)."""
        unknown = set(columns) - _SCALAR_COLUMNS.keys()
        if unknown:
            raise ValueError(f"unknown scalar column(s) {sorted(unknown)}")
        selected = ", ".join(_SCALAR_COLUMNS[name] for name in columns)
        sql = (
            f"SELECT {selected} FROM scalars WHERE run_id = ?"
            " AND tag_id = (SELECT tag_id FROM tags WHERE name = ?)"
        )
        params: tuple = (run_id, tag)
        if rep is not None:
            sql, params = sql + " AND rep = ?", (*params, rep)
        with self._lock:
            return self.execute(sql + " ORDER BY rep, step", params)

    def repetitions(self, run_id: int) -> list[int]:
        with self._lock:
            rows = self.execute("SELECT rep FROM repetitions WHERE run_id = ? ORDER BY rep", (run_id,))
        return [row[0] for row in rows]

    def repetition_starts(self, run_id: int) -> dict[int, float]:
        """{rep: start_time} of a run (what a lossless export keeps; `repetitions` lists reps only)."""
        with self._lock:
            rows = self.execute(
                "SELECT rep, start_time FROM repetitions WHERE run_id = ? ORDER BY rep", (run_id,)
            )
        return dict(rows)

    def media(self, run_id: int | None, kind: str | None = None, **filters: Any) -> list[tuple]:
        """Media rows (media_id, step, epoch, rep, tag, walltime_ms, width, height, png) by media_id.
        `filters` may hold id, step, tag, epoch, repetition (None = any)."""
        return self._records("media m", "m", "media_id", _MEDIA_COLUMNS, run_id, kind, filters)

    def texts(self, run_id: int, kind: str | None = None, **filters: Any) -> list[tuple]:
        """Text rows (text_id, step, epoch, rep, tag, walltime_ms, content), same filters as `media`."""
        return self._records("texts x", "x", "text_id", _TEXT_COLUMNS, run_id, kind, filters)

    def histograms(
        self, run_id: int, tag: str | None = None, repetition: int | None = None
    ) -> list[HistogramRecord]:
        """A run's histograms (one tag, one repetition, or all), ordered by tag, repetition, step."""
        with self._lock:
            return histogram_rows.read(self, run_id, tag, repetition)

    def markdown_text_ids(self, run_id: int) -> set[int]:
        """The ids of the run's texts logged with `markdown=True` (schema v8)."""
        with self._lock:
            rows = self.execute("SELECT text_id FROM texts WHERE run_id = ? AND markdown = 1", (run_id,))
        return {text_id for (text_id,) in rows}

    def console(
        self, run_id: int, after: int = 0, limit: int | None = None, search: str | None = None
    ) -> list[ConsoleLine]:
        """A run's captured console lines with `console_id > after`, oldest first, at most `limit`;
        `search` keeps the lines containing it (case-insensitive, taken literally)."""
        sql, params = console_query(run_id, after, limit, search)
        with self._lock:
            return [ConsoleLine(*row) for row in self.execute(sql, params)]

    def environment(self, run_id: int) -> str | None:
        """The run's environment as stored (JSON text), None when it recorded none."""
        with self._lock:
            rows = self.execute("SELECT content FROM environments WHERE run_id = ?", (run_id,))
        return rows[0][0] if rows else None

    def _records(self, table, alias, id_column, columns, run_id, kind, filters) -> list[tuple]:
        where, params = [], []
        names = {"id": id_column, "step": "step", "epoch": "epoch", "repetition": "rep", "tag": "tag"}
        if run_id is not None:
            where.append(f"{alias}.run_id = ?")
            params.append(run_id)
        if kind is not None:
            where.append(f"{alias}.kind = ?")
            params.append(kind)
        for key, value in filters.items():
            if key not in names:
                raise TypeError(f"unknown filter {key!r}; use id, step, tag, epoch or repetition")
            if value is None:
                continue
            where.append("t.name = ?" if key == "tag" else f"{alias}.{names[key]} = ?")
            params.append(value)
        sql = f"SELECT {columns} FROM {table} JOIN tags t ON t.tag_id = {alias}.tag_id"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            return self.execute(f"{sql} ORDER BY {alias}.{id_column}", params)


# Every store alive in this process, closed when the interpreter exits (see `_close_live_stores`).
_live_stores: weakref.WeakSet[Store] = weakref.WeakSet()


def _close_live_stores() -> None:
    """Close this process's open stores at exit, after the runs were ended (atexit runs hooks last
    registered first, and the sink registers its own when a run opens, after this module loaded).
    Otherwise a table held in a global is collected during shutdown with its connection open,
    which psycopg reports as a ResourceWarning -- noise at the end of every script. A forked
    child leaves its parent's stores alone (closing a SQLite connection copied across a fork
    could checkpoint the parent's WAL under it)."""
    for store in list(_live_stores):
        if store._opened_by == os.getpid():
            try:
                store.close()
            except Exception:  # the process is ending: a failed close must not hide anything
                logging.getLogger(__name__).debug("tallyboard: could not close %s", store.url, exc_info=True)


atexit.register(_close_live_stores)

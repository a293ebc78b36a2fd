"""The dashboard's read queries (`Store.reads`; its few edits go through `Store.update_run` /
`set_columns`).

Why a module of its own: the dashboard reads in ways the logging path never does (a page of the
runs table, one bucketed range of a series, a PNG by id) and it must never block training. Its
store lends it a small pool of connections for the serving threads (`Engine.reader_connection`),
and every query is a short statement that an index answers (a series is one range scan of its
`scalar_blocks` keys, each block decoded by store/block_codec.py). SQL is plain standard SQL
written with `?` placeholders; the engine rewrites them to its own (`Engine.reader_sql`).
Nothing here writes; the connections of a read-only dashboard cannot (SQLite `mode=ro`,
PostgreSQL read-only transactions), so it works on a read-only file system or a file its user may not write.
"""

from __future__ import annotations

import functools
import json
import queue
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from tallyboard.errors import DatabaseUnreachable
from tallyboard.filter import Node
from tallyboard.store import alert_content, block_reads, chart_cuts
from tallyboard.store import environments as environment_rows
from tallyboard.store import histograms as histogram_rows
from tallyboard.store.block_codec import last_epoch, last_of_deltas, unpack, unpack_values, value_or_none
from tallyboard.store.block_reads import DATA, FROM_STEP, KEY
from tallyboard.store.logged import artifacts_query, console_query
from tallyboard.store.records import ArtifactRow, Column, ConsoleLine
from tallyboard.store.run_fields import DETAIL_FIELDS, LISTED_FIELDS, window_tags_of
from tallyboard.store.runs_sql import Dialect, Translator, value_names_sql
from tallyboard.store.runs_walk import matching_sql

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.store.base import Store

# A number as JSON writes it; groups 1 and 2 (fraction, exponent) make it a float.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")

STATUSES = ("running", "finished", "failed")
T = TypeVar("T")


# The blocks of one series that a read of [lo, hi] meets, in step order: a seek to the block that
# holds `lo` (block_reads.FROM_STEP), then a range scan. The series of one chart are read in one
# statement of such branches (`DashboardQueries._blocks_of`), `BRANCHES` series at most (SQLite
# allows 500 terms in a compound SELECT).
_BRANCH = (
    "SELECT run_id, tag_id, rep, first_step, {columns} FROM scalar_blocks"
    f" WHERE {KEY} AND {FROM_STEP} AND first_step <= ?"
)
BRANCHES = 200
_SUMMARY = "last_step, lowest, highest, last_value"  # a block's summary, what bucketing reads first
_BLOCK_DATA = f"SELECT {DATA} FROM scalar_blocks WHERE {KEY} AND first_step = ?"
_BLOCK_TAIL = f"SELECT walltime_data, epoch_data FROM scalar_blocks WHERE {KEY} AND first_step = ?"


class RunsVersion(NamedTuple):
    """The runs' version (`DashboardQueries.runs_version`). A new run has the largest id and the
    latest `updated_at`; an edit sets `updated_at`; a deletion raises `meta` 'runs_deleted'
    (schema v11; None before it, read as 0)."""

    last_run_id: int
    deleted: int
    updated_at: float


RUNS_VERSION = """SELECT (SELECT MAX(run_id) FROM runs),
    (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'runs_deleted'),
    (SELECT MAX(updated_at) FROM runs)"""


@dataclass(frozen=True)
class SeriesKey:
    """One logged series: a tag of a repetition of a run."""

    run_id: int
    tag_id: int
    rep: int


class SeriesOfRun(NamedTuple):
    """One scalar series of a run (`DashboardQueries.tags_of_runs`); `window`: its steps count the
    windows of a monitor Stat (its tag is in the run's `window_tags`)."""

    run_id: int
    tag_id: int
    tag: str
    rep: int
    start_time: float
    window: bool

    @property
    def key(self) -> SeriesKey:
        return SeriesKey(self.run_id, self.tag_id, self.rep)


class DashboardQueries:
    """Thread-safe access to one store for the dashboard, through a small pool of connections.

    A pool rather than a connection per thread: the server's thread pool has dozens of threads,
    and each connection holds its own page cache, so per-thread connections would let memory grow
    with the number of threads that ever served a request."""

    def __init__(
        self, store: Store, connections: int = 4, read_only: bool = False, owns_store: bool = False
    ) -> None:
        """Queries through connections lent by `store` (its engine makes them); `owns_store`: the
        store is closed with these queries (`tallyboard.store.open_queries` opened it for them).
        Why the store is given, never a location: opening one needs the engines, which import this
        module (`Store.reads`)."""
        self._owned: Store | None = store if owns_store else None
        self.store = store
        self.url = self.store.url
        self.read_only = read_only
        self.postgres = self.store.dialect == "postgresql"
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(connections)
        self._closing = threading.Lock()  # a connection in use when the pool closes is closed on return
        self._closed = False
        self._versions: Any = None  # SQLite: the one connection `data_version` asks (see there)
        self._versions_lock = threading.Lock()
        self._unknown_versions = 0
        self._connections_asked = 0
        try:
            self._one("SELECT value FROM meta WHERE key = 'schema_version'")
        except Exception as error:
            self.close()
            raise ValueError(f"{str(self.url)!r} is not a tallyboard result table ({error})") from None

    # -- plumbing -----------------------------------------------------------------------------
    def _connect(self) -> Any:
        return self.store.reader_connection(self.read_only)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled connection, returned to the pool afterwards, unless it died under its statement
        (the server stopped or restarted): then every idle one is dropped too (they talked to the
        same server) and `DatabaseUnreachable` says so; the next statement connects anew."""
        with self._slots:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                try:
                    conn = self._connect()
                except Exception as error:
                    raise DatabaseUnreachable(self._unreachable(error)) from error
            try:
                yield conn
            except Exception as error:
                if not self.store.reader_lost(conn):
                    self._give_back(conn)
                    self.store.raise_if_damage(error)
                    raise
                self._drop_idle()
                with suppress(Exception):
                    conn.close()
                raise DatabaseUnreachable(self._unreachable(error)) from error
            self._give_back(conn)

    def _give_back(self, conn: Any) -> None:
        """Return `conn` to the pool; close it instead when the pool was closed while it was in use."""
        with self._closing:
            if self._closed:
                conn.close()
            else:
                self._idle.put(conn)

    def _unreachable(self, error: Exception) -> str:
        reason = " ".join(str(error).split()) or type(error).__name__
        return f"the database {self.url} does not answer ({reason}); ask again once it is back"

    def _retried(self, statement: Callable[[], T]) -> T:
        """Run a read again once on a new connection when its pooled one had died meanwhile (a
        server restarted since the last request): reads can always run twice."""
        try:
            return statement()
        except DatabaseUnreachable:
            return statement()

    def _sql(self, sql: str) -> str:
        return self.store.reader_sql(sql)

    def _run(self, sql: str, params: Sequence[Any], fetch: str) -> Any:
        def statement() -> Any:
            with self._connection() as conn:
                with self._read_only(conn):
                    cursor = conn.execute(self._sql(sql), tuple(params))
                return cursor.fetchall() if fetch == "all" else cursor.fetchone()

        return self._retried(statement)

    def _read_only(self, conn: Any) -> AbstractContextManager[Any]:
        """PostgreSQL opened read-only: the block's statements in one read-only transaction, ended
        with the block (not a session setting, which PgBouncer would pass on to other clients)."""
        if not (self.postgres and self.read_only):
            return nullcontext()
        transaction: AbstractContextManager[Any] = conn.transaction()
        return transaction

    def _each(self, sql: str, param_rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """The first row of `sql` for each parameter row, on one connection: SQLite reruns its
        cached statement; PostgreSQL sends them all in one pipeline (one round trip, not one each)."""
        if not param_rows:
            return []

        def statement() -> list[tuple[Any, ...]]:
            with self._connection() as conn, self._read_only(conn):
                return self.store.first_rows(conn, sql, param_rows)

        return self._retried(statement)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._run(sql, params, "all")
        return rows

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query built elsewhere (the runs table's views: dashboard/runs_sql.py)."""
        return self._all(sql, params)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._run(sql, params, "one")
        return row

    def close(self) -> None:
        """Close the idle connections, and those in use as they come back (and the store, when these
        queries opened it)."""
        with self._closing:
            self._closed = True
            self._drop_idle()
        with self._versions_lock:
            if self._versions is not None:
                with suppress(Exception):
                    self._versions.close()
                self._versions = None
        if self._owned is not None:
            self._owned.close()

    def _drop_idle(self) -> None:
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return
            with suppress(Exception):  # a dead connection may fail to close: it is gone either way
                conn.close()

    # -- the runs table -----------------------------------------------------------------------
    def runs_version(self) -> RunsVersion:
        """What changes whenever a run is added, deleted or edited: three index seeks, whatever the
        number of runs (a count of the runs read them all)."""
        row = self._one(RUNS_VERSION) or (None, None, None)  # always a row
        last, deleted, latest = row
        return RunsVersion(int(last or 0), int(deleted or 0), float(latest or 0.0))

    def data_version(self) -> str:
        """A text that differs from the last one whenever something committed to the table since:
        what a cached answer is kept against (dashboard/answer_cache.py).

        SQLite: `PRAGMA data_version`, which changes when another connection commits. Its values
        are comparable only on one connection, so one connection of its own asks it, and that
        connection never writes. PostgreSQL: the server's snapshot (xmin:xmax:in-progress xids),
        which changes whenever a transaction that wrote anything (to any database of the server)
        begins or ends: more changes than this table's, never fewer."""
        if self.postgres:
            row = self._one("SELECT txid_current_snapshot()::text")
            return f"pg:{row[0] if row else ''}"
        with self._versions_lock:
            try:
                if self._versions is None:
                    self._versions = self._connect()
                    self._connections_asked += 1  # a new connection counts anew: never compared
                version = self._versions.execute("PRAGMA data_version").fetchone()[0]
                return f"sqlite:{self._connections_asked}:{version}"
            except Exception:  # a version never seen again: nothing is kept, and the request's own
                if self._versions is not None:  # statements meet the fault and say what it is
                    with suppress(Exception):
                        self._versions.close()
                    self._versions = None
                self._unknown_versions += 1
                return f"unknown:{self._unknown_versions}"

    def run_ids_where(self, tree: Node, show_hidden: bool) -> list[int]:
        """The ids of the runs a parsed filter selects, by run id, answered in SQL from the typed
        values (store/runs_sql.py); raises `NotInSql` where SQL cannot say it exactly (the caller
        filters in memory then)."""
        hparams, results = (
            {row[0] for row in self._all(value_names_sql(table))} for table in ("hparams", "results")
        )
        condition = Translator(hparams, results, Dialect.of(self.postgres)).condition(tree)
        return [row[0] for row in self._all(*matching_sql(condition, show_hidden))]

    def runs(self, updated_after: float | None = None) -> list[dict[str, Any]]:
        """Runs with their hparams and results (all, or those changed at or after a time)."""
        where, params = ("WHERE updated_at >= ?", [updated_after]) if updated_after is not None else ("", [])
        rows = self._all(f"SELECT {', '.join(LISTED_FIELDS)} FROM runs {where}", params)
        return self._with_values(rows, f"IN (SELECT run_id FROM runs {where})", params)

    def run_field(self, field: str) -> list[tuple[int, Any]]:
        """(run id, that field) of every run: what ordering the runs table by a run field needs."""
        if field not in LISTED_FIELDS:
            raise ValueError(f"{field!r} is not a field of the runs table")
        return self._all(f"SELECT run_id, {field} FROM runs")

    def runs_of(self, run_ids: Sequence[int]) -> list[dict[str, Any]]:
        """Some runs by id (hidden ones too) with their hparams and results."""
        if not run_ids:
            return []
        # PostgreSQL without statistics plans `IN (100 ids)` as a scan of every value row (0.5 s at
        # 100,000 runs): an `= ANY` of one array is planned as the index's 100 seeks.
        among, params = ("= ANY(?)", [list(run_ids)]) if self.postgres else (
            f"IN ({', '.join('?' * len(run_ids))})", list(run_ids))  # fmt: skip
        rows = self._all(f"SELECT {', '.join(LISTED_FIELDS)} FROM runs WHERE run_id {among}", params)
        return self._with_values(rows, among, params)

    def _with_values(
        self, rows: list[tuple[Any, ...]], among: str, params: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """Runs (rows of LISTED_FIELDS) as dicts with their hparams and results (those whose
        `run_id {among}` holds)."""
        runs = {row[0]: dict(zip(LISTED_FIELDS, row, strict=True), hparams={}, results={}) for row in rows}
        if not runs:
            return []
        parsed: dict[str, Any] = {}  # a sweep repeats its values: each distinct text is parsed once
        for table in ("hparams", "results"):
            for run_id, name, value in self._all(
                f"SELECT run_id, name, value FROM {table} WHERE run_id {among}", params
            ):
                if run_id in runs:
                    if value not in parsed:
                        parsed[value] = _json_value(value)
                    runs[run_id][table][name] = parsed[value]
        for run in runs.values():
            run["tags"] = []
        for run_id, tag in self._all(
            f"SELECT run_id, tag FROM run_tags WHERE run_id {among} ORDER BY tag", params
        ):
            if run_id in runs:
                runs[run_id]["tags"].append(tag)
        return list(runs.values())

    def run(self, run_id: int) -> dict[str, Any] | None:
        """Everything about one run that its page shows, except the logged series and media."""
        row = self._one(f"SELECT {', '.join(DETAIL_FIELDS)} FROM runs WHERE run_id = ?", [run_id])
        if row is None:
            return None
        run = dict(zip(DETAIL_FIELDS, row, strict=True))
        for table in ("hparams", "results"):
            pairs = self._all(f"SELECT name, value FROM {table} WHERE run_id = ? ORDER BY name", [run_id])
            run[table] = {name: _json_value(value) for name, value in pairs}
        run["tags"] = [
            row[0] for row in self._all("SELECT tag FROM run_tags WHERE run_id = ? ORDER BY tag", [run_id])
        ]
        reps = self._all("SELECT rep, start_time FROM repetitions WHERE run_id = ? ORDER BY rep", [run_id])
        run["repetitions"] = [{"rep": rep, "start_time": start} for rep, start in reps]
        return run

    def run_states(self, run_ids: Sequence[int]) -> list[dict[str, Any]]:
        """status and updated_at of some runs (what a live view watches)."""
        marks = ", ".join("?" * len(run_ids))
        sql = f"SELECT run_id, status, updated_at FROM runs WHERE run_id IN ({marks}) ORDER BY run_id"
        return [
            dict(zip(("run_id", "status", "updated_at"), row, strict=True))
            for row in self._all(sql, list(run_ids))
        ]

    def columns(self) -> list[Column]:
        """The column preferences (alias, position; position None = hidden)."""
        return [Column(*row) for row in self._all("SELECT name, kind, alias, position FROM columns")]

    def experiments(self) -> list[dict[str, Any]]:
        """The experiments of the visible runs: name, runs and latest start, the latest first (the
        dashboard's views open on it, scoped to one experiment)."""
        rows = self._all(
            "SELECT experiment, COUNT(*), MAX(start_time) FROM runs WHERE hidden = 0 AND run_id <> -1"
            " GROUP BY experiment ORDER BY MAX(start_time) DESC, experiment"
        )
        return [{"experiment": name, "runs": runs, "latest": latest} for name, runs, latest in rows]

    def value_names_of(self, experiment: str) -> dict[str, set[str]]:
        """{'hparams': names, 'results': names} that the runs of one experiment hold."""
        return {
            table: {
                row[0]
                for row in self._all(
                    f"SELECT DISTINCT v.name FROM {table} v JOIN runs r ON r.run_id = v.run_id"
                    " WHERE r.experiment = ?",
                    [experiment],
                )
            }
            for table in ("hparams", "results")
        }

    def run_tags(self) -> list[str]:
        """Distinct run tags, for autocompletion."""
        return [row[0] for row in self._all("SELECT DISTINCT tag FROM runs WHERE tag <> '' ORDER BY tag")]

    # -- series -------------------------------------------------------------------------------
    def tags_of_runs(self, run_ids: Sequence[int]) -> list[SeriesOfRun]:
        """Every scalar series of the given runs, with its tag's name and its repetition's start.

        A series exists exactly when it has a `scalar_blocks` row, so the test reads those (one row
        per 256 points): SQLite seeks one per candidate, and PostgreSQL, which turns EXISTS into a
        semi-join that may scan them all, scans 4,000 rows for a million points, not the points."""
        if not run_ids:
            return []
        marks = ", ".join("?" * len(run_ids))
        sql = f"""
            SELECT r.run_id, t.tag_id, t.name, r.rep, r.start_time, u.window_tags
            FROM repetitions r JOIN runs u ON u.run_id = r.run_id CROSS JOIN tags t
            WHERE r.run_id IN ({marks}) AND EXISTS (
                SELECT 1 FROM scalar_blocks b
                WHERE b.run_id = r.run_id AND b.tag_id = t.tag_id AND b.rep = r.rep)
            ORDER BY r.run_id, t.name, r.rep"""
        windows = functools.cache(window_tags_of)
        return [
            SeriesOfRun(run_id, tag_id, tag, rep, start, tag in windows(marked))
            for run_id, tag_id, tag, rep, start, marked in self._all(sql, list(run_ids))
        ]

    def metric_points(self, run_ids: Sequence[int], tag: str) -> list[tuple[int, int, float | None]]:
        """(run_id, rep, value) of one tag of some runs, ordered by run, rep and step: what the
        statistics views reduce to one number per repetition (value None for NaN)."""
        if not run_ids:
            return []
        marks = ", ".join("?" * len(run_ids))
        sql = f"""SELECT run_id, rep, value_data FROM scalar_blocks
            WHERE run_id IN ({marks}) AND tag_id = (SELECT tag_id FROM tags WHERE name = ?)
            ORDER BY run_id, rep, first_step"""
        return [
            (run_id, rep, value_or_none(value))
            for run_id, rep, data in self._all(sql, [*run_ids, tag])
            for value in unpack_values(data)
        ]

    def series_bounds(
        self, run_ids: Sequence[int], tag_ids: Sequence[int] | None = None
    ) -> dict[SeriesKey, tuple[int, int]]:
        """First and last step of every scalar series of some runs (of some tags, when given), in
        one statement over their blocks' summaries (a row per block of up to 1,024 points)."""
        if not run_ids or tag_ids == []:
            return {}
        where, params = _among(run_ids, tag_ids)
        sql = f"""SELECT run_id, tag_id, rep, MIN(first_step), MAX(last_step) FROM scalar_blocks
            WHERE {where} GROUP BY run_id, tag_id, rep"""
        return {SeriesKey(r, t, p): (first, last) for r, t, p, first, last in self._all(sql, params)}

    def _blocks_of(self, keys: Sequence[SeriesKey], columns: str, lo: int, hi: int) -> list[tuple[Any, ...]]:
        """(run_id, tag_id, rep, first_step, *columns) of the blocks of `keys` that hold a step of
        [lo, hi] (and, where `lo` falls in a gap, the block before it), by series and step: one
        statement per `BRANCHES` series, each branch an index seek and a range scan."""
        rows: list[tuple[Any, ...]] = []
        for at in range(0, len(keys), BRANCHES):
            part = keys[at : at + BRANCHES]
            sql = " UNION ALL ".join([_BRANCH.format(columns=columns)] * len(part)) + " ORDER BY 1, 2, 3, 4"
            params = [
                v for k in part for v in (k.run_id, k.tag_id, k.rep, k.run_id, k.tag_id, k.rep, lo, lo, hi)
            ]
            rows += self._all(sql, params)
        return rows

    def points(self, key: SeriesKey, lo: int, hi: int, limit: int | None = None) -> list[tuple[Any, ...]]:
        """Raw (step, epoch, walltime_ms, value) rows with lo <= step <= hi, in step order."""
        return block_reads.points(self._all, (key.run_id, key.tag_id, key.rep), lo, hi, limit)

    def points_of(
        self, keys: Sequence[SeriesKey], lo: int, hi: int
    ) -> dict[SeriesKey, list[tuple[Any, ...]]]:
        """`points` of many series of one chart with lo <= step <= hi, in one statement (`_blocks_of`)."""
        keys = list(dict.fromkeys(keys))
        out: dict[SeriesKey, list[tuple[Any, ...]]] = {key: [] for key in keys}
        by_ids = {(key.run_id, key.tag_id, key.rep): found for key, found in out.items()}
        for r, t, p, _, *data in self._blocks_of(keys, DATA, lo, hi):
            by_ids[(r, t, p)].extend(block_reads.rows(block_reads.cut(unpack(*data), lo, hi)))
        return out

    # -- repeated steps (imports keep every point: store/imported.py) ---------------------------
    def repeated_step_series(self, run_id: int) -> list[tuple[int, str, int, int, int, int]]:
        """(tag_id, tag, rep, points, same-step repeats, steps that went back) of every series of
        the run that holds several points at a step; a repeat is a point whose step equals the one
        before it in source order, a step back one whose step is smaller."""
        return self._all(
            """
            SELECT e.tag_id, t.name, e.rep, COUNT(*),
                   SUM(CASE WHEN e.step = e.prev THEN 1 ELSE 0 END),
                   SUM(CASE WHEN e.step < e.prev THEN 1 ELSE 0 END)
            FROM (SELECT tag_id, rep, step, LAG(step) OVER (PARTITION BY tag_id, rep ORDER BY seq) AS prev
                  FROM scalar_events WHERE run_id = ?) e
            JOIN tags t ON t.tag_id = e.tag_id
            GROUP BY e.tag_id, t.name, e.rep ORDER BY t.name, e.rep""",
            [run_id],
        )

    def scalar_events(self, key: SeriesKey, after_seq: int, limit: int) -> list[tuple[Any, ...]]:
        """(seq, step, epoch, walltime_ms, value) of a series' points in source order, from seq
        `after_seq` + 1 on, at most `limit`; [] when the series never repeated a step."""
        return self._all(
            "SELECT seq, step, epoch, walltime_ms, value FROM scalar_events"
            " WHERE run_id = ? AND tag_id = ? AND rep = ? AND seq > ? ORDER BY seq LIMIT ?",
            [key.run_id, key.tag_id, key.rep, after_seq, limit],
        )

    def buckets(
        self, key: SeriesKey, lo: int, hi: int, span: int, origin: int | None = None
    ) -> list[tuple[Any, ...]]:
        """Per bucket that holds points, its last row (step, epoch, walltime_ms, value), then its
        min and max value. Bucket k holds the steps of [origin + k * span, origin + (k + 1) * span)
        that lie in [lo, hi]; `origin` (<= lo) defaults to `lo`. Exactly what MIN, MAX and the last
        step of the bucket's points give (NaN is skipped; a NaN-only bucket has None)."""
        return self.buckets_of([key], lo, hi, span, origin).get(key, [])

    def buckets_of(
        self, keys: Sequence[SeriesKey], lo: int, hi: int, span: int, origin: int | None = None
    ) -> dict[SeriesKey, list[tuple[Any, ...]]]:
        """`buckets` of many series on one grid (the series of one chart), in three statements
        whatever their number (up to `BRANCHES` series; more take a statement per `BRANCHES`).

        A block that lies inside one bucket is read from its summary (min, max, last value) and,
        when it holds the bucket's last point, the last walltime and epoch of its data; only the
        blocks a bucket's edge or an end of [lo, hi] cuts are decoded whole. So a series of 10^8
        points costs some 10^5 summary rows and a decoded block per bucket at most."""
        origin = lo if origin is None else origin
        keys = list(dict.fromkeys(keys))
        gathered: dict[tuple[int, int, int], dict[int, _Bucket]] = {
            (key.run_id, key.tag_id, key.rep): {} for key in keys
        }
        cut: list[tuple[int, int, int, int]] = []
        for r, t, p, first, last, lowest, highest, last_value in self._blocks_of(keys, _SUMMARY, lo, hi):
            buckets = gathered[(r, t, p)]
            k = (first - origin) // span
            if first < lo or last > hi or (last - origin) // span != k:
                cut.append((r, t, p, first))
                continue
            bucket = buckets.setdefault(k, _Bucket())
            bucket.merge(lowest, highest)
            if bucket.last is None or last > bucket.last[0]:
                bucket.last, bucket.last_block = (last, None, None, last_value), first
        by_series: dict[tuple[int, int, int], list[tuple[Any, ...]]] = {}
        for (r, t, p, _), data in zip(cut, self._each(_BLOCK_DATA, cut), strict=True):
            by_series.setdefault((r, t, p), []).append(data)
        for ids, blocks in by_series.items():
            buckets = gathered[ids]
            for k, lowest, highest, last in chart_cuts.parts(blocks, lo, hi, origin, span):
                bucket = buckets.setdefault(k, _Bucket())
                bucket.merge(lowest, highest)
                if bucket.last is None or last[0] > bucket.last[0]:
                    bucket.last, bucket.last_block = last, None
        whole = [
            (ids, bucket)
            for ids, buckets in gathered.items()
            for bucket in buckets.values()
            if bucket.last_block is not None
        ]
        tails = self._each(_BLOCK_TAIL, [(*ids, bucket.last_block) for ids, bucket in whole])
        for (_, bucket), (walltimes, epochs) in zip(whole, tails, strict=True):
            step, _, _, value = bucket.last  # type: ignore[misc]
            epoch = None if epochs is None else last_epoch(epochs)
            bucket.last = (step, epoch, last_of_deltas(walltimes), value)
        return {key: _bucket_rows(gathered[(key.run_id, key.tag_id, key.rep)]) for key in keys}

    def stream_points(self, key: SeriesKey, batch: int = 5000) -> Iterator[tuple[Any, ...]]:
        """Every (step, epoch, walltime_ms, value) of a series, a page of blocks at a time."""
        for points in block_reads.blocks(self._all, (key.run_id, key.tag_id, key.rep)):
            yield from block_reads.rows(points)

    def tag_id(self, name: str) -> int | None:
        row = self._one("SELECT tag_id FROM tags WHERE name = ?", [name])
        return None if row is None else row[0]

    # -- live stream: high-water marks ---------------------------------------------------------
    def last_steps(self, run_ids: Sequence[int]) -> dict[SeriesKey, int]:
        """The last step of every scalar series of some runs: what a live stream compares with its
        previous answer to find the series that grew (one statement: `series_bounds`)."""
        return {key: last for key, (_, last) in self.series_bounds(run_ids).items()}

    def last_item_ids(self) -> tuple[int, int]:
        """(largest media_id, largest text_id): ids only grow, so new images and texts of any run
        are those above the last answer (two primary-key seeks)."""
        media = self._one("SELECT MAX(media_id) FROM media")
        texts = self._one("SELECT MAX(text_id) FROM texts")
        return int((media and media[0]) or 0), int((texts and texts[0]) or 0)

    def new_items(self, table: str, after: int, upto: int, run_ids: Sequence[int]) -> list[dict[str, Any]]:
        """Index rows (no pixels, no content) of media or texts with after < id <= upto of some runs."""
        if table not in ("media", "texts") or not run_ids:
            return []
        item_id = "media_id" if table == "media" else "text_id"
        marks = ", ".join("?" * len(run_ids))
        sql = f"""
            SELECT x.{item_id}, x.run_id, t.name, x.kind, x.rep, x.step, x.epoch
            FROM {table} x JOIN tags t ON t.tag_id = x.tag_id
            WHERE x.{item_id} > ? AND x.{item_id} <= ? AND x.run_id IN ({marks}) ORDER BY x.{item_id}"""
        names = ("id", "run_id", "tag", "kind", "rep", "step", "epoch")
        return [dict(zip(names, row, strict=True)) for row in self._all(sql, [after, upto, *run_ids])]

    # -- media and texts ----------------------------------------------------------------------
    def media(self, run_id: int, kind: str) -> list[dict[str, Any]]:
        """Index of a run's images or figures (no pixels)."""
        sql = """
            SELECT m.media_id, t.name, m.rep, m.step, m.epoch, m.width, m.height
            FROM media m JOIN tags t ON t.tag_id = m.tag_id
            WHERE m.run_id = ? AND m.kind = ? ORDER BY t.name, m.rep, m.step, m.media_id"""
        names = ("media_id", "tag", "rep", "step", "epoch", "width", "height")
        return [dict(zip(names, row, strict=True)) for row in self._all(sql, [run_id, kind])]

    def histograms(self, run_id: int, tag: str | None = None) -> dict[str, Any]:
        """A run's histogram tags, and the histograms of `tag` (default: its first tag) with their
        buckets, by repetition and step. Every row is a few hundred bytes, so a tag is sent whole."""
        tags = [name for (name,) in self._all(
            "SELECT DISTINCT t.name FROM histograms h JOIN tags t ON t.tag_id = h.tag_id"
            " WHERE h.run_id = ? ORDER BY t.name", [run_id])]  # fmt: skip
        if tag is None and tags:
            tag = tags[0]
        rows = self._all(
            f"SELECT h.rep, h.step, h.epoch, {histogram_rows.STATS} FROM histograms h"
            " JOIN tags t ON t.tag_id = h.tag_id WHERE h.run_id = ? AND t.name = ?"
            " ORDER BY h.rep, h.step, h.histogram_id",
            [run_id, tag],
        )
        found = []
        for rep, step, epoch, *stats in rows:
            h = histogram_rows.from_columns(stats)
            found.append({"rep": rep, "step": step, "epoch": epoch, "count": h.count,
                          "nonfinite": h.nonfinite, "min": h.minimum, "max": h.maximum, "sum": h.total,
                          "sum_squares": h.total_squares, "edges": h.edges, "counts": h.counts})  # fmt: skip
        return {"tags": tags, "tag": tag, "histograms": found}

    def media_png(self, media_id: int) -> bytes | None:
        row = self._one("SELECT png FROM media WHERE media_id = ?", [media_id])
        return None if row is None else bytes(row[0])

    def texts(self, run_id: int, kind: str) -> list[dict[str, Any]]:
        """A run's texts, HTML fragments or tables (one `kind`), content included."""
        sql = """
            SELECT x.text_id, t.name, x.rep, x.step, x.epoch, x.content, x.markdown
            FROM texts x JOIN tags t ON t.tag_id = x.tag_id
            WHERE x.run_id = ? AND x.kind = ? ORDER BY t.name, x.rep, x.step, x.text_id"""
        names = ("text_id", "tag", "rep", "step", "epoch", "content", "markdown")
        texts = [dict(zip(names, row, strict=True)) for row in self._all(sql, [run_id, kind])]
        for text in texts:
            text["markdown"] = bool(text["markdown"])
        return texts

    def alerts(
        self, run_id: int | None = None, after: int = 0, upto: int | None = None
    ) -> list[dict[str, Any]]:
        """Alerts (store/alert_content.py) as dicts with their text `id`: of one run or of all,
        those with an id in (after, upto], oldest first."""
        rows = self._all(*alert_content.query(run_id, after, upto))
        return [{"id": text_id, **alert_content.decode(rid, rep, content)._asdict()}
                for text_id, rid, rep, content in rows]  # fmt: skip

    def console(self, run_id: int, after: int, limit: int, search: str | None) -> list[dict[str, Any]]:
        """A run's console lines after id `after` (see `Store.console`), as dicts."""
        rows = self._all(*console_query(run_id, after, limit, search))
        return [line._asdict() for line in map(ConsoleLine._make, rows)]

    def environment(self, run_id: int) -> dict[str, Any] | None:
        row = self._one(environment_rows.READ, [run_id])  # the dashboard reads current tables only
        return None if row is None else json.loads(row[0])

    def artifacts(self, run_id: int, name: str | None = None) -> list[ArtifactRow]:
        """A run's artefacts (or the one called `name`), by name."""
        return [ArtifactRow(*row) for row in self._all(*artifacts_query(run_id, name))]

    def fragment(self, text_id: int) -> str | None:
        row = self._one("SELECT content FROM texts WHERE text_id = ? AND kind = 'fragment'", [text_id])
        return None if row is None else row[0]


@dataclass
class _Bucket:
    """One bucket of `DashboardQueries.buckets` as it is gathered: its extremes, its last point so
    far, and the block whose last walltime and epoch that point still needs (None: it has them)."""

    low: float | None = None
    high: float | None = None
    last: tuple[Any, ...] | None = None
    last_block: int | None = None

    def merge(self, low: float | None, high: float | None) -> None:
        self.low, self.high = _extreme(min, self.low, low), _extreme(max, self.high, high)


def _bucket_rows(buckets: dict[int, _Bucket]) -> list[tuple[Any, ...]]:
    """A series' gathered buckets in order, as `DashboardQueries.buckets` returns them."""
    return [(*buckets[k].last, buckets[k].low, buckets[k].high) for k in sorted(buckets)]  # type: ignore[misc]


def _among(
    run_ids: Sequence[int], tag_ids: Sequence[int] | None = None, reps: Sequence[int] | None = None
) -> tuple[str, list[int]]:
    """A WHERE clause (and its parameters) for the rows of some runs, tags and repetitions: IN
    lists on the leading columns of a series' primary key, so an index answers it with seeks."""
    clauses, params = [], []
    for column, values in (("run_id", run_ids), ("tag_id", tag_ids), ("rep", reps)):
        if values is not None:
            clauses.append(f"{column} IN ({', '.join('?' * len(values))})")
            params += list(values)
    return " AND ".join(clauses), params


def _extreme(choose: Callable[[float, float], float], a: float | None, b: float | None) -> float | None:
    """min or max of two extremes where None (no finite-or-infinite value: NaN only) loses."""
    if a is None or b is None:
        return b if a is None else a
    return choose(a, b)


def _json_value(text: str) -> Any:
    """A stored hparam/result value; text that is not JSON is shown as the string it is.

    A JSON number (most values) is read by int()/float(), as `json.loads` would, at half the cost."""
    number = _JSON_NUMBER.fullmatch(text) if isinstance(text, str) else None
    if number is not None:
        return float(text) if number.lastindex else int(text)
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text

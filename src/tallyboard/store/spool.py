"""The node-local spool: logging goes on while the central database or server is out of reach.

`ResultTable(url, spool=PATH)` (or `$TALLYBOARD_SPOOL`) logs into a SQLite file on the node and a
background shipper (store/spool_shipper.py) moves what was committed there to `url`, later: a
PostgreSQL database, or a tallyboard server over HTTP (store/http_shipping.py), which always logs
through a spool.

Why it is built this way:
- The spool is an ordinary SQLite result table, written by the unchanged SQLite engine through the
  unchanged sink: the training thread's cost, the durability rules (nothing lost on exception, exit
  or SIGTERM; at most the sink's window on SIGKILL) and the memory bound are the SQLite engine's.
  The file can be browsed offline (`tallyboard serve PATH`).
- Every write that must reach the database also appends one entry to `spool_journal`, in the same
  SQLite transaction as the rows it describes: (seq, operation, JSON arguments), seq increasing.
  So an entry exists if and only if its rows were committed locally, and entries are in the order
  the writes happened. The shipper replays them against PostgreSQL in seq order, exactly once: the
  database keeps the spool's watermark in the same transaction as the rows (store/spool_shipper.py).
- Run ids are the spool's own until the database assigns its id at shipping (uniqueness is checked
  then; see the shipper). The journal keeps the spool's ids; the shipper maps them.
- Bytes (images) travel in the JSON as base64, a series' int or float columns packed (8 bytes a
  value, base64), other numbers as JSON (NaN and infinities as NaN/Infinity, which Python reads
  back exactly). No pickle: a spool file is data, never code.
- The spool must reach its database after this process is gone (`tallyboard sync`), so it keeps
  the database's URL as given, password included (`Location.secret()`), and a server's write
  token, in `spool_state`, which no copy, export or dashboard reads, in a file only its owner may
  read (mode 0600, `keep_private`); everything else shows it through `Location`, without it.
- Written only locally, never shipped: quarantined records (the spool's own rejects), the column
  layout (`set_columns`). A run is resumed by the database's id: the database reopens it at once
  (store/run_claims.py), and the spool continues it as a run of its own that an `attach_run`
  entry maps to it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import sys
import time
import uuid
from array import array
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tallyboard.errors import StoreError
from tallyboard.store.location import SPOOL_PREFIX, Access, Location
from tallyboard.store.records import (
    NO_EPOCH,
    ArtifactRow,
    Batch,
    QueuedValue,
    ResumePoint,
    ScalarColumns,
    ScalarRow,
)
from tallyboard.store.sqlite import SqliteStore
from tallyboard.store.tables import BATCH_RECORDS

SPOOL_DDL = (
    "CREATE TABLE IF NOT EXISTS spool_journal (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " logged_at REAL NOT NULL, op TEXT NOT NULL, args TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS spool_state (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # The database's run id of each run of the spool, once shipped (the shipper's copy of its map).
    "CREATE TABLE IF NOT EXISTS spool_runs (spool_run INTEGER PRIMARY KEY, run_id INTEGER NOT NULL,"
    " duplicate_of INTEGER)",
)


def location(
    spool_path: str | os.PathLike[str],
    target: Location,
    unique_columns: tuple[str, ...],
    token: str | None = None,
    artifacts: str | None = None,
) -> Location:
    """Bind the spool file at `spool_path` to `target` (the first time, creating it with these
    unique columns; a spool bound to another database is refused) and return the location
    `open_store` opens it by. `token` is a server's write token (kept for the shipper and
    `tallyboard sync`, as a database's password is; the last one given counts); `artifacts` the
    artefact store whose files a server's shipper uploads (the last one given counts)."""
    if not (target.is_postgres or target.is_http):
        raise ValueError(
            f"a spool ships to a postgresql:// database or an http(s):// tallyboard server, not"
            f" {str(target)!r} (a SQLite table is local already: log to it directly)"
        )
    path = os.path.abspath(os.fspath(spool_path))
    SpoolStore(path, unique_columns, target=target, token=token, artifacts=artifacts).close()
    return Location(SPOOL_PREFIX + path)


def keep_private(path: str) -> None:
    """Make a spool file and its WAL and shared-memory files readable by their owner only: the
    spool keeps the database's password, and the files were made with the process's umask
    (0644 as a rule). SQLite gives a WAL file it creates later the mode of the table file."""
    for each in (path, f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(each, 0o600)


def encode(value: Any) -> str:
    return json.dumps(value, default=_bytes_to_json, separators=(",", ":"))


def decode(text: str) -> Any:
    return json.loads(text, object_hook=_from_json)


def _bytes_to_json(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    raise TypeError(f"cannot spool a {type(value).__name__}")


def _from_json(item: dict[str, Any]) -> Any:
    if len(item) != 1:
        return item
    ((key, text),) = item.items()
    if key == "$bytes":
        return base64.b64decode(text)
    if key in PACKED:
        packed = array(key[1], base64.b64decode(text))
        if sys.byteorder == "big":
            packed.byteswap()
        return packed.tolist()
    return item


PACKED = ("$q", "$d")  # a column of 8-byte little-endian ints, or of doubles


class ShippedRun(NamedTuple):
    """A run of the spool as the database holds it (a row of `spool_runs`): its id there, and the
    run it duplicates when the database's uniqueness check found one at shipping."""

    spool_run: int
    run_id: int
    duplicate_of: int | None


def _column(values: Sequence[Any]) -> dict[str, str] | list[Any]:
    """One column of a series of scalars: packed when all ints or all floats (C speed both ways,
    floats bit-exact; float repr in JSON cost the spool's writer more than SQLite's insert), else
    a JSON list (an epoch column with None, say)."""
    for code in ("q", "d"):
        try:
            packed = array(code, values)
        except (TypeError, OverflowError):
            continue
        if sys.byteorder == "big":
            packed.byteswap()
        return {f"${code}": base64.b64encode(packed.tobytes()).decode("ascii")}
    return list(values)


def batch_to_json(batch: Batch) -> dict[str, list[Any]]:
    """A batch's journal entry. A series of scalars goes as columns (rep, step, epoch, walltime,
    value), packed where it can be (`_column`)."""
    fields: dict[str, list[Any]] = {
        name: rows for name, rows in vars(batch).items() if rows and name != "scalars"
    }
    if batch.scalars:
        fields["scalars"] = [[run_id, tag, *_series_columns(rows)] for run_id, tag, rows in batch.scalars]
    return fields


def _series_columns(rows: Sequence[ScalarRow]) -> list[dict[str, str] | list[Any]]:
    """A series' five columns; the sink's `ScalarColumns` as they are (a NaN value a null, as in rows)."""
    if not isinstance(rows, ScalarColumns):
        return list(map(_column, zip(*rows, strict=True)))
    count = len(rows)
    values: Sequence[float | None] = rows.values
    if math.isnan(sum(rows.values)):
        values = [None if value != value else value for value in rows.values]
    epochs = rows.epochs_or_none() if rows.epochs is not None and NO_EPOCH in rows.epochs else rows.epochs
    columns = (array("q", [rows.rep]) * count, rows.steps, [None] * count if epochs is None else epochs)
    return [*map(_column, columns), _column(rows.walltimes), _column(values)]


def batch_from_json(fields: dict[str, list[Any]]) -> Batch:
    """The `Batch` a journal entry describes (JSON gave lists where the sink had named records)."""
    columns = fields.pop("scalars", [])
    batch = Batch()
    for name, rows in fields.items():
        record = BATCH_RECORDS[name]
        getattr(batch, name).extend(record(*row) for row in rows)
    batch.scalars = [(run_id, tag, list(zip(*series, strict=True))) for run_id, tag, *series in columns]
    return batch


class SpoolStore(SqliteStore):
    """A SQLite result table that also journals, in the same transactions, what is to be shipped."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        unique_columns: tuple[str, ...] = (),
        access: Access = Access.WRITE,
        target: Location | None = None,
        token: str | None = None,
        artifacts: str | None = None,
    ) -> None:
        super().__init__(path, unique_columns=unique_columns, access=access)
        if access is not Access.READ:
            with self._lock:
                self.atomic(lambda: self._bind(target, token, artifacts))

    def _bind(self, target: Location | None, token: str | None = None, artifacts: str | None = None) -> None:
        if target is None and not self.execute("SELECT 1 FROM sqlite_master WHERE name = 'spool_state'"):
            raise StoreError(f"{self.path!r} is not a spool: it was never bound to a database")
        for statement in SPOOL_DDL:
            self.execute(statement)
        bound = self.state("target")
        if target is not None and bound is not None and bound != target.secret():
            raise StoreError(
                f"the spool {self.path!r} ships to {str(Location(bound))!r}, not {str(target)!r}:"
                " give each database a spool file of its own"
            )
        if bound is None and target is not None:
            keep_private(self.path)  # before the password is in it: only its owner may read it
            self._set_state("target", target.secret())
            self._set_state("spool_id", str(uuid.uuid4()))  # names this spool in the database
            self._set_state("shipped", "0")
        if token is not None and token != self.state("token"):
            keep_private(self.path)  # a spool made before it kept no secret yet
            self._set_state("token", token)
        if artifacts is not None:
            self._set_state("artifacts", artifacts)

    def bound_to(self) -> tuple[Location, str]:
        """(the database this spool ships to, the id that names the spool there)."""
        target, spool_id = self.state("target"), self.state("spool_id")
        if target is None or spool_id is None:
            raise StoreError(f"{self.path!r} is not a spool: it was never bound to a database")
        return Location(target), spool_id

    def state(self, key: str) -> str | None:
        rows = self.execute("SELECT value FROM spool_state WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def _set_state(self, key: str, value: str) -> None:
        self.execute(
            "INSERT INTO spool_state (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _journal(self, op: str, args: Any) -> None:
        self.execute(
            "INSERT INTO spool_journal (logged_at, op, args) VALUES (?, ?, ?)",
            (time.time(), op, encode(args)),
        )

    def _journaled(self, op: str, args: Any, write: Callable[[], None]) -> None:
        """Journal first, then write: should the write fail, neither is committed (and no id the
        write caches, a tag's say, survives a rolled-back transaction)."""
        self.ready_for_writing()

        def both() -> None:
            self._journal(op, args)
            write()

        with self._lock:
            self.atomic(both)

    # ---- the writes that are shipped ------------------------------------------------------------
    def create_run(
        self, fields: dict[str, Any], debug: bool = False, durable: bool = True, rerun: bool = False
    ) -> int:
        """The database creates the run, with its first repetition, when the journal's entry ships
        (a `rerun` as the rerun of the database's run of its key); the repetition queued by a
        writer (`durable=False`) ships after it."""
        self.ready_for_writing()

        def create() -> int:
            run_id = SqliteStore.create_run(self, fields, debug, durable, rerun)
            self._journal("create_run", {"run": run_id, "fields": fields, "debug": debug, "rerun": rerun})
            return run_id

        with self._lock:
            return self.atomic(create, durable)

    def update_run(self, run_id: int, **values: Any) -> None:
        args = {"run": run_id, "values": values}
        self._journaled("update_run", args, lambda: SqliteStore.update_run(self, run_id, **values))

    def change_run_tags(self, run_id: int, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        args = {"run": run_id, "add": list(add), "remove": list(remove)}
        change = SqliteStore.change_run_tags
        self._journaled("change_run_tags", args, lambda: change(self, run_id, add, remove))

    def put_values(self, kind: str, rows: list[QueuedValue]) -> None:
        args = {"kind": kind, "rows": rows}
        self._journaled("put_values", args, lambda: SqliteStore.put_values(self, kind, rows))

    def add_artifact(self, row: ArtifactRow) -> None:
        self._journaled("add_artifact", list(row), lambda: SqliteStore.add_artifact(self, row))

    def write_batch(self, batch: Batch) -> None:
        self._journaled("batch", batch_to_json(batch), lambda: SqliteStore.write_batch(self, batch))

    def reopen_run(self, run_id: int, check: bool = True) -> ResumePoint:
        raise StoreError(
            "a run of a spool is reopened by the database's id (`ResultTable.resume_run` through the"
            " spool asks the database or server): a spool's own run ids are not the database's"
        )

    def continue_run(self, reopened: dict[str, Any]) -> tuple[int, ResumePoint]:
        """A run the database reopened for this spool (`run_claims.reopen`'s answer) continued here:
        a run of the spool with its fields, its repetition and the database's id noted, and an
        `attach_run` entry that maps it there when shipped. (its id in the spool, where it stopped)."""
        point = ResumePoint(int(reopened["rep"]), float(reopened["rep_start"]), dict(reopened["next_steps"]))
        run_id = int(reopened["run"])
        fields = {**reopened["fields"], "status": "running", "end_time": None}
        self.ready_for_writing()

        def record() -> int:
            spool_run = SqliteStore.create_run(self, fields)  # no unique key: the database checked it
            self.execute("DELETE FROM repetitions WHERE run_id = ?", (spool_run,))
            self.execute(
                "INSERT INTO repetitions (run_id, rep, start_time) VALUES (?, ?, ?)",
                (spool_run, point.rep, point.rep_start),
            )
            self.execute(
                "INSERT OR REPLACE INTO spool_runs (spool_run, run_id, duplicate_of) VALUES (?, ?, NULL)",
                (spool_run, run_id),
            )
            self._journal("attach_run", {"run": spool_run, "run_id": run_id})
            return spool_run

        with self._lock:
            return self.atomic(record), point

    # ---- what the shipper reads and records ---------------------------------------------------------
    def pending(self, after: int, limit: int, max_bytes: int) -> list[tuple[int, float, str, str]]:
        """Journal entries after seq `after`, oldest first: (seq, logged_at, op, args); at most
        `limit` of them and, beyond the first, `max_bytes` of arguments (a batch of images is big)."""
        sizes = self.execute(
            "SELECT seq, length(args) FROM spool_journal WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)
        )
        if not sizes:
            return []
        last, total = sizes[0][0], 0
        for seq, size in sizes:
            total += size
            if total > max_bytes and seq != sizes[0][0]:
                break
            last = seq
        return self.execute(
            "SELECT seq, logged_at, op, args FROM spool_journal WHERE seq > ? AND seq <= ? ORDER BY seq",
            (after, last),
        )

    def backlog(self) -> tuple[int, float | None]:
        """(entries not yet shipped, when the oldest of them was logged)."""
        shipped = int(self.state("shipped") or 0)
        count, oldest = self.execute(
            "SELECT count(*), min(logged_at) FROM spool_journal WHERE seq > ?", (shipped,)
        )[0]
        return count, oldest

    def shipped(self, upto: int, runs: list[ShippedRun]) -> None:
        """Record that the database holds everything up to seq `upto` (its own record is the one that
        counts; this copy saves re-reading shipped entries) and the run ids it assigned; drop the
        shipped entries (the spool's tables keep the rows)."""

        def record() -> None:
            self.executemany(
                "INSERT OR REPLACE INTO spool_runs (spool_run, run_id, duplicate_of) VALUES (?, ?, ?)", runs
            )
            self._set_state("shipped", str(max(upto, int(self.state("shipped") or 0))))
            self.execute("DELETE FROM spool_journal WHERE seq <= ?", (upto,))

        with self._lock:
            self.atomic(record)

    def database_run_id(self, spool_run: int) -> int | None:
        """The database's id of this spool's run, once shipped (None before)."""
        rows = self.execute("SELECT run_id FROM spool_runs WHERE spool_run = ?", (spool_run,))
        return rows[0][0] if rows else None

"""The SQLite engine: one file, WAL mode, writes that wait out a busy database instead of failing.

Why these settings:
- WAL lets readers (the dashboard, `get_*`) read while a writer commits, and a reader that keeps a
  transaction open for minutes never blocks a commit.
- `synchronous=FULL`: a commit is on disk when it returns (the sink commits about once a second,
  so the fsync per commit costs nothing measurable), which is what `flush()` promises.
- Writes start with `BEGIN IMMEDIATE`, so two processes never deadlock upgrading read locks, and
  the uniqueness check of a new run is atomic with its insert. A busy database (another process
  writing, a reader holding the write lock) is waited for (`busy_timeout`) and then retried with
  back-off for as long as it takes: training never dies because the file was busy.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from tallyboard.store.base import Store
from tallyboard.store.migrations import ensure_schema

T = TypeVar("T")

DDL_TYPES = {"pk": "INTEGER PRIMARY KEY", "blob": "BLOB", "without_rowid": "WITHOUT ROWID"}
MAX_RETRY_SLEEP = 1.0


def _is_busy(error: sqlite3.OperationalError) -> bool:
    message = str(error).lower()
    return "locked" in message or "busy" in message


def is_record_error(error: BaseException) -> bool:
    """SQLite refused the data itself: a constraint or trigger (IntegrityError), a value it cannot
    bind or hold (a lone surrogate, an int over 64 bits, a string or blob over its length limit).
    Anything else (busy, I/O, disk full, read-only) is about the database, not the record."""
    if isinstance(error, (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError)):
        return True
    if isinstance(error, (UnicodeError, OverflowError)):
        return True
    message = str(error).lower()
    if isinstance(error, sqlite3.ProgrammingError):
        return "binding parameter" in message
    return isinstance(error, sqlite3.OperationalError) and "too big" in message


class SqliteStore(Store):
    """A result table in one SQLite file (created if missing)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        unique_columns: tuple[str, ...] = (),
        busy_timeout: float = 5.0,
    ) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.url = self.path
        self._busy_timeout = busy_timeout
        self._in_transaction = False
        self._connect()
        self._retry(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
        ensure_schema(self, DDL_TYPES, unique_columns)

    def _connect(self) -> None:
        """Open this process's connection. A forked child (a DataLoader worker, say) opens its own:
        SQLite connections must not cross a fork."""
        self._pid = os.getpid()
        self._conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA synchronous=FULL")

    def _connection(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            self._connect()
        return self._conn

    def _retry(self, attempt: Callable[[], T]) -> T:
        delay = 0.01
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as error:
                if not _is_busy(error):
                    raise
            time.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_SLEEP)

    def _atomic(self, work: Callable[[], T]) -> T:
        if self._in_transaction:  # nested: part of the enclosing transaction
            return work()

        def attempt() -> T:
            self._connection().execute("BEGIN IMMEDIATE")
            self._in_transaction = True
            try:
                result = work()
                self._conn.execute("COMMIT")
                return result
            except BaseException:
                self._conn.rollback()
                raise
            finally:
                self._in_transaction = False

        with self._lock:
            return self._retry(attempt)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._connection().execute(sql, params).fetchall()

    def _executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    def _lock_runs(self) -> None:
        """BEGIN IMMEDIATE already holds the database's write lock."""

    def _table_exists(self, name: str) -> bool:
        return bool(self._execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def is_record_error(self, error: BaseException) -> bool:
        return is_record_error(error)

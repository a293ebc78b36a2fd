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
- Opening never writes by itself (see store/location.py): what is at the path is looked at through
  a `mode=ro` connection first, a table is created only by a writing open where there is nothing,
  and an older table is migrated by the first write, not by opening it.
- One file: when the last writer of a file in this process closes, and at process exit, the WAL is
  checkpointed into the main file and truncated, so `results.db` alone holds everything. While a
  table is being written to, it is the `.db` plus its `-wal`: copy a live one with `tallyboard copy`
  (SQLite's online backup API), never with `cp`.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from tallyboard.store import migrations, schema
from tallyboard.store.base import Store
from tallyboard.store.location import (
    NOT_SQLITE,
    Access,
    Found,
    Kind,
    Location,
    describe_sqlite_path,
    describe_sqlite_tables,
)
from tallyboard.store.migrations import OLDER_BLOCKS, ensure_schema, read_older_scalars_as_blocks
from tallyboard.store.schema import BLOCKS_STEP
from tallyboard.store.sqlite_damage import check_when_small, damaged, is_damage

T = TypeVar("T")

DDL_TYPES = {"pk": "INTEGER PRIMARY KEY", "blob": "BLOB", "without_rowid": "WITHOUT ROWID"}
MAX_RETRY_SLEEP = 1.0
CHECKPOINT_TIMEOUT_MS = 2000  # how long a closing writer waits for readers to let the WAL be truncated
log = logging.getLogger(__name__)


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


def connect_read_only(path: str, timeout: float = 5.0) -> sqlite3.Connection:
    """A connection that cannot write `path` (`mode=ro`), autocommit, usable from any thread.

    A WAL table whose `-wal` is gone (it was checkpointed and closed) can only be read by a
    connection that may create the `-shm` index beside it. Where nobody may create files (a
    read-only file system, a folder without write permission) nobody can be writing the table
    either, since a writer needs that `-wal` too: then the file is opened `immutable`, as it is."""
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.OperationalError:
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.exists(path + "-wal") or os.access(folder, os.W_OK):
            conn.close()
            raise
        conn.close()
        conn = sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
    return conn


def describe_file(path: str) -> Found:
    """What is at `path`, found through connections that cannot write (see store/location.py).

    A file nobody has open (no `-wal`, no `-journal`) is read `immutable`, so that looking at a WAL
    database does not leave a new `-wal` and `-shm` behind; should a writer have started meanwhile,
    it is looked at again through a plain `mode=ro` connection. Looking at a database that another
    program is writing in WAL mode updates its `-shm` read marks, as every reader does."""
    found = describe_sqlite_path(path)
    if found is not None:
        return found
    quiet = not os.path.exists(path + "-wal") and not os.path.exists(path + "-journal")
    try:
        try:
            tables, version = _tables_and_version(path, immutable=quiet)
        except sqlite3.DatabaseError:
            if not quiet:
                raise
            tables, version = _tables_and_version(path, immutable=False)
    except sqlite3.DatabaseError as error:
        if is_damage(error):
            raise damaged(path, error) from None
        if "not a database" not in str(error):
            raise
        return Found(Location(path), Kind.OTHER, NOT_SQLITE)
    return describe_sqlite_tables(path, tables, version)


def _tables_and_version(path: str, immutable: bool) -> tuple[list[str], str | None]:
    if immutable:
        uri = Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    else:
        conn = connect_read_only(path)
    try:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )]  # fmt: skip
        version = None
        if "meta" in (name.lower() for name in tables):
            with contextlib.suppress(sqlite3.Error):  # a `meta` table of another shape: not ours
                rows = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
                version = rows[0][0] if rows else None
        if version is not None:  # ours: not to be written into, nor read, where it is damaged
            check_when_small(conn, path)
    finally:
        conn.close()
    return tables, version


class SqliteStore(Store):
    """A result table in one SQLite file, opened as `access` says (see store/location.py)."""

    dialect = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        unique_columns: tuple[str, ...] = (),
        busy_timeout: float = 5.0,
        access: Access = Access.WRITE,
    ) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.url = Location(self.path)
        self.access = access
        self._busy_timeout = busy_timeout
        self._in_transaction = False
        # The file as opened for writing (absolute: the process may chdir), for `unwritable`.
        self._watched: tuple[str, tuple[int, int]] | None = None
        found = Found(self.url, Kind.NOTHING, "memory") if self.path == MEMORY else describe_file(self.path)
        found.check(access)
        self._connect()
        if access is not Access.READ:
            _writers.add(self)
        try:
            self._opened(found, access, unique_columns)
            if found.version is not None and found.version < BLOCKS_STEP + 1:  # read as blocks till migrated
                self.atomic(lambda: read_older_scalars_as_blocks(self), durable=False)
        except BaseException:  # the schema could not be created: nobody will close the connection
            _writers.remove(self)
            self._conn.close()
            raise

    def unwritable(self, failed: bool) -> str | None:
        if self._watched is None:
            return None
        path, identity = self._watched
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return f"its file {path} was deleted while runs were logging to it"
        except OSError:
            return None
        if (stat.st_dev, stat.st_ino) != identity:
            return f"its file {path} was replaced by another file while runs were logging to it"
        if failed:  # a file of our own beside it: closing a descriptor of the table drops SQLite's locks
            probe = f"{path}.probe-{os.getpid()}"
            try:
                os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                os.unlink(probe)
            except OSError as error:
                if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                    return f"this process can no longer write beside {path} ({error.strerror})"
        return None

    def _connect(self) -> None:
        """Open this process's connection. A forked child (a DataLoader worker, say) opens its own:
        SQLite connections must not cross a fork."""
        self._pid = os.getpid()
        if self.access is Access.READ:
            self._conn = connect_read_only(self.path, self._busy_timeout)
            return
        self._conn = open_for_writing(self.path, self._busy_timeout)
        with contextlib.suppress(OSError):
            stat = os.stat(self.path)
            self._watched = os.path.abspath(self.path), (stat.st_dev, stat.st_ino)

    def _prepare_schema(self, unique_columns: tuple[str, ...]) -> None:
        if self.schema_version is not None and self.schema_version <= BLOCKS_STEP:
            self.execute(f"DROP TABLE IF EXISTS {OLDER_BLOCKS}")  # the real blocks come now
        if self.schema_version is None:  # a new table: WAL, so readers never block the writer
            self._retry(lambda: self._connection().execute("PRAGMA journal_mode=WAL"))
            if self.path != MEMORY:
                self.atomic(lambda: self._create_from(new_table(), unique_columns))
        ensure_schema(self, DDL_TYPES, unique_columns)  # migrates what is older (nothing when new)
        self.schema_version = self._schema_version()

    def _create_from(self, template: NewTable, unique_columns: tuple[str, ...]) -> None:
        """Inside a transaction: the schema and rows of `template`, unless another process created
        the table first."""
        if self.table_exists("meta"):
            return
        for sql in template.statements:
            self.execute(sql)
        for name, rows in template.rows:
            marks = ", ".join("?" * len(rows[0]))
            self.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)
        self.execute("UPDATE meta SET value = ? WHERE key = 'unique_columns'", (json.dumps(unique_columns),))

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

    def atomic(self, work: Callable[[], T], durable: bool = True) -> T:
        if self._in_transaction:  # nested: part of the enclosing transaction
            return work()
        if not durable:  # in WAL mode NORMAL syncs at checkpoints only; a FULL commit syncs the WAL
            with self._lock:
                self._connection().execute("PRAGMA synchronous=NORMAL")
                try:
                    return self.atomic(work)
                finally:
                    self._conn.execute("PRAGMA synchronous=FULL")

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
            try:
                return self._retry(attempt)
            except sqlite3.DatabaseError as error:
                self.raise_if_damage(error)
                raise

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._connection().execute(sql, params).fetchall()
            except sqlite3.DatabaseError as error:
                self.raise_if_damage(error)
                raise

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self._conn.executemany(sql, rows)
        except sqlite3.DatabaseError as error:
            self.raise_if_damage(error)
            raise

    def raise_if_damage(self, error: BaseException) -> None:
        if is_damage(error):
            raise damaged(self.path, error, "this statement changed nothing") from error

    def _lock_runs(self) -> None:
        """BEGIN IMMEDIATE already holds the database's write lock."""

    def table_exists(self, name: str) -> bool:
        return bool(self.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside the block sees the file as it was when the block began (WAL lets a
        writer go on meanwhile)."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                yield
            finally:
                conn.execute("COMMIT")

    def backup_to(self, path: str) -> None:
        """Copy the whole table, what is still in its `-wal` included, into a new file at `path`
        with SQLite's online backup API: one consistent state, while writers go on."""
        target = sqlite3.connect(path)
        try:
            with self._lock:
                self._connection().backup(target)
        finally:
            target.close()

    def checkpoint(self) -> None:
        """Move everything in the WAL into the main file and truncate the WAL (best effort: a
        reader in the middle of a long transaction may keep it from being truncated now)."""
        with contextlib.suppress(OSError):
            if os.path.getsize(self.path + "-wal") == 0:
                return  # nothing to fold back: spare the fsyncs
        with self._lock:
            conn = self._connection()
            try:
                conn.execute(f"PRAGMA busy_timeout = {CHECKPOINT_TIMEOUT_MS}")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as error:
                log.debug("tallyboard: could not checkpoint %s: %s", self.path, error)
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")

    def close(self) -> None:
        """Close the connection; the last writer of the file in this process checkpoints first."""
        self.close_reads()
        with self._lock:
            if _writers.remove(self):
                self.checkpoint()
            self._conn.close()

    def is_record_error(self, error: BaseException) -> bool:
        return is_record_error(error)

    def reader_connection(self, read_only: bool) -> sqlite3.Connection:
        if read_only:
            return with_python_lower(connect_read_only(self.path, timeout=10))
        uri = Path(self.path).resolve().as_uri() + "?mode=rw"  # never creates a file
        conn = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False)
        conn.isolation_level = None  # autocommit: no read transaction outlives its statement
        return with_python_lower(conn)

    def reader_sql(self, sql: str) -> str:
        return sql

    def first_rows(self, conn: Any, sql: str, param_rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """SQLite reruns its cached statement."""
        return [conn.execute(sql, tuple(params)).fetchone() for params in param_rows]


MEMORY = ":memory:"  # the path of a table in memory (`new_table` makes one), never a file's


class NewTable(NamedTuple):
    """What a new table starts as: its statements (tables, then indexes), and rows by table."""

    statements: tuple[str, ...]
    rows: tuple[tuple[str, list[tuple[Any, ...]]], ...]


def new_table() -> NewTable:
    """The schema and rows that the migrations leave in a table created at version 1, read back
    from one made in memory, once per process (and again should the migrations change: tests make
    older schemas so): a new file is then created by replaying them, one statement per table,
    index and row, which costs what creating its schema costs (bench/run_start.py). Running every
    migration again for each new file took three times as many statements, each making SQLite
    parse the schema anew. The migrations stay the one description of the schema."""
    steps = (*schema.MIGRATIONS.items(), *migrations.PYTHON_MIGRATIONS.items())
    made_from = (migrations.SCHEMA_VERSION, *steps)
    if _templates.get(made_from) is None:
        _templates.clear()
        with SqliteStore(MEMORY) as memory:
            objects = memory.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"
                " AND name NOT LIKE 'sqlite_%' ORDER BY type = 'index', rowid"
            )
            tables = [
                (name, memory.execute(f"SELECT * FROM {name}"))
                for kind, name, _ in objects
                if kind == "table"
            ]
        _templates[made_from] = NewTable(tuple(sql for *_, sql in objects), tuple(t for t in tables if t[1]))
    return _templates[made_from]


_templates: dict[tuple[object, ...], NewTable] = {}


def with_python_lower(conn: sqlite3.Connection) -> sqlite3.Connection:
    """`py_lower(text)`: Python's `str.lower` in SQL (SQLite's `lower` folds ASCII only), so the
    runs table's filters ignore case in SQL exactly as they do in Python."""
    conn.create_function("py_lower", 1, lambda text: text.lower() if isinstance(text, str) else text,
                         deterministic=True)  # fmt: skip
    return conn


def open_for_writing(path: str, timeout: float) -> sqlite3.Connection:
    """A read-write connection (creating the file if it is missing), autocommit, any thread."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA synchronous=FULL")
    return conn


class _Writers:
    """This process's open writing stores, so that the last one of a file to close, or the exit
    of the process, checkpoints it (a process that exits without closing its connections would
    otherwise leave the newest rows in the `-wal` only). Weak references: a store dropped without
    `close()` is closed by the garbage collector as before, and SQLite folds its WAL back itself."""

    def __init__(self) -> None:
        self._stores: weakref.WeakValueDictionary[int, SqliteStore] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def add(self, store: SqliteStore) -> None:
        with self._lock:
            self._stores[id(store)] = store

    def remove(self, store: SqliteStore) -> bool:
        """Forget `store`; True when it was the last open writer of its file in this process."""
        with self._lock:
            if self._stores.pop(id(store), None) is None:
                return False
            return not any(_same_file(store, other) for other in list(self._stores.values()))

    def checkpoint_all(self) -> None:
        """At exit: checkpoint each file that this process still has open for writing, once."""
        with self._lock:
            stores = [s for s in list(self._stores.values()) if s._pid == os.getpid()]
        done: list[SqliteStore] = []
        for store in stores:
            if not any(_same_file(store, other) for other in done):
                store.checkpoint()
                done.append(store)


def _same_file(one: SqliteStore, other: SqliteStore) -> bool:
    try:
        return os.path.samefile(one.path, other.path)
    except OSError:
        return os.path.abspath(one.path) == os.path.abspath(other.path)


_writers = _Writers()
atexit.register(_writers.checkpoint_all)  # registered before the sink's hooks, so it runs after them

# SQLite keeps, inside each process, which of its connections holds which lock on a file, and a
# fork copies that bookkeeping. A child forked while one of our threads (the sink's, say) was inside
# a transaction believes that lock is still held, by a connection it will never use: its own first
# write then waits on it forever. So a fork waits, at most FORK_WAIT seconds, for the writing
# stores' transactions in flight to end (each runs under the store's lock), and none begins until
# the fork is done.
FORK_WAIT = 2.0
_held_for_fork: list[SqliteStore] = []


def _before_fork() -> None:
    deadline = time.monotonic() + FORK_WAIT
    with _writers._lock:
        stores = list(_writers._stores.values())
    for store in stores:
        if store._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            _held_for_fork.append(store)


def _after_fork() -> None:
    while _held_for_fork:
        _held_for_fork.pop()._lock.release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)

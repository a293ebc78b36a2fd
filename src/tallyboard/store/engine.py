"""The engine interface: the primitives every database supplies, and opening a table.

`Store` (store/base.py) is written once, in SQL that SQLite (>= 3.35) and PostgreSQL both accept:
`?` placeholders (an engine with another paramstyle rewrites them in `execute`), `ON CONFLICT ...
DO UPDATE`, `RETURNING`. Its parts (store/runs.py, writes.py, logged.py, imported.py) are
subclasses of `Engine` and use only what it declares; an engine module (store/sqlite.py,
store/postgres.py) subclasses `Store` and supplies those primitives: a connection, `atomic` (one
transaction, retried when the database is busy), `execute`/`executemany`, `_lock_runs`, and the
DDL type names. Keeping the SQL in `Store`'s parts is what lets the two engines behave
identically without a second copy of every query.

Threading: a store is used by one thread at a time (its methods take `self._lock`); the sink's
writer thread and a `ResultTable` each open their own.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is new in Python 3.11; we support 3.10

    from tallyboard.store.location import Access, Found, Location

T = TypeVar("T")


class Engine(ABC):
    """A connection to one database and its primitives; the parts of `Store` add the queries."""

    url: Location  # str() shows it without a password (store/location.py)
    access: Access  # what opening allowed (store/location.py)
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
        """Migrate an older table now (every write does it first; `tallyboard migrate` calls this).
        A table opened to read refuses here, so no write of any kind gets past it."""
        from tallyboard.errors import ReadOnlyTableError
        from tallyboard.store import migrations
        from tallyboard.store.location import Access

        if self.access is Access.READ:
            raise ReadOnlyTableError(f"{self.url} was opened read-only: nothing may be written to it")

        with self._lock:
            if self._migrate_with is None:
                return
            if migrations.stored_version(self) != migrations.SCHEMA_VERSION or not self._engine_ready():
                self._prepare_schema(self._migrate_with)
                self.gather_statistics()  # a migration may have rewritten every value row
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
    def atomic(self, work: Callable[[], T], durable: bool = True) -> T:
        """Run `work` in one write transaction and commit; when the database is busy, roll back and
        run `work` again (so `work` must only touch the database), never raising "busy" to the caller.
        `durable=False`: the commit returns before it is on disk (other connections see it at once,
        and a crash of the process keeps it); the next durable commit to the database makes it
        durable too. Nested in another transaction, `work` is part of that one, durable or not."""

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute one statement (in the current transaction, if any, else on its own under the
        store's lock) and return all its rows."""

    def execute_blobs(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """`execute` for a statement whose rows are mostly bytes (packed scalar blocks): an engine
        whose protocol would spell them out as text fetches them as they are."""
        return self.execute(sql, params)

    @abstractmethod
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Execute one statement for every row, inside the current transaction."""

    @abstractmethod
    def _lock_runs(self) -> None:
        """Inside `atomic`: make the uniqueness check and the insert of a run atomic across processes."""

    @abstractmethod
    def table_exists(self, name: str) -> bool:
        """Whether a table of that name exists (used to tell a new database from an old one)."""

    # ---- readers on other threads (the dashboard's pool: `Store.reads`) -------------------------
    dialect: str  # "sqlite" or "postgresql": the few queries written per engine choose by it

    @abstractmethod
    def reader_connection(self, read_only: bool) -> Any:
        """A new autocommit connection for a pool of reading threads (no read transaction outlives
        its statement); a `read_only` one cannot write. Never creates a database."""

    @abstractmethod
    def reader_sql(self, sql: str) -> str:
        """`sql`, written with `?` placeholders, in the engine's own paramstyle."""

    @abstractmethod
    def first_rows(self, conn: Any, sql: str, param_rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """The first row of `sql` for each parameter row, on the reader connection `conn`."""

    def raise_if_damage(self, error: BaseException) -> None:  # noqa: B027 (a no-op most engines keep)
        """Raise `DamagedTableError` from `error` when the engine failed because its file is damaged
        (store/sqlite_damage.py); a server's engine leaves its storage to the server."""

    def reader_lost(self, conn: Any) -> bool:
        """Whether the reader connection `conn` is dead after an error (its server restarted or went
        away): the pool must drop it rather than lend it again. A file's connection never is."""
        return False

    @abstractmethod
    def close(self) -> None:
        """Close the connection; the store is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @abstractmethod
    def is_record_error(self, error: BaseException) -> bool:
        """Whether a failed write was refused for its data (the same records fail again whatever
        happens: split the batch and quarantine them), rather than because the database cannot be
        used now (busy, gone, disk full: keep the records and try again later)."""

    def unwritable(self, failed: bool) -> str | None:
        """Why this database cannot take writes for good, if it cannot (its file system turned
        read-only, its file deleted or replaced), asked after each commit (`failed`: it did not go
        through), so that the sink stops waiting for room that will never come. None where waiting
        may help (busy, gone, disk full)."""
        return None

    def gather_statistics(self) -> None:  # noqa: B027 (a no-op most engines keep)
        """Give the planner statistics of the tables the runs table's views read, where it has
        none (a table bulk-loaded, copied or migrated on a server whose autovacuum has not come by).
        Called where the store may write: the dashboard opened to edit, after a migration, a copy,
        an import. Nothing to do where the planner needs none (SQLite)."""

    def sync_id_sequences(self) -> None:  # noqa: B027 (a no-op most engines keep)
        """After rows were inserted with explicit ids (a copy), make new ids start above them.

        Nothing to do where new ids already follow the largest one (SQLite); engines whose id
        sequences ignore explicit ids (PostgreSQL) override it."""

    # ---- table settings -------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        with self._lock:
            rows = self.execute("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None


# Every store alive in this process, closed when the interpreter exits (see `_close_live_stores`).
_live_stores: weakref.WeakSet[Engine] = weakref.WeakSet()


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

"""Persistence: the only package that writes SQL.

`open_store` picks the engine from what the user typed, parsed into a `Location` (whose `str()`
hides a password: store/location.py): a `postgresql://` (or `postgres://`) URL opens PostgreSQL,
`spool:PATH` a node-local spool that ships to one (store/spool.py), anything else is a path to a
SQLite file. Engines are imported on demand, so a SQLite user never imports psycopg.
`access` says what the caller will do, and so what opening may do to what is there (create,
migrate, or nothing at all): see store/location.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tallyboard.errors import (
    DatabaseUnreachable,
    DuplicateRunError,
    NotAResultTable,
    ReadOnlyTableError,
    StoreError,
)
from tallyboard.store.base import Store
from tallyboard.store.location import Access, Location, LocationLike, is_postgres_url, require_current
from tallyboard.store.records import Batch, Column, Quarantined

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.store.dashboard_reads import DashboardQueries

__all__ = [
    "Access", "Batch", "Column", "DatabaseUnreachable", "DuplicateRunError", "Location", "NotAResultTable",
    "Quarantined", "ReadOnlyTableError",
    "Store", "StoreError", "is_postgres_url", "open_for_dashboard", "open_queries", "open_store",
]  # fmt: skip


def open_store(
    url_or_path: LocationLike,
    unique_columns: tuple[str, ...] = (),
    access: Access = Access.WRITE,
) -> Store:
    """Open the result table at a SQLite path or PostgreSQL URL for `access`.

    WRITE creates a table where there is nothing and migrates an older one at its first write;
    READ and EDIT never create nor migrate. Anything that is not a result table raises
    `NotAResultTable` (a missing file to read: FileNotFoundError) and is left as it was.
    `unique_columns` is recorded only when the table is created; `ResultTable` checks it afterwards.
    """
    location = Location.of(url_or_path)
    if location.spool_path is not None:  # store/spool.py
        from tallyboard.store.spool import SpoolStore

        return SpoolStore(location.spool_path, unique_columns=unique_columns, access=access)
    if location.sqlite_path is None:
        from tallyboard.store.postgres import PostgresStore

        return PostgresStore(location, unique_columns=unique_columns, access=access)
    from tallyboard.store.sqlite import SqliteStore

    return SqliteStore(location.sqlite_path, unique_columns=unique_columns, access=access)


def open_queries(url_or_path: LocationLike, read_only: bool = False) -> DashboardQueries:
    """The dashboard's queries of the table at a location, opened to read and closed with them."""
    from tallyboard.store.dashboard_reads import DashboardQueries

    return DashboardQueries(open_store(url_or_path, access=Access.READ), read_only=read_only, owns_store=True)


def open_for_dashboard(location: Location, read_only: bool) -> tuple[DashboardQueries, Store | None]:
    """The dashboard's queries and, unless `read_only`, the store its edits go through; the store
    is opened either way, and `queries.store.close()` closes it with its pool of readers.

    Opening creates nothing and migrates nothing (store/location.py): a location without a result
    table, or with an older one, is an error that says what is there or which command migrates it."""
    store = open_store(location, access=Access.READ if read_only else Access.EDIT)
    try:
        require_current(store.url, store.schema_version, "the dashboard")
        if not read_only:
            store.gather_statistics()
        queries = store.reads
    except BaseException:
        store.close()
        raise
    return queries, None if read_only else store

"""Persistence: the only package that writes SQL.

`open_store` picks the engine from what the user typed: a `postgresql://` (or `postgres://`) URL
opens PostgreSQL, `spool:PATH` a node-local spool that ships to one (store/spool.py), anything else
is a path to a SQLite file. Engines are imported on demand, so a SQLite user never imports psycopg.
`access` says what the caller will do, and so what opening may do to what is there (create,
migrate, or nothing at all): see store/location.py.
"""

from __future__ import annotations

import os

from tallyboard.store.base import Store
from tallyboard.store.location import Access, NotAResultTable
from tallyboard.store.records import Batch, Column, DuplicateRunError, Quarantined, StoreError

__all__ = [
    "Access", "Batch", "Column", "DuplicateRunError", "NotAResultTable", "Quarantined", "Store", "StoreError",
    "is_postgres_url", "open_store",
]  # fmt: skip


def is_postgres_url(url_or_path: str | os.PathLike[str]) -> bool:
    return isinstance(url_or_path, str) and url_or_path.startswith(("postgresql://", "postgres://"))


def open_store(
    url_or_path: str | os.PathLike[str], unique_columns: tuple[str, ...] = (), access: Access = Access.WRITE
) -> Store:
    """Open the result table at a SQLite path or PostgreSQL URL for `access`.

    WRITE creates a table where there is nothing and migrates an older one at its first write;
    READ and EDIT never create nor migrate. Anything that is not a result table raises
    `NotAResultTable` (a missing file to read: FileNotFoundError) and is left as it was.
    `unique_columns` is recorded only when the table is created; `ResultTable` checks it afterwards.
    """
    if isinstance(url_or_path, str) and url_or_path.startswith("spool:"):  # store/spool.py
        from tallyboard.store.spool import PREFIX, SpoolStore

        return SpoolStore(url_or_path.removeprefix(PREFIX), unique_columns=unique_columns, access=access)
    if is_postgres_url(url_or_path):
        from tallyboard.store.postgres import PostgresStore

        return PostgresStore(str(url_or_path), unique_columns=unique_columns, access=access)
    from tallyboard.store.sqlite import SqliteStore

    return SqliteStore(url_or_path, unique_columns=unique_columns, access=access)

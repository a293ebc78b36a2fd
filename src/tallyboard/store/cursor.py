"""DeepBoard's `ResultTable.cursor` and `dict_cursor`: a DB-API cursor on the table's database.

DeepBoard 0.3 hands out a context manager that opens a new `sqlite3` connection on its file, gives
its cursor (rows as tuples, or as `sqlite3.Row` for `dict_cursor`), commits when the block ends
without an exception and closes the connection. This is the same, with one difference on purpose:
the connection is **read-only** (a `mode=ro` SQLite connection; a PostgreSQL connection whose
transactions are READ ONLY). Writing rows by hand would bypass everything the writer keeps true
together: the checks at the call, the uniqueness check and its key, the interned tags, the
`scalar_blocks` summaries and typed values the dashboard reads from, `updated_at` that live views
poll. A write through it fails at once with the database's own "read-only" error.

Why a connection of its own per block, as DeepBoard's: the store's connection belongs to the table
(and the sink's to its thread) under their locks; a cursor kept by user code must not hold them.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from tallyboard.store.base import Store


class ReadCursor:
    """`with table.cursor as cursor:` -- a read-only DB-API cursor on the table, closed (with its
    connection) when the block ends. Rows are tuples, or with `as_dict` rows that are read by column
    name: `sqlite3.Row` on SQLite (as DeepBoard's `dict_cursor`, by index too), dicts on PostgreSQL
    (psycopg's `dict_row`). The SQL is the engine's own: `?` placeholders on SQLite, `%s` on
    PostgreSQL, and the tables are tallyboard's (store/schema.py), not DeepBoard's."""

    def __init__(self, store: Store, as_dict: bool = False) -> None:
        self._store = store
        self._as_dict = as_dict
        self._conn: Any = None
        self._cursor: Any = None

    def __enter__(self) -> Any:
        self._conn = self._store.reader_connection(read_only=True)
        if self._as_dict:
            self._conn.row_factory = _dict_rows(self._store.dialect)
        self._cursor = self._conn.cursor()
        return self._cursor

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the cursor and its connection; nothing to commit, nothing was written."""
        try:
            self._cursor.close()
        finally:
            self._conn.close()
            self._conn = self._cursor = None


def _dict_rows(dialect: str) -> Any:
    if dialect == "postgresql":
        from psycopg.rows import dict_row

        return dict_row
    import sqlite3

    return sqlite3.Row

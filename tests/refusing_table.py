"""A SQLite result table made to refuse one kind of record, as a full disk or a constraint added by
hand would: how the import tests make a real import fail part-way, at a chosen point."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path


def refuse(path: str | Path, table: str | None) -> None:
    """Make the SQLite table at `path` refuse every insert into `table` with "disk full" (a
    trigger); None stops refusing."""
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("DROP TRIGGER IF EXISTS refuse")
        if table is not None:
            connection.execute(
                f"CREATE TRIGGER refuse BEFORE INSERT ON {table} BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )

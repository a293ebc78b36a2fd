"""Reference: buffer (run, tag, step, value, walltime) rows in a list; one executemany in a
single transaction at close. WAL mode, default synchronous (FULL). Rowid table, no index."""

from adapters._sqlite_common import SqliteRef, export

PACKAGE = None
LABEL = "raw: sqlite3 executemany, 1 txn (WAL)"
export(SqliteRef(mode="executemany", normalized=False), globals())

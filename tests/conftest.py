"""Fixtures shared across test folders.

`db_url` is the database every result-table test writes to, once per engine: a real SQLite file
on disk, and an empty schema of its own on the real PostgreSQL server (tests/pg_support.py; skipped
locally without a server, a failure in CI); for the store's own tests also that schema through
PgBouncer in transaction pooling mode (tests/bouncer_support.py). Modules that inspect SQLite
files directly run on SQLite only (`SQLITE_ONLY`).
"""

from pathlib import Path

import pytest

from bouncer_support import bouncer
from demo_table import demo_table
from live_runs import scratch_table
from pg_support import SERVER_URL, pg_database, pg_url, scratch_schema

# pg_*: the session database and a schema of one's own; demo_table: the demo's table, made once
__all__ = ["db_url", "demo_table", "pg_bouncer", "pg_database", "pg_url", "table"]

SQLITE_ONLY = ("test_sqlite", "test_crash")  # module names whose tests open the file with sqlite3
# ... and those that also run on PostgreSQL through PgBouncer in transaction pooling mode
THROUGH_PGBOUNCER_TOO = ("test_store", "test_scalar_blocks", "test_imported", "test_postgres", "test_copy")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rpartition(".")[2]
    bounced = ["pgbouncer"] if module in THROUGH_PGBOUNCER_TOO else []
    chosen = any("db_url" in mark.args[0] for mark in metafunc.definition.iter_markers("parametrize"))
    if "db_url" in metafunc.fixturenames and not chosen:  # a test may name its engines itself
        engines = ["sqlite"] if module in SQLITE_ONLY else ["sqlite", "postgres"]
        metafunc.parametrize("db_url", engines + bounced, indirect=True)
    elif "pg_url" in metafunc.fixturenames and bounced:
        metafunc.parametrize("pg_url", ["postgres", *bounced], indirect=True)


@pytest.fixture(scope="session")
def pg_bouncer():
    """A PgBouncer (transaction pooling, 5 server connections per schema) in front of the test
    server for the whole session; `url_for` gives a test URL's equivalent through it."""
    with bouncer(SERVER_URL) as running:
        yield running


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path):
    """A fresh result-table location: a SQLite file path in the test's temporary folder, or the URL
    of a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield str(tmp_path / "results.db")
        return
    with scratch_schema(request.getfixturevalue("pg_database")) as url:
        yield request.getfixturevalue("pg_bouncer").url_for(url) if request.param == "pgbouncer" else url


@pytest.fixture
def table(tmp_path: Path):
    """A scratch SQLite result table in the test's folder. Modules that test both engines define
    their own `table` on `db_url`."""
    with scratch_table(tmp_path) as table:
        yield table


@pytest.fixture
def shippers_end_with_the_test():
    """A spool's shipper lives as long as its process: a test's would go on shipping to a schema
    dropped after the test (store/spool_shipper.py)."""
    yield
    from tallyboard.store.spool_shipper import stop_shippers

    stop_shippers(timeout=0)


@pytest.fixture
def sqlite_statements(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """(connection, statement) of every statement SQLite runs on the writing connections this test
    opens from now on, in order, from SQLite's own trace (`Connection.set_trace_callback`)."""
    from tallyboard.store import sqlite

    statements: list[tuple[int, str]] = []
    open_for_writing = sqlite.open_for_writing

    def traced(path: str, timeout: float):
        conn = open_for_writing(path, timeout)
        key = id(conn)
        conn.set_trace_callback(lambda sql: statements.append((key, sql)))
        return conn

    monkeypatch.setattr(sqlite, "open_for_writing", traced)
    return statements

"""Fixtures shared across test folders.

`db_url` is the database every result-table test writes to, once per engine: a real SQLite file
on disk, and an empty schema of its own on the real PostgreSQL server (tests/pg_support.py; skipped
locally without a server, a failure in CI). Modules that inspect SQLite files directly run on SQLite
only (`SQLITE_ONLY`).
"""

from pathlib import Path

import pytest

from demo_table import demo_table
from live_runs import scratch_table
from pg_support import pg_database, pg_url, scratch_schema

# pg_*: the session database and a schema of one's own; demo_table: the demo's table, made once
__all__ = ["db_url", "demo_table", "pg_database", "pg_url", "table"]

SQLITE_ONLY = ("test_sqlite", "test_crash")  # module names whose tests open the file with sqlite3


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    chosen = any("db_url" in mark.args[0] for mark in metafunc.definition.iter_markers("parametrize"))
    if "db_url" in metafunc.fixturenames and not chosen:  # a test may name its engines itself
        module = metafunc.module.__name__.rpartition(".")[2]
        engines = ["sqlite"] if module in SQLITE_ONLY else ["sqlite", "postgres"]
        metafunc.parametrize("db_url", engines, indirect=True)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path):
    """A fresh result-table location: a SQLite file path in the test's temporary folder, or the URL
    of a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield str(tmp_path / "results.db")
        return
    with scratch_schema(request.getfixturevalue("pg_database")) as url:
        yield url


@pytest.fixture
def table(tmp_path: Path):
    """A scratch SQLite result table in the test's folder. Modules that test both engines define
    their own `table` on `db_url`."""
    with scratch_table(tmp_path) as table:
        yield table

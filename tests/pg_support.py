"""A real PostgreSQL server for tests: one scratch database per session, one schema per test.

The server is the one CI starts (127.0.0.1:5432, trust auth, user postgres); set
TALLYBOARD_TEST_PG_URL to point elsewhere (TALLYBOARD_TEST_PG, its older name, still works). A
schema per test is cheap (milliseconds, unlike a database) and isolates tests completely: the store
finds its tables through `search_path`, which the URL carries as `options=-csearch_path=...`, so
every process and every reconnect of a test lands in that test's schema.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from support import require

SERVER_URL = (
    os.environ.get("TALLYBOARD_TEST_PG_URL")
    or os.environ.get("TALLYBOARD_TEST_PG")
    or "postgresql://postgres@127.0.0.1:5432/test"
)


def _connect(url: str, **kwargs):
    import psycopg

    return psycopg.connect(url, connect_timeout=3, prepare_threshold=None, **kwargs)  # PgBouncer-safe


def server_available() -> bool:
    """True when psycopg is installed and the test server accepts a connection."""
    try:
        with _connect(SERVER_URL):
            return True
    except Exception:
        return False


def _with_database(url: str, database: str) -> str:
    base, _, _ = url.partition("?")
    return base.rsplit("/", 1)[0] + "/" + database


def with_schema(database_url: str, schema: str) -> str:
    """The URL of `schema` inside `database_url`'s database (search_path travels with the URL)."""
    return f"{database_url}?options={quote('-csearch_path=' + schema)}"


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """Create a fresh database for a test session, yield its URL, and drop it afterwards."""
    require(server_available(), f"PostgreSQL at {SERVER_URL}")
    name = f"tallyboard_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with _connect(SERVER_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(SERVER_URL, name)
    finally:
        with _connect(SERVER_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def scratch_schema(database_url: str) -> Iterator[str]:
    """Create an empty schema in the session database, yield a URL that uses it, drop it afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with _connect(database_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield with_schema(database_url, schema)
    finally:
        settle_sinks()
        with _connect(database_url, autocommit=True) as admin:
            # A connection a test left idle in a transaction (a killed child's, say) would block
            # the drop; end those, which in a scratch database can only be ours.
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'"
            )
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def settle_sinks() -> None:
    """Commit what this process's runs queued before a test's schema is dropped: a record racing the
    drop would wait in memory for a database that never comes back, and the process would spend
    `OUTAGE_WAIT` on it at exit."""
    from tallyboard.run import sink

    for each in list(sink.all_sinks()):
        if each.pid == os.getpid() and each._thread.is_alive() and each.pending():
            with contextlib.suppress(Exception):  # a test's own outage: its records may stay queued
                each.flush(wait=2.0)


def connect(url: str, **kwargs):
    """A plain psycopg connection to a test URL, for checks that bypass the store."""
    return _connect(url, **kwargs)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """URL of a scratch database that lives for the test session."""
    with scratch_database() as url:
        yield url


@pytest.fixture
def pg_url(request: pytest.FixtureRequest, pg_database: str) -> Iterator[str]:
    """URL of an empty schema of its own for one test; where tests/conftest.py parametrizes it with
    "pgbouncer", the URL of that schema through the session's PgBouncer."""
    with scratch_schema(pg_database) as url:
        through_bouncer = getattr(request, "param", None) == "pgbouncer"
        yield request.getfixturevalue("pg_bouncer").url_for(url) if through_bouncer else url

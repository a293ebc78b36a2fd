"""A password in a table's URL reaches the connect call and nothing else.

Every path that speaks of a location -- errors, warnings, log lines, progress bars, the CLI's
echoes, the dashboard's start line and its 503s, a run's recorded environment -- is driven here
with a URL holding `PASSWORD`, and the password must appear nowhere: not in captured stdout or
stderr, not in a logging record, not in an exception's str or repr, nor in any exception it
chains (`__cause__`, `__context__`). The real PostgreSQL server (trust authentication accepts any
password) stands in where a path needs a database; port 1 of 127.0.0.1, or a server of the test's
own stopped on purpose (tests/own_postgres.py), where it needs an outage.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator

import psycopg
import pytest
from starlette.testclient import TestClient

import tallyboard as tb
from own_postgres import own_server
from pg_support import connect
from tallyboard.cli.main import main
from tallyboard.dashboard import create_app
from tallyboard.errors import NotAResultTable, NotDurableError, ReadOnlyTableError, StoreError
from tallyboard.run import exit_paths
from tallyboard.store import Access, Location, open_store, pg_session
from tallyboard.store import artifacts as artifacts_module
from tallyboard.store.copy import copy_table
from tallyboard.store.spool import location as spool_location
from tallyboard.store.spool_shipper import stop_shippers

PASSWORD = "Pw-4f1d9c7e-secret"
UNREACHABLE = f"postgresql://alice:{PASSWORD}@127.0.0.1:1/results"  # nothing listens on port 1
NOP = tb.NoCommitAction.NOP


def with_password(url: str, password: str = PASSWORD) -> str:
    """`url` (a test URL of user@host) with `password` in its user part."""
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{password}@{host}"


def texts_of(error: BaseException) -> Iterator[str]:
    """What `error` and every exception it chains say, in str and repr."""
    pending, seen = [error], set()
    while pending:
        each = pending.pop()
        if each is None or id(each) in seen:
            continue
        seen.add(id(each))
        yield str(each)
        yield repr(each)
        pending += [each.__cause__, each.__context__]


def assert_hidden(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text, text


def assert_error_hidden(error: BaseException) -> None:
    assert_hidden(*texts_of(error))


def assert_logs_hidden(caplog: pytest.LogCaptureFixture) -> None:
    """Every record's message, its arguments and its formatted traceback."""
    assert_hidden(caplog.text)
    for record in caplog.records:
        assert_hidden(record.getMessage(), repr(record.args))
        if record.exc_info and record.exc_info[1] is not None:
            assert_error_hidden(record.exc_info[1])


@pytest.fixture
def quiet_shippers() -> Iterator[None]:
    yield
    stop_shippers(timeout=0)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # ours and psycopg's, every level
    return caplog


# ---- the value ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("postgresql://me:s3cret@db-host:5432/exp", "postgresql://me:***@db-host:5432/exp"),
        ("postgres://:s3cret@[::1]/exp", "postgres://:***@[::1]/exp"),
        ("postgresql://me@db-host/exp?sslmode=require&password=s3cret", "postgresql://me@db-host/exp?sslmode=require&password=***"),
        ("postgresql://me@db/exp?sslpassword=s3cret&options=-c%20x%3D1", "postgresql://me@db/exp?sslpassword=***&options=-c%20x%3D1"),
        ("postgresql://me:s3?c#ret@db/exp", "postgresql://me:***@db/exp"),
        ("postgresql://me:s3cret@db/exp?application_name=me@lab", "postgresql://me:***@db/exp?application_name=me@lab"),
        ("postgresql://me@db-host/exp", "postgresql://me@db-host/exp"),
        ("results.db", "results.db"),
        ("spool:/var/spool/run.db", "spool:/var/spool/run.db"),
    ],
)  # fmt: skip
def test_a_location_is_shown_without_its_password(given, shown):
    location = Location.of(given)
    assert str(location) == f"{location}" == "%s" % location == shown  # noqa: UP031 (logging's way)
    assert repr(location) == f"Location({shown!r})"
    assert location.secret() == given


def test_a_location_hands_out_its_secret_only_when_asked():
    location = Location.of(UNREACHABLE)
    with pytest.raises(TypeError):
        os.fspath(location)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        json.dumps(location)
    with pytest.raises(TypeError):
        "at " + location  # type: ignore[operator]
    assert_hidden(str(location), repr(location), str([location]), str({"url": location}))
    assert pickle.loads(pickle.dumps(location)).secret() == UNREACHABLE  # a spawned worker connects
    assert Location.of(location) is location


@pytest.mark.parametrize(
    "given",
    [
        f"postgresql://alice:{PASSWORD}@x@db/results",  # libpq ends the password at the first @
        f"postgresql://alice:{PASSWORD}/x@db/results",  # ... and never looks past a /
        f"mysql://alice:{PASSWORD}@db/results",
    ],
)
def test_a_url_libpq_would_misread_is_refused_without_its_password(given):
    with pytest.raises(NotAResultTable) as refused:
        tb.ResultTable(given)
    assert_error_hidden(refused.value)


# ---- opening fails ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "given",
    [
        UNREACHABLE,
        f"postgresql://alice:{PASSWORD}%zz@127.0.0.1:1/results",  # libpq quotes the token it cannot decode
        f"postgresql://alice@127.0.0.1:1/results?password={PASSWORD}%zz",
        f"postgresql://alice:{PASSWORD}@127.0.0.1:1",  # no database
        f"postgresql://alice:{PASSWORD}@127.0.0.1:notaport/results",
    ],
)
def test_a_table_that_cannot_be_opened_says_so_without_the_password(given, logs, capfd):
    with pytest.raises(Exception) as failed:
        tb.ResultTable(given)
    assert_error_hidden(failed.value)
    assert main(["runs", given]) == 1
    assert_hidden(*capfd.readouterr())
    assert_logs_hidden(logs)


def test_the_connect_call_gets_the_password_and_its_errors_do_not(monkeypatch):
    given = []
    real_connect = psycopg.connect

    def recording(conninfo, **options):
        given.append(conninfo)
        return real_connect(conninfo, **options)

    monkeypatch.setattr(psycopg, "connect", recording)
    for url in (UNREACHABLE, f"postgresql://alice:{PASSWORD}%zz@127.0.0.1:1/results"):
        with pytest.raises(psycopg.Error) as refused:
            pg_session.connect(Location.of(url), connect_timeout=5)
        assert_error_hidden(refused.value)
    assert given == [UNREACHABLE, f"postgresql://alice:{PASSWORD}%zz@127.0.0.1:1/results"]


@pytest.fixture
def secret_url(pg_url: str) -> str:
    """The test's schema on the real server, the URL holding `PASSWORD` (trust accepts it)."""
    return with_password(pg_url)


def test_refusals_of_a_table_on_postgresql_hide_the_password(secret_url, tmp_path, logs, capfd):
    with connect(secret_url, autocommit=True) as admin:
        admin.execute("CREATE TABLE meta (x INTEGER)")  # someone else's table named meta
    for access in Access:
        with pytest.raises(NotAResultTable) as refused:
            open_store(secret_url, access=access)
        assert_error_hidden(refused.value)
    with connect(secret_url, autocommit=True) as admin:
        admin.execute("DROP TABLE meta")
    with pytest.raises(NotAResultTable) as empty:  # nothing there yet, to read
        open_store(secret_url, access=Access.READ)
    assert_error_hidden(empty.value)

    tb.ResultTable(secret_url, nocommit_action=NOP).close()
    with pytest.raises(StoreError) as other_columns:
        tb.ResultTable(secret_url, unique_columns=("experiment",))
    assert_error_hidden(other_columns.value)
    reader = tb.ResultTable(secret_url, read_only=True)
    with pytest.raises(ReadOnlyTableError) as refused_run:
        reader.new_run("x")
    assert_error_hidden(refused_run.value)
    reader.close()
    with (
        open_store(secret_url, access=Access.READ) as store,
        pytest.raises(ReadOnlyTableError) as refused_write,
    ):
        store.ready_for_writing()
    assert_error_hidden(refused_write.value)
    assert_hidden(*capfd.readouterr())
    assert_logs_hidden(logs)


def test_db_path_stays_a_file_path_and_a_url_without_its_password(secret_url, tmp_path):
    path = str(tmp_path / "results.db")
    table = tb.ResultTable(path, nocommit_action=NOP)
    run = table.new_run("x", auto_log_plt=False)
    assert table.db_path == run.db_path == path  # DeepBoard's: a str, the path as given
    assert os.path.exists(table.db_path)
    sqlite3.connect(table.db_path).close()
    run.close()
    table.close()

    table = tb.ResultTable(secret_url, nocommit_action=NOP)
    run = table.new_run("x", auto_log_plt=False)
    assert table.db_path == run.db_path == str(Location.of(secret_url))
    assert_hidden(table.db_path)
    run.close()
    with tb.ResultTable(table.location) as again:  # the location opens it again, password and all
        assert again.runs == [run.run_id]
    table.close()


# ---- the table commands and the CLI -----------------------------------------------------------------
def test_copy_migrate_import_and_their_progress_bars_hide_the_password(secret_url, tmp_path, logs, capfd):
    source = str(tmp_path / "source.db")
    with tb.ResultTable(source, nocommit_action=NOP) as table:
        with table.new_run("copied", auto_log_plt=False) as run:
            run.add_scalar("loss", 1.0)
        table.export(tmp_path / "export")
    assert main(["copy", source, secret_url]) == 0  # a progress bar on stderr, then a line
    out, err = capfd.readouterr()
    assert "copying to postgresql://postgres:***@" in err
    assert "copied " in out
    assert_hidden(out, err)
    copy_table(source, secret_url, progress=True)  # again: nothing new, the same bar
    assert_hidden(*capfd.readouterr())

    other = str(tmp_path / "other.db")
    with tb.ResultTable(other, nocommit_action=NOP) as table:
        table.new_run("another", auto_log_plt=False).close()
    with pytest.raises(StoreError) as clash:  # run 1 is another run there
        copy_table(other, secret_url, progress=False)
    assert_error_hidden(clash.value)
    assert main(["copy", other, secret_url]) == 1

    assert main(["migrate", secret_url]) == 0
    assert main(["import", "tallyboard", str(tmp_path / "export"), "--into", secret_url]) == 0
    assert main(["sync", secret_url]) == 1
    assert main(["runs", secret_url]) == 0
    out, err = capfd.readouterr()
    assert "postgresql://postgres:***@" in out
    assert_hidden(out, err)
    assert_logs_hidden(logs)


def test_serve_prints_the_location_without_the_password(secret_url):
    tb.ResultTable(secret_url, nocommit_action=NOP).close()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "tallyboard", "serve", secret_url, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        first = server.stdout.readline()  # the start line, or '' should it have died
    finally:
        server.terminate()
        _, err = server.communicate(timeout=60)
    assert first.startswith("tallyboard dashboard for postgresql://postgres:***@"), (first, err)
    assert_hidden(first, err)


def test_the_dashboard_names_its_table_by_the_shown_location(secret_url):
    tb.ResultTable(secret_url, nocommit_action=NOP).close()
    with TestClient(create_app(secret_url, read_only=True), base_url="http://127.0.0.1") as client:
        page = client.get("/").text
    assert hashlib.sha256(str(Location.of(secret_url)).encode()).hexdigest()[:16] in page
    assert_hidden(page)


def test_a_runs_environment_records_tallyboard_url_without_the_password(tmp_path, monkeypatch):
    monkeypatch.setenv("TALLYBOARD_URL", UNREACHABLE)  # the table itself is given: not opened
    with tb.ResultTable(str(tmp_path / "results.db"), nocommit_action=NOP) as table:
        with table.new_run("x", auto_log_plt=False) as run:
            pass
        environment = table.get_environment(run.run_id)
    assert environment["env"]["TALLYBOARD_URL"] == str(Location.of(UNREACHABLE))
    assert_hidden(json.dumps(environment))


def test_a_spool_bound_elsewhere_is_refused_without_either_password(tmp_path, quiet_shippers):
    spool = tmp_path / "spool.db"
    spool_location(spool, Location.of(UNREACHABLE), ())
    other = Location.of(UNREACHABLE.replace("/results", "/other"))
    with pytest.raises(StoreError) as refused:
        spool_location(spool, other, ())
    assert_error_hidden(refused.value)
    assert "127.0.0.1:1/results" in str(refused.value)


# ---- an outage and its end --------------------------------------------------------------------------
def wait_for_record(logs: pytest.LogCaptureFixture, words: str, timeout: float = 60.0) -> None:
    """Until a record says `words` (the shipper's thread logs on its own time), at most `timeout` s."""
    deadline = time.monotonic() + timeout
    while not any(words in record.getMessage() for record in logs.records):
        assert time.monotonic() < deadline, f"no record said {words!r}"
        time.sleep(0.05)


def test_an_outage_and_its_end_are_told_without_the_password(
    tmp_path, logs, capfd, monkeypatch, quiet_shippers
):
    with own_server() as server:
        url = with_password(server.url)
        table = tb.ResultTable(url, nocommit_action=NOP)
        run = table.new_run("outage", auto_log_plt=False)
        run.add_scalar("loss", 1.0)
        run.flush()
        spooled = tb.ResultTable(url, spool=tmp_path / "spool.db", nocommit_action=NOP)
        spooled.new_run("spooled", auto_log_plt=False).close()
        assert spooled.ship(timeout=60)
        dashboard = TestClient(create_app(url), base_url="http://127.0.0.1")
        dashboard.__enter__()

        server.stop()
        run.add_scalar("loss", 2.0)
        with pytest.raises(NotDurableError) as not_durable:
            run.flush()
        assert_error_hidden(not_durable.value)
        unreachable = dashboard.get("/api/runs")
        assert unreachable.status_code == 503
        assert "postgresql://postgres:***@" in unreachable.text
        assert_hidden(unreachable.text)
        spooled.new_run("while down", auto_log_plt=False).close()
        wait_for_record(logs, "could not ship to")
        monkeypatch.setattr(exit_paths, "_abandoned", False)  # what the test ends with, whatever comes
        exit_paths._abandon_runs(
            signal.SIGTERM
        )  # a second signal: mark the runs failed, on a connection of its own
        monkeypatch.setattr(exit_paths, "_abandoned", False)  # the run goes on (undone in reverse order)
        assert any("could not mark the runs in" in record.getMessage() for record in logs.records)

        server.start()
        run.flush()
        assert spooled.ship(timeout=60)
        wait_for_record(logs, "accepts writes again")
        wait_for_record(logs, "ships to")
        dashboard.__exit__(None, None, None)
        run.close()
        spooled.close()
        table.close()
    assert_hidden(*capfd.readouterr())
    assert_logs_hidden(logs)


def test_a_spool_file_keeping_the_password_is_readable_by_its_owner_only(tmp_path, quiet_shippers):
    path = tmp_path / "node.spool"
    spool = spool_location(path, Location.of(UNREACHABLE), ())
    with open_store(spool) as store:  # a write creates the WAL and shared-memory files too
        store.create_run({"experiment": "e", "start_time": time.time()})
        for each in (path, tmp_path / "node.spool-wal", tmp_path / "node.spool-shm"):
            assert os.stat(each).st_mode & 0o777 == 0o600, each
        assert PASSWORD in Location(store.state("target")).secret()


def test_an_artefact_store_url_is_named_without_its_password(tmp_path):
    stored = f"memory://alice:{PASSWORD}@kept/artefacts"
    table = tb.ResultTable(str(tmp_path / "r.db"), nocommit_action=NOP, artifacts=stored)
    (tmp_path / "model.bin").write_bytes(b"weights")
    with table.new_run("e") as run:
        run.log_artifact(tmp_path / "model.bin")
    table.close()
    elsewhere = f"memory://alice:{PASSWORD}@empty/artefacts"  # the file is not there
    assert PASSWORD not in artifacts_module.open_blobs(elsewhere).location
    client = TestClient(create_app(str(tmp_path / "r.db"), artifacts=elsewhere), base_url="http://127.0.0.1")
    answer = client.get(f"/api/runs/{run.run_id}/artifacts/model.bin")
    assert answer.status_code == 404
    assert "missing from memory://alice:***@empty/artefacts" in answer.json()["error"]
    assert PASSWORD not in answer.text

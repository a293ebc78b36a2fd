"""Reading never writes (issue 11, issue 16 item 2): SQLite is opened with `mode=ro`, PostgreSQL in
read-only transactions, so `runs`, `export` and `serve --read-only` work on a file nobody may write.

Root may write anything, so the permission cases run as another user (`nobody`) when the tests run
as root; the interpreter must then be one that user can execute (the system `python3`). What that
user runs needs only the standard library: the store, the runs view and the dashboard's queries.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from pg_support import connect
from support import require
from tallyboard.store import Access, Batch, NotAResultTable, ReadOnlyTableError, open_queries, open_store

SRC = Path(tb.__file__).resolve().parents[1]
NOBODY = 65534
READER = """
import json, sys
from tallyboard import ResultTable
from tallyboard.store import Access, open_queries, open_store
path = sys.argv[1]
store = open_store(path, access=Access.READ)
queries = open_queries(path, read_only=True)
view = ResultTable(path, read_only=True).runs_table()
print(json.dumps({"store": len(store.runs()), "runs_view": len(view.rows),
                  "dashboard": queries.runs_version()[0]}))
"""


def read_as_another_user(path: Path) -> dict[str, int]:
    """What READER finds at `path`, run by a user who may not write there."""
    if os.geteuid() != 0:
        command, user = [sys.executable], None
    else:
        python = shutil.which("python3", path="/usr/bin:/usr/local/bin:/bin")
        require(python is not None, "a python3 that user nobody may run")
        command, user = [python], NOBODY
    result = subprocess.run(
        [*command, "-c", READER, str(path)],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        user=user,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder other users can reach (pytest's tmp_path is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="tallyboard-ro-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for path in [base, *base.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(base)


def logged_table(folder: Path, runs: int = 2) -> Path:
    """A table whose every connection is closed: no `-wal`, no `-shm` beside it."""
    folder.mkdir(mode=0o755)
    path = folder / "results.db"
    store = open_store(path)
    for index in range(runs):
        run_id = store.create_run({"experiment": "e", "comment": str(index), "start_time": 0.0})
        store.write_batch(Batch(scalars=[(run_id, "loss", [(0, 0, None, 0.0, 1.0)])]))
    store.close()
    assert sorted(p.name for p in folder.iterdir()) == ["results.db"]
    return path


def files_in(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_a_read_only_file_in_a_read_only_folder_is_read(shared_folder: Path) -> None:
    path = logged_table(shared_folder / "ro")
    path.chmod(0o444)
    path.parent.chmod(0o555)
    before = files_in(path.parent)
    assert read_as_another_user(path) == {"store": 2, "runs_view": 2, "dashboard": 2}
    assert files_in(path.parent) == before  # not a byte changed, no -wal or -shm created


def test_a_read_only_file_in_a_writable_folder_is_read(shared_folder: Path) -> None:
    path = logged_table(shared_folder / "rw")
    path.chmod(0o444)
    path.parent.chmod(0o777)
    content = path.read_bytes()
    assert read_as_another_user(path) == {"store": 2, "runs_view": 2, "dashboard": 2}
    assert path.read_bytes() == content


def test_a_table_being_written_is_read_from_a_read_only_folder(shared_folder: Path) -> None:
    """The writer holds rows in the `-wal`; a reader who may create nothing still sees them."""
    path = logged_table(shared_folder / "live", runs=0)
    writer = open_store(path)
    writer.create_run({"experiment": "live", "start_time": 0.0})
    holder = sqlite3.connect(path)  # a second connection keeps the -wal from being folded back
    holder.execute("SELECT 1 FROM runs").fetchall()
    assert Path(f"{path}-wal").stat().st_size > 0
    path.parent.chmod(0o555)
    try:
        assert read_as_another_user(path)["store"] == 1
    finally:
        path.parent.chmod(0o755)
        holder.close()
        writer.close()


def test_a_reading_store_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    open_store(path).create_run({"experiment": "e", "start_time": 0.0})
    store = open_store(path, access=Access.READ)
    with pytest.raises(ReadOnlyTableError, match="opened read-only"):  # refused before the database
        store.update_run(1, note="changed")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # which could not write anyway
        store.execute("UPDATE runs SET note = 'changed'")
    queries = open_queries(str(path), read_only=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        queries._connect().execute("UPDATE runs SET note = 'changed'")
    assert open_store(path).run(1).note is None  # unchanged: an empty note is NULL (schema v4)


# ---- PostgreSQL -----------------------------------------------------------------------------------
def tables_in_schema(url: str) -> list[str]:
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.postgres
def test_reading_commands_create_nothing_in_an_empty_postgresql_schema(pg_url: str, tmp_path: Path) -> None:
    readers = (
        ("runs", pg_url),
        ("export", pg_url, "--out", tmp_path / "out"),
        ("serve", pg_url, "--read-only"),
    )
    for args in readers:
        assert_one_line_error(run_cli(*args, check=False), "holds no result table", "nothing was created")
    from tallyboard.dashboard import create_app

    with pytest.raises(NotAResultTable, match="holds no result table"):
        create_app(pg_url)
    assert tables_in_schema(pg_url) == []


@pytest.mark.postgres
def test_a_postgresql_url_without_a_database_names_what_is_missing() -> None:
    for url in ("postgresql://", "postgresql://postgres@127.0.0.1:5432"):
        assert_one_line_error(run_cli("runs", url, check=False), "names no database", "/DATABASE")


@pytest.mark.postgres
def test_reading_postgresql_runs_read_only_transactions(pg_url: str) -> None:
    import psycopg

    writer = open_store(pg_url)
    run_id = writer.create_run({"experiment": "e", "start_time": 0.0})
    writer.close()
    store = open_store(pg_url, access=Access.READ)
    assert store.execute("SHOW transaction_read_only") == [("on",)]
    with pytest.raises(ReadOnlyTableError):  # refused before the database
        store.update_run(run_id, note="changed")
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):  # which could not write anyway
        store.execute("UPDATE runs SET note = 'changed'")
    # per transaction, never for the session: behind PgBouncer, a session setting would make
    # other clients' writes on the same server connection fail
    assert store.execute("SHOW default_transaction_read_only") == [("off",)]
    store.close()
    queries = open_queries(pg_url, read_only=True)
    assert queries._one("SHOW transaction_read_only") == ("on",)
    assert queries._each("SHOW transaction_read_only", [()]) == [("on",)]
    assert queries._one("SHOW default_transaction_read_only") == ("off",)
    queries.close()


@pytest.mark.postgres
def test_a_role_that_may_only_select_browses_a_postgresql_table(pg_url: str) -> None:
    from starlette.testclient import TestClient

    from tallyboard.dashboard import create_app

    writer = open_store(pg_url)
    writer.create_run({"experiment": "e", "comment": "seen by a reader", "start_time": 0.0})
    writer.close()
    role = f"reader_{uuid.uuid4().hex[:10]}"
    parts = urlsplit(pg_url)
    reader_url = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))
    with connect(pg_url, autocommit=True) as admin:
        schema = admin.execute("SELECT current_schema()").fetchone()[0]
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
    try:
        assert "seen by a reader" in run_cli("runs", reader_url).stdout
        with TestClient(create_app(reader_url, read_only=True), base_url="http://127.0.0.1") as client:
            assert "seen by a reader" in client.get("/api/runs").text
    finally:
        with connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')

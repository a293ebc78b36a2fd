"""The store on a real SQLite file, where only SQLite shows it: WAL, the file's version, busy files,
readers. The engine-neutral `Store` contract is in test_store.py."""

import json
import sqlite3
import subprocess
import sys
import threading

import pytest

from store.schema_versions import downgrade
from store.test_store import new_run
from tallyboard.store import Batch, StoreError, open_store, schema
from tallyboard.store.sqlite import SqliteStore, new_table


def test_new_file_gets_schema_version_wal_and_unique_columns(db_url):
    store = open_store(db_url, ("experiment", "tag"))
    assert store.meta("schema_version") == str(schema.SCHEMA_VERSION)
    assert json.loads(store.meta("unique_columns")) == ["experiment", "tag"]
    store.close()
    conn = sqlite3.connect(db_url)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'scalar_blocks'").fetchone()[0]
    assert "WITHOUT ROWID" not in sql  # rows of some 10 kB: SQLite keeps those in a rowid table


def test_a_newer_file_is_refused_naming_both_versions(db_url):
    open_store(db_url).close()
    conn = sqlite3.connect(db_url)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    with pytest.raises(StoreError, match=rf"schema version 99.*up to {schema.SCHEMA_VERSION}\b"):
        open_store(db_url)


def test_writes_wait_out_a_connection_holding_the_write_lock(db_url):
    store = SqliteStore(db_url, busy_timeout=0.01)
    run = new_run(store)
    holder = sqlite3.connect(db_url, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    done = threading.Event()

    def write():
        store.write_batch(Batch(scalars=[(run, "x", [(0, 0, None, 0.0, 1.0)])]))
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    assert not done.wait(0.3)  # retrying, not failing
    holder.execute("COMMIT")
    thread.join()
    assert store.scalars(run, "x") == [(0, 0, None, 0, 1.0)]


def test_a_reader_with_an_open_transaction_never_blocks_a_commit(db_url):
    store = open_store(db_url)
    run = new_run(store)
    reader = sqlite3.connect(db_url, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COALESCE(SUM(n), 0) FROM scalar_blocks").fetchone() == (0,)
    store.write_batch(Batch(scalars=[(run, "x", [(0, i, None, 0.0, 1.0) for i in range(100)])]))
    assert reader.execute("SELECT COALESCE(SUM(n), 0) FROM scalar_blocks").fetchone() == (0,)  # its snapshot
    reader.execute("COMMIT")
    assert reader.execute("SELECT COALESCE(SUM(n), 0) FROM scalar_blocks").fetchone() == (100,)


FORK_MID_TRANSACTION = """
import os, sys, threading
from tallyboard.store import open_store
path = sys.argv[1]
store = open_store(path)
inside, go_on = threading.Event(), threading.Event()

def transaction():
    inside.set()
    go_on.wait()
    store.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")

writer = threading.Thread(target=lambda: store.atomic(transaction))
writer.start()
inside.wait()
threading.Timer(0.2, go_on.set).start()  # the transaction ends while the fork waits for it
pid = os.fork()
if pid == 0:  # SQLite's lock bookkeeping, copied by the fork, must not say the write lock is held
    child = open_store(path)
    child.atomic(lambda: child.execute("UPDATE meta SET value = value WHERE key = 'schema_version'"))
    os._exit(0)
writer.join()
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


def test_a_child_forked_while_a_thread_is_inside_a_transaction_can_write(db_url):
    open_store(db_url).close()
    done = subprocess.run(
        [sys.executable, "-c", FORK_MID_TRANSACTION, db_url], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "child 0", done.stderr


def schema_and_rows(path):
    with sqlite3.connect(path) as conn:
        objects = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        rows = {
            name: sorted(conn.execute(f"SELECT * FROM {name}").fetchall())
            for kind, name, *_ in objects
            if kind == "table"
        }
    conn.close()
    return objects, rows


def test_a_new_file_has_exactly_the_schema_and_rows_of_a_version_1_file_migrated_forward(tmp_path):
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    open_store(new, ("experiment",)).close()
    open_store(old, ("experiment",)).close()
    downgrade(str(old), 1)
    with open_store(old) as store:
        store.ready_for_writing()
    assert schema_and_rows(new) == schema_and_rows(old)


def test_creating_a_file_replays_its_schema_and_runs_no_migration(tmp_path, sqlite_statements):
    """What a new table costs is its statements: one per table and index, one per row it starts with."""
    template = new_table()  # made once per process, in memory
    sqlite_statements.clear()
    open_store(tmp_path / "new.db").close()
    made = len(template.statements) + sum(len(rows) for _, rows in template.rows) + 1  # + unique columns
    assert made <= len(sqlite_statements) <= made + 15  # the transaction, pragmas, looking, checkpointing


def test_the_uniqueness_check_of_a_new_run_reads_through_the_index(tmp_path, sqlite_statements):
    """A scan of every run at every start made a sweep's starts cost more with each run."""
    with open_store(tmp_path / "runs.db") as store:
        new_run(store, unique_key='["a"]')
    start = "SELECT run_id, rerun_of FROM runs WHERE substr"
    check = next(sql for _, sql in sqlite_statements if sql.startswith(start))
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        plan = " ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {check}"))
    conn.close()
    assert "USING INDEX runs_by_unique_key" in plan

"""The store on a real PostgreSQL server: schema, versions, lost connections, many writers, races.

Every test gets an empty schema of its own (`pg_url`, tests/pg_support.py); writer processes are
real `python` subprocesses that reach the same schema through the URL.
"""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

import tallyboard as tb
from pg_support import connect
from tallyboard.run import sink as sink_module
from tallyboard.run.sink import Sink
from tallyboard.store import Batch, StoreError, open_store, schema
from tallyboard.store.postgres import RUNS_LOCK, PostgresStore

WRITER = """
import sys, tallyboard as tb
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP, commit_interval=0.01)
run = table.new_run(name)
for step in range(count):
    run.add_scalar("train/loss", step * 0.5)
    if step % 500 == 0:
        run.add_text(f"text {step}", tag="log")
        run.flush()
run.write_result(steps=count)
print(run.run_id)
"""


def writer(url: str, name: str, count: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, url, name, str(count)],
        stdout=subprocess.PIPE,
        text=True,
        stderr=subprocess.PIPE,
    )


def finished_run_id(process: subprocess.Popen) -> int:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-3000:]
    return int(out.split()[-1])


def assert_logged_once(url: str, run_id: int, count: int) -> None:
    """Every scalar and text a `WRITER` logged is there exactly once, and the run finished."""
    with connect(url) as conn:
        steps = conn.execute(
            "SELECT count(*), count(DISTINCT step), sum(value) FROM scalar_points WHERE run_id = %s",
            (run_id,),
        )
        assert steps.fetchone() == (count, count, sum(step * 0.5 for step in range(count)))
        texts = conn.execute(
            "SELECT content FROM texts WHERE run_id = %s ORDER BY content", (run_id,)
        ).fetchall()
        assert sorted(row[0] for row in texts) == sorted(f"text {step}" for step in range(0, count, 500))
        status = conn.execute("SELECT status FROM runs WHERE run_id = %s", (run_id,)).fetchone()[0]
        assert status == "finished"


def test_a_new_database_gets_postgres_types_and_schema_version(pg_url):
    store = open_store(pg_url, ("experiment",))
    assert store.meta("schema_version") == str(schema.SCHEMA_VERSION)
    assert json.loads(store.meta("unique_columns")) == ["experiment"]
    types = dict(
        store.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = 'media'"
        )
    )
    assert types["png"] == "bytea" and types["media_id"] == "bigint" and types["walltime_ms"] == "bigint"
    store.close()


def test_a_newer_database_is_refused_naming_both_versions(pg_url):
    open_store(pg_url).close()
    with connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=rf"schema version 99.*up to {schema.SCHEMA_VERSION}\b"):
        open_store(pg_url)


def test_processes_opening_a_new_database_at_once_create_it_once(pg_url):
    script = "import sys; from tallyboard.store import open_store; open_store(sys.argv[1]).close()"
    procs = [subprocess.Popen([sys.executable, "-c", script, pg_url]) for _ in range(4)]
    assert [proc.wait(timeout=60) for proc in procs] == [0] * 4
    with open_store(pg_url) as store:
        assert store.meta("schema_version") == str(schema.SCHEMA_VERSION)


def test_opening_a_ready_table_writes_nothing(pg_url):
    """So that a role with read access only can open it (e.g. to load runs)."""
    open_store(pg_url).close()
    with connect(pg_url) as conn:
        writes = conn.execute("SELECT count(*) FROM tallyboard_commits").fetchone()
        open_store(pg_url).close()
        assert conn.execute("SELECT count(*) FROM tallyboard_commits").fetchone() == writes


def test_a_step_logged_again_in_a_later_batch_overwrites_it(pg_url):
    store = open_store(pg_url)
    run = store.create_run({"experiment": "e", "start_time": 0.0})
    store.write_batch(Batch(scalars=[(run, "x", [(0, step, None, 0.0, 1.0) for step in range(10)])]))
    store.write_batch(Batch(scalars=[(run, "x", [(0, step, 7, 1.0, 2.0) for step in range(5, 15)])]))
    rows = store.scalars(run, "x")
    assert [row[1] for row in rows] == list(range(15))
    assert [row[4] for row in rows] == [1.0] * 5 + [2.0] * 10
    assert {row[2] for row in rows[5:]} == {7}
    store.close()


def test_a_forked_child_opens_its_own_session_and_leaves_the_parents_alone(pg_url, request):
    """A DataLoader-style worker that uses the parent's table, then closes it: the parent keeps its
    session (the child never talks through, nor ends, the connection it inherited)."""
    pooled = request.node.callspec.params["pg_url"] == "pgbouncer"  # no server session to keep
    table = tb.ResultTable(pg_url, nocommit_action=tb.NoCommitAction.NOP)
    parent = table.new_run("parent", auto_log_plt=False)
    for step in range(100):
        parent.add_scalar("train/loss", step * 0.5, step=step)
    parent.flush()
    connection, session = table._store._conn, table._store.execute("SELECT pg_backend_pid()")
    pid = os.fork()
    if pid == 0:  # the child: a run of its own through the parent's table, then close it all
        code = 1
        try:
            child = table.new_run("child", auto_log_plt=False)
            for step in range(200):
                child.add_scalar("train/loss", 1.0, step=step)
            child.write_result(acc=0.5)
            table.close()
            code = 0
        finally:
            os._exit(code)
    for step in range(100, 300):  # meanwhile the parent keeps logging
        parent.add_scalar("train/loss", step * 0.5, step=step)
        if step % 50 == 0:
            parent.flush()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert table._store._conn is connection and not connection.broken
    assert pooled or table._store.execute("SELECT pg_backend_pid()") == session
    parent.add_scalar("train/loss", 150.0, step=300)
    parent.write_result(acc=1.0)
    table.close()
    with connect(pg_url) as conn:
        logged = conn.execute(
            "SELECT r.experiment, r.status, count(*), sum(s.value) FROM runs r"
            " JOIN scalar_points s ON s.run_id = r.run_id GROUP BY r.run_id ORDER BY r.run_id"
        ).fetchall()
    assert logged == [
        ("parent", "finished", 301, sum(step * 0.5 for step in range(301))),
        ("child", "finished", 200, 200.0),
    ]


def test_a_wrong_url_fails_at_once_with_the_servers_reason(pg_url):
    with pytest.raises(Exception, match=r"does not exist|no such database"):  # the server's or PgBouncer's
        PostgresStore(pg_url.replace("/tallyboard_test_", "/no_such_db_"))


def test_result_table_without_a_path_uses_tallyboard_url(pg_url, monkeypatch):
    monkeypatch.setenv("TALLYBOARD_URL", pg_url)
    with tb.ResultTable(nocommit_action=tb.NoCommitAction.NOP) as table:
        run = table.new_run("from-env")
        run.write_result(acc=1.0)
        with connect(pg_url) as conn:
            assert conn.execute("SELECT experiment FROM runs").fetchall() == [("from-env",)]


def test_four_writer_processes_log_every_row_once(pg_url):
    procs = [writer(pg_url, f"writer-{i}", 3000) for i in range(4)]
    run_ids = [finished_run_id(proc) for proc in procs]
    assert len(set(run_ids)) == 4
    for run_id in run_ids:
        assert_logged_once(pg_url, run_id, 3000)


def test_terminated_backends_mid_run_lose_and_double_nothing(pg_url):
    """pg_terminate_backend every connection of the writer, again each time it has committed more:
    it reconnects, and every scalar and text is stored exactly once."""
    open_store(pg_url).close()
    process = writer(pg_url, "survivor", 20_000)
    kills, seen = 0, 0
    with connect(pg_url, autocommit=True) as admin:
        while process.poll() is None and kills < 6:
            stored = admin.execute("SELECT count(*) FROM scalar_points").fetchone()[0]
            if stored > seen:  # it made progress since the last kill: kill again
                seen = stored
                kills += admin.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND application_name = 'tallyboard'"
                    " AND pid <> pg_backend_pid()"  # through PgBouncer, ours may have served the writer
                ).fetchone()[0]
            time.sleep(0.01)
    run_id = finished_run_id(process)
    assert kills >= 2, "the writer finished before its connections could be terminated twice"
    assert_logged_once(pg_url, run_id, 20_000)


class CommitAckLost(PostgresStore):
    """A store whose connection dies right after the server committed, before the client hears of it:
    the one failure after which blindly running the transaction again would double its rows."""

    armed = False
    cut = None  # the `cut_connection` fixture

    def _commit(self, conn):
        super()._commit(conn)
        if self.armed:
            self.armed = False
            self.cut(conn)
            conn.execute("SELECT 1")  # raises: the client learns the connection is gone


@pytest.fixture
def cut_connection(request, pg_url):
    """How a test ends a store's connection from outside: terminate its server backend; through
    PgBouncer, restart PgBouncer (a server connection ended behind it is not the client's: the
    bouncer hands the client another one; a bouncer that goes away takes the client's along)."""
    if request.node.callspec.params["pg_url"] == "pgbouncer":
        running = request.getfixturevalue("pg_bouncer")
        return lambda conn: running.restart()

    def terminate(conn) -> None:
        with connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))

    return terminate


def test_a_commit_whose_acknowledgement_is_lost_is_not_applied_twice(pg_url, cut_connection):
    store = CommitAckLost(pg_url)
    store.cut = cut_connection
    store.armed = True
    run_id = store.create_run({"experiment": "e", "start_time": 1.0, "unique_key": '["e"]'})
    assert [row.run_id for row in store.runs()] == [run_id]  # created once, id still returned
    store.armed = True
    store.write_batch(
        Batch(
            scalars=[(run_id, "loss", [(0, 0, None, 0.0, 1.0)])],
            media=[(run_id, "img", 0, 0, None, 0.0, "image", 1, 1, b"png")],
            texts=[(run_id, "log", 0, 0, None, 0.0, "text", "once")],
        )
    )
    assert store.armed is False  # the connection really died after the commit
    assert [row[-1] for row in store.texts(run_id)] == ["once"]
    assert [row[-1] for row in store.media(run_id)] == [b"png"]
    assert store.scalars(run_id, "loss") == [(0, 0, None, 0, 1.0)]
    store.close()


def test_a_batch_sent_again_after_its_commit_outcome_stayed_unknown_is_applied_once(
    pg_url, monkeypatch, cut_connection
):
    """The server is gone for longer than `retry_for` right while a COMMIT is in flight: the store
    gives up not knowing whether it landed, the sink keeps the batch and sends it again later."""
    store = CommitAckLost(pg_url, retry_for=0)  # gives up at the first lost connection
    store.cut = cut_connection
    run_id = store.create_run({"experiment": "e", "start_time": 1.0})
    monkeypatch.setattr(sink_module.log, "exception", lambda *args: None)
    sink = Sink(store, commit_interval=3600)  # only flush() triggers a commit
    sink.put("media", (run_id, "img", 0, 0, None, 0.0, "image", 1, 1, b"png"))
    sink.put("texts", (run_id, "log", 0, 0, None, 0.0, "text", "once"))
    store.armed = True
    with pytest.raises(RuntimeError, match="could not write"):
        sink.flush()  # it did land, unseen
    assert store.armed is False
    sink.put("texts", (run_id, "log", 0, 1, None, 0.0, "text", "logged meanwhile"))
    sink.flush()
    assert [row[-1] for row in store.texts(run_id)] == ["once", "logged meanwhile"]
    assert [row[-1] for row in store.media(run_id)] == [b"png"]
    sink.stop()


def test_two_hosts_racing_to_start_the_same_run_create_one(pg_url):
    """Both racers are held at the run lock until both are inside `create_run`, then let go
    together: exactly one creates the run, the other is told which run it duplicates."""
    racer = (
        "import sys, tallyboard as tb\n"
        "from tallyboard.store import DuplicateRunError\n"
        "table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP, on_duplicate='raise')\n"
        "try:\n"
        "    run = table.new_run('race', comment='same config')\n"
        "    run.write_result(ok=1)\n"
        "    print('created', run.run_id)\n"
        "except DuplicateRunError as error:\n"
        "    print('duplicate', error.run_id)\n"
    )
    created = tb.ResultTable(pg_url, nocommit_action=tb.NoCommitAction.NOP)
    created.new_debug_run("create the schema first").close()
    created.close()
    with connect(pg_url) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (RUNS_LOCK,))
        procs = [
            subprocess.Popen([sys.executable, "-c", racer, pg_url], stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        deadline = time.monotonic() + 60
        with connect(pg_url, autocommit=True) as watcher:
            while time.monotonic() < deadline:
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_locks"
                    " WHERE locktype = 'advisory' AND NOT granted AND classid = %s",
                    (RUNS_LOCK,),
                ).fetchone()[0]
                if waiting == 2:
                    break
                assert all(proc.poll() is None for proc in procs), (
                    "a racer ended without waiting for the lock"
                )
                time.sleep(0.02)
            else:
                pytest.fail("the racers never both waited for the run lock")
        holder.commit()  # releases the lock: both go
    outcomes = sorted(proc.communicate(timeout=60)[0].split() for proc in procs)
    assert [outcome[0] for outcome in outcomes] == ["created", "duplicate"]
    assert outcomes[0][1] == outcomes[1][1]  # the duplicate names the run that was created
    with connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM runs WHERE run_id > 0").fetchone() == (1,)


def test_a_reader_never_blocks_the_writer_thread(pg_url):
    with open_store(pg_url) as store:
        run = store.create_run({"experiment": "e", "start_time": 0.0})
        with connect(pg_url) as reader:
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            assert reader.execute("SELECT count(*) FROM scalar_points").fetchone() == (0,)
            done = threading.Event()
            thread = threading.Thread(
                target=lambda: (
                    store.write_batch(Batch(scalars=[(run, "x", [(0, 1, None, 0.0, 2.0)])])),
                    done.set(),
                )
            )
            thread.start()
            assert done.wait(30)
            assert reader.execute("SELECT count(*) FROM scalar_points").fetchone() == (0,)  # its snapshot
        thread.join()
        assert store.scalars(run, "x") == [(0, 1, None, 0, 2.0)]


class LostAfterCommit(PostgresStore):
    """A store whose connection dies after a commit was acknowledged, before its bookkeeping
    (the prune of tallyboard_commits that follows the first write) -- which used to fail the write,
    so that the sink sent the committed batch again under a new id."""

    armed = False
    cut = None  # the `cut_connection` fixture

    def _prune_commits(self):
        if self.armed:
            self.armed = False
            self.cut(self._conn)
        super()._prune_commits()


def test_a_connection_lost_after_an_acknowledged_commit_does_not_fail_the_write(pg_url, cut_connection):
    store = LostAfterCommit(pg_url)
    run_id = store.create_run({"experiment": "e", "start_time": 1.0})
    fresh = LostAfterCommit(pg_url, retry_for=0)  # its first write prunes; no reconnecting
    fresh.cut = cut_connection
    fresh.armed = True
    fresh.write_batch(Batch(texts=[(run_id, "log", 0, 0, None, 0.0, "text", "once")]))
    assert fresh.armed is False
    fresh.write_batch(Batch(texts=[(run_id, "log", 0, 1, None, 0.0, "text", "next")]))
    assert [row[-1] for row in store.texts(run_id)] == ["once", "next"]
    store.close()
    fresh.close()

"""The background sink: nothing appended is lost or doubled, flush means committed, errors are loud."""

import os
import subprocess
import sys
import threading
import time

import pytest

import tallyboard as tb
from tallyboard.errors import NotDurableError
from tallyboard.run import exit_paths
from tallyboard.run import sink as sink_module
from tallyboard.run.sink import Sink
from tallyboard.store import open_store


@pytest.fixture
def store(db_url):
    with open_store(db_url) as store:
        store.run_id = store.create_run({"experiment": "e", "start_time": time.time()})
        yield store


def test_rows_appended_from_many_threads_while_it_commits_all_arrive_once(db_url, store):
    sink = Sink(open_store(db_url), commit_interval=0.001)
    lists = [sink.series(store.run_id, f"t{i}") for i in range(4)]

    def produce(rows):
        for step in range(20_000):
            rows.append((0, step, None, 0.0, float(step)))

    threads = [threading.Thread(target=produce, args=(rows,)) for rows in lists]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.flush()
    for i in range(4):
        assert [row[1] for row in store.scalars(store.run_id, f"t{i}")] == list(range(20_000))
    sink.stop()


def test_flush_returns_only_after_the_commit(db_url, store):
    sink = Sink(open_store(db_url), commit_interval=3600)  # only flush() triggers a commit
    sink.series(store.run_id, "x").append((0, 0, None, 0.0, 1.0))
    sink.put("hparams", (store.run_id, "lr", "0.1"))
    sink.flush()
    assert store.scalars(store.run_id, "x") == [(0, 0, None, 0, 1.0)]
    assert store.values("hparams") == {store.run_id: {"lr": 0.1}}
    sink.stop()


def test_a_failed_commit_raises_in_flush_and_keeps_the_rows_for_the_next(db_url, store, monkeypatch):
    failing = open_store(db_url)
    real_write = failing.write_batch
    failures = [OSError("disk full")]

    def write_batch(batch):
        if failures:
            raise failures.pop()
        real_write(batch)

    monkeypatch.setattr(failing, "write_batch", write_batch)
    monkeypatch.setattr(sink_module.log, "exception", lambda *args: None)
    sink = Sink(failing, commit_interval=3600)  # only flush() triggers a commit
    sink.series(store.run_id, "x").append((0, 0, None, 0.0, 1.0))
    with pytest.raises(RuntimeError, match="disk full"):
        sink.flush()
    sink.flush()
    assert store.scalars(store.run_id, "x") == [(0, 0, None, 0, 1.0)]
    sink.stop()


def test_a_failed_batch_is_sent_again_alone_and_unchanged_then_what_was_logged_meanwhile(
    db_url, store, monkeypatch
):
    """A store that could not tell whether a batch landed recognises it when it comes again."""
    failing = open_store(db_url)
    real_write = failing.write_batch
    sent = []

    def write_batch(batch):
        sent.append((batch, [row[-1] for row in batch.texts]))
        if len(sent) == 1:
            raise OSError("network down")
        real_write(batch)

    monkeypatch.setattr(failing, "write_batch", write_batch)
    monkeypatch.setattr(sink_module.log, "exception", lambda *args: None)
    sink = Sink(failing, commit_interval=3600)  # only flush() triggers a commit
    sink.put("texts", (store.run_id, "log", 0, 0, None, 0.0, "text", "first"))
    with pytest.raises(RuntimeError, match="network down"):
        sink.flush()
    sink.put("texts", (store.run_id, "log", 0, 1, None, 0.0, "text", "meanwhile"))
    sink.flush()  # returns only when both are in
    assert [texts for _, texts in sent] == [["first"], ["first"], ["meanwhile"]]
    assert sent[1][0] is sent[0][0]
    assert [row[-1] for row in store.texts(store.run_id)] == ["first", "meanwhile"]
    sink.stop()


# Hooks and signal handlers are process-wide: these tests run in a fresh interpreter, where no
# earlier test's table, drain or thread can have changed them.
HOOKS_CHILD = """
import signal, sys, threading
import tallyboard as tb
from tallyboard.run import exit_paths
before = (sys.excepthook, threading.excepthook, signal.getsignal(signal.SIGTERM))
table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)
first = table.new_run("a", auto_log_plt=False)
second = table.new_run("b", auto_log_plt=False)
assert sys.excepthook is exit_paths._excepthook
assert signal.getsignal(signal.SIGTERM) is exit_paths._sigterm
first.close()
assert threading.excepthook is exit_paths._threading_excepthook
second.close()
assert (sys.excepthook, threading.excepthook, signal.getsignal(signal.SIGTERM)) == before
"""
SIGINT_CHILD = """
import signal, sys
import tallyboard as tb
from tallyboard.run import exit_paths
before = signal.getsignal(signal.SIGINT)
table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run("a", auto_log_plt=False)
assert signal.getsignal(signal.SIGINT) is exit_paths._sigint
try:
    signal.raise_signal(signal.SIGINT)
except KeyboardInterrupt:  # a first Ctrl-C is still a KeyboardInterrupt
    pass
else:
    raise AssertionError("no KeyboardInterrupt")
run.close()
assert signal.getsignal(signal.SIGINT) is before
"""


def run_child(script, db_url):
    done = subprocess.run([sys.executable, "-c", script, db_url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_hooks_are_installed_while_a_run_is_open_and_restored_after(db_url):
    run_child(HOOKS_CHILD, db_url)


def test_a_thread_dying_fails_only_the_runs_it_started(db_url):
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        main_run = table.new_run("main", auto_log_plt=False)
        finished = table.new_run("done", auto_log_plt=False)
        finished.write_result(acc=1.0)
        started = []

        def work():
            run = table.new_run("worker", auto_log_plt=False)
            started.append(run)
            run.add_scalar("x", 1.0)
            raise ValueError("worker crashed")

        previous = exit_paths._previous["threading_excepthook"]
        exit_paths._previous["threading_excepthook"] = lambda args: None  # keep the test output clean
        try:
            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
        finally:
            exit_paths._previous["threading_excepthook"] = previous
        assert (started[0].status, main_run.status, finished.status) == ("failed", "running", "finished")
        assert [s.value for s in started[0].get_scalar("x")] == [1.0]
        main_run.close()


def test_exit_paths_leave_alone_a_run_that_another_process_opened(db_url):
    """What a forked child holds: copies of its parent's runs (tests/crash has the real fork)."""
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        parents = table.new_run("parent", auto_log_plt=False)
        parents.pid = os.getpid() + 1  # opened by another process
        exit_paths.end_runs("failed")  # what atexit and SIGTERM do
        assert parents.status == "running"
        parents.close()  # what leaving a with block does: the copy only becomes read-only
        assert parents.status == "running"
        with pytest.raises(RuntimeError, match="read-only"):
            parents.add_scalar("x", 1.0)
        exit_paths.closed(parents)
        parents._sink.flush()  # what new_run queued, before the test's database goes


def test_one_sink_per_database_per_process_until_it_is_idle_without_runs(db_url, tmp_path, monkeypatch):
    monkeypatch.setattr(sink_module, "IDLE_STOP", 0.0)
    first = sink_module.sink_for(db_url)
    assert sink_module.sink_for(db_url) is first
    other = sink_module.sink_for(str(tmp_path / "other.db"))
    assert other is not first
    first.release(0)
    assert first._thread.is_alive()  # one user left
    first.release(0)
    other.release(0)
    first._thread.join(timeout=30)
    assert not first._thread.is_alive()
    again = sink_module.sink_for(db_url)
    assert again is not first
    again.release(0)


def test_a_file_deleted_and_created_again_gets_a_new_sink(tmp_path):
    path = tmp_path / "again.db"
    table = tb.ResultTable(str(path), nocommit_action=tb.NoCommitAction.NOP)
    table.new_run("first", auto_log_plt=False).close()
    table.close()
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"again.db{suffix}").unlink(missing_ok=True)
    table = tb.ResultTable(str(path), nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("second", auto_log_plt=False)
    run.add_scalar("x", 1.0)
    run.close()
    assert [s.value for s in run.get_scalar("x")] == [1.0]


class StalledStore:
    """A store whose writes wait until `go` is set (a database locked or gone), counting batches."""

    def __init__(self, store):
        self.store = store
        self.url = store.url
        self.retry_for = 0.0
        self.go = threading.Event()
        self.batches = 0

    def write_batch(self, batch):
        self.go.wait()
        self.batches += 1
        self.store.write_batch(batch)

    def unwritable(self, failed):
        return self.store.unwritable(failed)

    def close(self):
        self.store.close()


def test_records_wait_for_room_when_their_share_of_the_queue_is_full_and_all_arrive(db_url, store):
    stalled = StalledStore(open_store(db_url))
    sink = Sink(stalled, commit_interval=0.01, max_queue_bytes=4 * 8 * 1024)  # records: 8 kB
    text = "x" * 2000
    done = []

    def produce():
        for step in range(20):
            sink.put("texts", (store.run_id, "log", 0, step, None, 0.0, "text", text))
            done.append(step)

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join(timeout=2)
    assert producer.is_alive()  # waiting for room, not growing the queue
    assert sink.queued_bytes() <= sink.max_queue_bytes // 2  # the queue and the batch in flight
    stalled.go.set()
    producer.join()
    sink.flush()
    assert [row[1] for row in store.texts(store.run_id)] == list(range(20))
    sink.stop()


def test_close_in_an_outage_waits_outage_wait_then_raises_and_the_records_arrive_later(
    db_url, store, monkeypatch
):
    failing = open_store(db_url)
    real_write = failing.write_batch
    down = threading.Event()
    down.set()

    def write_batch(batch):
        if down.is_set():
            raise OSError("server unreachable")
        real_write(batch)

    monkeypatch.setattr(failing, "write_batch", write_batch)
    monkeypatch.setattr(exit_paths, "OUTAGE_WAIT", 0.3)
    sink = Sink(failing, commit_interval=0.01)
    sink.users += 1
    sink.series(store.run_id, "x").append((0, 0, None, 0.0, 1.0))
    with pytest.raises(NotDurableError, match=r"server unreachable.*not yet durable"):
        exit_paths.end_run(sink, store.run_id, "finished")
    assert sink.pending() == 2  # the scalar and the end of the run, kept
    down.clear()
    sink.flush(wait=60)
    assert store.scalars(store.run_id, "x") == [(0, 0, None, 0, 1.0)]
    assert store.run(store.run_id).status == "finished"
    sink.stop()


def test_sigint_is_handled_while_a_run_is_open_and_restored_after(db_url):
    run_child(SIGINT_CHILD, db_url)

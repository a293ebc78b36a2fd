"""Real processes that die in every way a training script dies; the file must tell the truth after.

Each scenario runs a small script in a fresh interpreter against a real SQLite file, then reads the
file from this process: the run's final status, and how many of the logged rows were committed.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

PRELUDE = """
import os, sys, threading, time
import tallyboard as tb
table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)
def log(run, count, tag="train/loss"):
    for step in range(count):
        run.add_scalar(tag, float(step))
"""


def launch(db_url, body, **kwargs):
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", script, db_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def runs(db_url):
    """{run_id: (experiment, status, scalar count)} as committed in the file."""
    conn = sqlite3.connect(db_url)
    rows = conn.execute(
        "SELECT r.run_id, r.experiment, r.status,"
        " (SELECT COALESCE(SUM(n), 0) FROM scalar_blocks s WHERE s.run_id = r.run_id)"
        " FROM runs r ORDER BY r.run_id"
    ).fetchall()
    conn.close()
    return {run_id: (name, status, count) for run_id, name, status, count in rows}


def test_uncaught_exception_drains_and_fails_the_run(db_url):
    code, _, err = finish(
        launch(db_url, 'run = table.new_run("boom")\nlog(run, 5000)\nraise ValueError("bad batch")')
    )
    assert code == 1 and "ValueError: bad batch" in err  # the user's traceback is still printed
    assert "Error in sys.excepthook" not in err
    assert runs(db_url) == {1: ("boom", "failed", 5000)}


def test_sys_exit_drains_and_fails_the_unclosed_run_but_not_a_finished_one(db_url):
    body = """
        done = table.new_run("done")
        log(done, 10)
        done.write_result(acc=1.0)
        open_run = table.new_run("open")
        log(open_run, 3000)
        sys.exit(3)
    """
    code, _, _ = finish(launch(db_url, body))
    assert code == 3
    assert runs(db_url) == {1: ("done", "finished", 10), 2: ("open", "failed", 3000)}


USERS_SIGTERM_HANDLER = """
import signal
def graceful(signum, frame):
    print("user handler", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, graceful)
"""


@pytest.mark.parametrize("users_handler", [False, True], ids=["default", "users-handler"])
def test_sigterm_drains_and_fails_the_run_then_does_what_sigterm_did_before(db_url, users_handler):
    body = (
        (USERS_SIGTERM_HANDLER if users_handler else "")
        + """
run = table.new_run("term")
log(run, 4000)
print("ready", flush=True)
threading.Event().wait()
"""
    )
    proc = launch(db_url, body)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    code, out, _ = finish(proc)
    assert (code, out) == ((0, "user handler\n") if users_handler else (-signal.SIGTERM, ""))
    assert runs(db_url) == {1: ("term", "failed", 4000)}


def test_sigkill_loses_at_most_the_last_commit_interval_and_the_file_stays_intact(db_url):
    body = """
        run = table.new_run("killed")
        log(run, 1000)
        run.flush()
        print("flushed", flush=True)
        log(run, 500, tag="later")   # committed by the sink's timer, no flush
        threading.Event().wait()
    """
    proc = launch(db_url, body)
    assert proc.stdout.readline() == "flushed\n"
    deadline = time.monotonic() + 30  # the timer commits every 0.5 s; 30 s only guards a hang
    while runs(db_url)[1][2] < 1500 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    finish(proc)
    assert runs(db_url) == {1: ("killed", "running", 1500)}
    conn = sqlite3.connect(db_url)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_crashing_thread_fails_its_run_only(db_url):
    body = """
        main_run = table.new_run("main")
        def work():
            run = table.new_run("worker")
            log(run, 700)
            raise RuntimeError("worker died")
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        log(main_run, 300)
        main_run.write_result(acc=0.5)
    """
    code, _, err = finish(launch(db_url, body))
    assert code == 0 and "RuntimeError: worker died" in err and "Exception in threading.excepthook" not in err
    assert runs(db_url) == {1: ("main", "finished", 300), 2: ("worker", "failed", 700)}


def test_four_processes_write_one_file_while_a_reader_holds_a_transaction(db_url):
    import tallyboard as tb

    tb.ResultTable(db_url).close()
    reader = sqlite3.connect(db_url, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COALESCE(SUM(n), 0) FROM scalar_blocks").fetchone() == (0,)
    body = """
        run = table.new_run("gpu", comment=os.environ["RANK"])
        for step in range(20_000):
            run.add_scalar("train/loss", float(step))
            if step % 5000 == 0:
                run.add_text(f"step {step}")
        run.add_hparams(rank=int(os.environ["RANK"]))
        run.write_result(loss=0.0)
    """
    procs = [launch(db_url, body, env={**os.environ, "RANK": str(rank)}) for rank in range(4)]
    results = [finish(proc, timeout=120) for proc in procs]
    assert [code for code, _, _ in results] == [0, 0, 0, 0], [err for _, _, err in results]
    assert reader.execute("SELECT COALESCE(SUM(n), 0) FROM scalar_blocks").fetchone() == (
        0,
    )  # still its old snapshot
    reader.execute("COMMIT")
    assert sorted(runs(db_url).values()) == [("gpu", "finished", 20_000)] * 4
    assert reader.execute("SELECT count(*) FROM texts").fetchone() == (16,)


@pytest.mark.parametrize("how", ["exit", "exception"])
def test_a_disabled_run_leaves_no_trace_whatever_happens(db_url, how):
    body = """
        run = table.new_run("off", disable=True)
        log(run, 100)
    """ + ("raise SystemExit(0)" if how == "exit" else "raise KeyError('x')")
    finish(launch(db_url, body))
    assert runs(db_url) == {}


def test_a_forked_child_neither_ends_nor_writes_through_the_parents_run(db_url):
    body = """
        import multiprocessing
        def child():
            own = table.new_run("child")
            log(own, 200)
            own.close()
        parent = table.new_run("parent")
        log(parent, 100)
        process = multiprocessing.get_context("fork").Process(target=child)
        process.start()
        process.join()
        assert process.exitcode == 0
        log(parent, 300, tag="after")
        parent.write_result(acc=1.0)
    """
    code, _, err = finish(launch(db_url, body))
    assert code == 0, err
    assert "could not record" not in err
    assert runs(db_url) == {1: ("parent", "finished", 400), 2: ("child", "finished", 200)}


def test_a_forked_child_leaving_a_with_block_and_exiting_ends_only_its_own_run(db_url):
    body = """
        parent = table.new_run("parent")
        log(parent, 100)
        with table.new_run("block") as block:
            log(block, 50)
            pid = os.fork()
            if pid == 0:  # the child: a run of its own, then out through the with block and atexit
                own = table.new_run("child")
                log(own, 20)
                own.flush()
                sys.exit(0)
            _, status = os.waitpid(pid, 0)
            print("child exit code", os.waitstatus_to_exitcode(status), flush=True)
            log(block, 50, tag="after")
        log(parent, 300, tag="after")
        parent.write_result(acc=1.0)
    """
    code, out, err = finish(launch(db_url, body))
    assert (code, out) == (0, "child exit code 0\n"), err
    assert "Traceback" not in err
    assert runs(db_url) == {
        1: ("parent", "finished", 400),
        2: ("block", "finished", 100),
        3: ("child", "finished", 20),  # left open by the child: its exit(0) ended it, and only it
    }

"""Every way a training script ends, on both engines, counting rows logged against rows found.

Each scenario runs a script in a fresh interpreter that logs one series as fast as it can, with
`walltime=time.time()` so that every committed row says when it was logged. Then this process
reads the database and checks what the docs promise (docs/result-table.md, Durability):
- an ending the process survives (a normal exit without close, an exception, `sys.exit`, SIGTERM,
  SIGINT, SIGTERM with the run in a worker thread): every row logged is found, the run `failed`
  (`finished` after a normal exit);
- an ending it does not (SIGKILL at a random moment, `os._exit`, a second SIGTERM/SIGINT during
  the drain): the rows found are a gapless prefix of those logged, and the last of them was logged
  at most `LOSS_WINDOW` before the end (the loss window), and a second signal ends the process
  within seconds with the run `failed`.
"""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tallyboard.store import open_store

LOSS_WINDOW = 1.0  # seconds of logging that SIGKILL may cost (docs/result-table.md)
# Scheduling noise of a loaded CI box between the moment this process decides to kill and the
# moment the child stops: the kill's own latency, not the sink's, so it is added to the bound.
KILL_LATENCY = 0.25

PRELUDE = """
import os, signal, sys, threading, time
import tallyboard as tb
logged = 0
def log_for(run, seconds, ready_after=None):
    global logged
    start = time.time()
    announced = False
    while time.time() - start < seconds:
        for _ in range(200):
            run.add_scalar("train/loss", float(logged), step=logged, walltime=time.time())
            logged += 1
        if not announced and ready_after is not None and time.time() - start >= ready_after:
            print("ready", flush=True)
            announced = True
def report(*_):
    os.write(2, f"logged {logged}\\n".encode())
"""
# A SIGTERM handler of the user's that reports the count; tallyboard chains to it after draining.
REPORT_ON_SIGTERM = """
def on_term(signum, frame):
    report()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
signal.signal(signal.SIGTERM, on_term)
"""
TABLE = "table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)\n"
OPEN = TABLE + 'run = table.new_run("r")\n'


def launch(db_url: str, body: str) -> subprocess.Popen:
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", script, db_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_ready(proc: subprocess.Popen) -> None:
    line = proc.stdout.readline()
    assert line == "ready\n", (line, proc.stderr.read() if proc.poll() is not None else "")


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def logged_count(err: str) -> int:
    return int([line for line in err.splitlines() if line.startswith("logged ")][-1].split()[1])


def found(db_url: str) -> tuple[str, list[int], float]:
    """(status, steps found in order, wall time of the last row logged) of the one run."""
    store = open_store(db_url)
    try:
        (run,) = store.runs(show_hidden=True)
        rows = store.scalars(run.run_id, "train/loss", columns=("step", "walltime_ms"))
    finally:
        store.close()
    return run.status, [step for step, _ in rows], max((ms for _, ms in rows), default=0) / 1000


def assert_gapless(steps: list[int]) -> None:
    assert steps == list(range(len(steps))), "rows found are not a prefix of those logged"


def assert_nothing_lost(steps: list[int], logged: int) -> None:
    """Every row counted as logged is found. A signal handler runs between two bytecodes, possibly
    after `add_scalar` appended its row but before the script counted it: one more row may be found."""
    assert_gapless(steps)
    assert logged <= len(steps) <= logged + 1, (logged, len(steps))


ENDINGS = {  # ending -> script body after the prelude; each reports how many rows it logged
    "normal exit without close": OPEN + "try:\n    log_for(run, 1.5)\nfinally:\n    report()\n",
    "exception": OPEN + "try:\n    log_for(run, 1.5)\nfinally:\n    report()\nraise ValueError('boom')\n",
    "sys.exit": OPEN + "try:\n    log_for(run, 1.5)\nfinally:\n    report()\nsys.exit(3)\n",
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_an_ending_the_process_survives_keeps_every_row_and_ends_the_run(db_url, ending):
    code, err = finish(launch(db_url, ENDINGS[ending]))
    assert code == {"normal exit without close": 0, "exception": 1, "sys.exit": 3}[ending], err
    status, steps, _ = found(db_url)
    expected = "finished" if ending == "normal exit without close" else "failed"
    assert (status, len(steps)) == (expected, logged_count(err))
    assert_gapless(steps)


SIGNALLED = {  # the signal, and a script that reports its count when the signal ends it
    "SIGTERM": (signal.SIGTERM, REPORT_ON_SIGTERM + OPEN + "log_for(run, 60, ready_after=1.0)\n"),
    "SIGINT": (signal.SIGINT, OPEN + "try:\n    log_for(run, 60, ready_after=1.0)\nfinally:\n    report()\n"),
}


@pytest.mark.parametrize("name", list(SIGNALLED))
def test_a_signal_keeps_every_row_and_fails_the_run(db_url, name):
    signum, body = SIGNALLED[name]
    proc = launch(db_url, body)
    wait_ready(proc)
    proc.send_signal(signum)
    code, err = finish(proc)
    assert code == -signum, err  # it still dies of the signal (SIGINT: after the KeyboardInterrupt)
    status, steps, _ = found(db_url)
    assert status == "failed"
    assert_nothing_lost(steps, logged_count(err))


def test_a_run_of_a_worker_thread_is_drained_and_failed_on_sigterm(db_url):
    body = (
        REPORT_ON_SIGTERM
        + TABLE
        + "def work():\n    log_for(table.new_run('r'), 60, ready_after=1.0)\n"
        + "threading.Thread(target=work, daemon=True).start()\nthreading.Event().wait()\n"
    )
    proc = launch(db_url, body)
    wait_ready(proc)
    proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)
    assert code == -signal.SIGTERM, err
    status, steps, _ = found(db_url)
    assert status == "failed"
    assert_gapless(steps)
    # The worker may append one row between its read-only check and the end of the run (that row
    # is the only one that can be missing), or one it had not counted yet when the count was taken.
    assert logged_count(err) - 1 <= len(steps) <= logged_count(err) + 1


@pytest.mark.parametrize("gap", [0.02, 0.3], ids=["20ms", "300ms"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_during_the_drain_ends_the_process_quickly_keeping_what_was_committed(
    db_url, signum, gap
):
    proc = launch(db_url, OPEN + "log_for(run, 60, ready_after=1.0)\n")
    wait_ready(proc)
    first = time.time()
    proc.send_signal(signum)
    time.sleep(gap)
    if proc.poll() is None:  # the drain may already be over: then the first signal did all
        proc.send_signal(signum)
    code, err = finish(proc, timeout=15)
    assert code != 0 and time.time() - first < 15, err
    status, steps, last = found(db_url)
    assert status == "failed", err
    assert_gapless(steps)
    assert last >= first - LOSS_WINDOW - KILL_LATENCY  # what was committed before the signal stays


def test_sigkill_at_a_random_moment_loses_at_most_the_loss_window(db_url):
    proc = launch(db_url, OPEN + "log_for(run, 60, ready_after=1.0)\n")
    wait_ready(proc)
    time.sleep(random.uniform(0.0, 2.0))
    killed = time.time()
    proc.kill()
    finish(proc)
    status, steps, last = found(db_url)
    assert status == "running"
    assert_gapless(steps)
    assert killed - last <= LOSS_WINDOW + KILL_LATENCY, f"lost the last {killed - last:.2f} s"


def test_os_exit_loses_at_most_the_loss_window(db_url):
    body = OPEN + (
        "log_for(run, 1.0 + float(os.environ['EXTRA']))\nprint(time.time(), flush=True)\nos._exit(0)\n"
    )
    os.environ["EXTRA"] = str(random.uniform(0.0, 2.0))
    try:
        proc = launch(db_url, body)
    finally:
        del os.environ["EXTRA"]
    out, err = proc.communicate(timeout=60)
    exited = float(out.split()[-1])
    status, steps, last = found(db_url)
    assert status == "running", err
    assert_gapless(steps)
    assert exited - last <= LOSS_WINDOW + KILL_LATENCY, f"lost the last {exited - last:.2f} s"


def test_a_forked_child_logging_to_its_parents_run_is_told_at_its_first_call(db_url):
    body = OPEN + textwrap.dedent("""
        run.add_scalar("train/loss", 0.0, step=0)
        pid = os.fork()
        if pid == 0:  # a DataLoader worker, say, with a copy of the parent's run
            refusals = []
            for call in (lambda: run.add_scalar("train/loss", 1.0, step=1), lambda: run.add_text("t")):
                try:
                    call()
                except RuntimeError as error:
                    refusals.append(str(error))
            print(len(refusals), "forked child" in refusals[0], flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        run.add_scalar("train/loss", 2.0, step=2)
        run.close()
    """)
    proc = launch(db_url, body)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (0, "2 True\n"), err
    status, steps, _ = found(db_url)
    assert (status, steps) == ("finished", [0, 2])

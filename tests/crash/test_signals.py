"""One SIGTERM at any moment, including while the main thread is inside a synchronous store write
(`add_hparams` holds the store's lock): the process drains, marks its run
failed and dies of the signal, within seconds, every trial. Before, the handler drained in the
interrupted frame and waited for the writer thread, which waited for the lock that frame held."""

import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent("""
    import sys
    import tallyboard as tb
    table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("r")
    print("ready", flush=True)
    step = 0
    while True:  # synchronous store writes back to back, scalars between them
        run.add_hparams(**{f"h{step % 50}": step})
        run.add_text(f"step {step}", tag="log")
        run.add_scalar("loss", float(step), step=step)
        step += 1
""")
TRIALS = 8
BOUND = 20.0  # seconds from the signal to the end of the process, on a loaded machine


def test_a_sigterm_at_random_moments_inside_store_writes_ends_the_process_and_fails_the_run(tmp_path):
    for trial in range(TRIALS):
        db = str(tmp_path / f"t{trial}.db")
        proc = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, db], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline() == "ready\n", proc.stderr.read()
        time.sleep(random.uniform(0.05, 0.6))
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"trial {trial}: the process hung after one SIGTERM") from None
        assert proc.returncode == -signal.SIGTERM, err
        assert time.monotonic() - sent <= BOUND
        conn = sqlite3.connect(db)
        (status,) = conn.execute("SELECT status FROM runs").fetchone()
        conn.close()
        assert status == "failed", trial


CTRL_C_TWICE = textwrap.dedent("""
    import os, signal, sys
    import tallyboard as tb
    from tallyboard.run import failure
    table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("r")
    for step in range(100):
        run.add_scalar("loss", float(step), step=step)
    run.flush()
    traceback_text = failure.from_exception

    def read_while_ctrl_c_comes_again(error):  # the second Ctrl-C, while the hook reads the traceback
        os.kill(os.getpid(), signal.SIGINT)
        return traceback_text(error)

    failure.from_exception = read_while_ctrl_c_comes_again
    os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C: a KeyboardInterrupt no one catches
""")


def test_a_second_ctrl_c_while_the_uncaught_interrupt_is_recorded_still_fails_the_run(tmp_path):
    """Before, the second KeyboardInterrupt ended `sys.excepthook` before it recorded anything, and
    the exit took the run for finished."""
    db = str(tmp_path / "t.db")
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_TWICE, db], capture_output=True, text=True, timeout=BOUND
    )
    assert proc.returncode == -signal.SIGINT, proc.stderr
    conn = sqlite3.connect(db)
    (status,) = conn.execute("SELECT status FROM runs").fetchone()
    (points,) = conn.execute("SELECT SUM(n) FROM scalar_blocks").fetchone()
    conn.close()
    assert (status, points) == ("failed", 100), proc.stderr

"""How a run that was never closed ends with its process, in real subprocesses: a normal exit
finishes it (an adapter's chosen end status wins), an uncaught exception, a non-zero exit or a
signal fails it, and a failed run keeps how it failed (type, message, traceback) by default."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import tallyboard as tb

PRELUDE = """
import sys, threading
import tallyboard as tb
table = tb.ResultTable({db_url!r}, nocommit_action=tb.NoCommitAction.NOP)
"""


def run_script(db_url, tmp_path, body, **popen):
    script = textwrap.dedent(PRELUDE.format(db_url=db_url)) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, cwd=tmp_path, **popen
    )


def ended(db_url, run_id):
    table = tb.ResultTable(db_url, read_only=True)
    try:
        run = table.load_run(run_id)
        return run.status, run.error
    finally:
        table.close()


def test_a_run_left_open_ends_at_exit_with_the_status_its_user_chose_else_finished(db_url, tmp_path):
    done = run_script(
        db_url,
        tmp_path,
        """
        chosen = table.new_run("fit-then-test", auto_log_plt=False)
        chosen.add_scalar("train/loss", 1.0)
        chosen.set_status("failed")  # what an adapter does when fit fails
        chosen.add_scalar("test/acc", 0.9)  # the run still takes records: test logs into it
        silent = table.new_run("never-said", auto_log_plt=False)
        silent.add_scalar("train/loss", 1.0)
        print(chosen.run_id, silent.run_id)
        """,
    )
    assert (done.returncode, done.stderr) == (0, "")
    chosen, silent = map(int, done.stdout.split())
    assert ended(db_url, chosen) == ("failed", None)
    assert ended(db_url, silent) == ("finished", None)
    table = tb.ResultTable(db_url)
    assert table.get_experiment_raw(silent)["end_time"] is not None
    assert [s.value for s in table.load_run(chosen).get_scalar("test/acc")] == [0.9]
    table.close()


def test_sys_exit_zero_finishes_the_open_run(db_url, tmp_path):
    done = run_script(db_url, tmp_path, 'run = table.new_run("zero")\nrun.add_scalar("a", 1.0)\nsys.exit(0)')
    assert done.returncode == 0, done.stderr
    assert ended(db_url, 1) == ("finished", None)


def test_an_uncaught_exception_fails_the_run_and_keeps_its_type_message_and_traceback(db_url, tmp_path):
    body = """
        def train_step():
            raise ValueError("bad batch 7")

        run = table.new_run("boom")
        run.add_scalar("train/loss", 1.0)
        train_step()
    """
    done = run_script(db_url, tmp_path, body)
    assert done.returncode == 1 and "ValueError: bad batch 7" in done.stderr  # still printed
    status, error = ended(db_url, 1)
    assert status == "failed"
    assert (error["type"], error["message"]) == ("ValueError", "bad batch 7")
    assert "in train_step" in error["traceback"]
    assert error["traceback"].rstrip().endswith("ValueError: bad batch 7")


def test_a_non_zero_exit_fails_the_run_and_says_its_status(db_url, tmp_path):
    done = run_script(db_url, tmp_path, 'run = table.new_run("three")\nrun.add_scalar("a", 1.0)\nsys.exit(3)')
    assert done.returncode == 3
    status, error = ended(db_url, 1)
    assert status == "failed"
    assert (error["type"], error["message"]) == ("SystemExit", "exit status 3")


def test_an_exit_with_a_message_fails_the_run_with_it(db_url, tmp_path):
    done = run_script(db_url, tmp_path, 'run = table.new_run("message")\nsys.exit("no GPU found")')
    assert done.returncode == 1
    assert ended(db_url, 1)[1]["message"] == "exit status 1: no GPU found"


def test_an_exception_leaving_the_with_block_fails_that_run_and_keeps_it(db_url, tmp_path):
    body = """
        try:
            with table.new_run("block") as run:
                run.add_scalar("a", 1.0)
                {}["missing"]
        except KeyError:
            pass
        after = table.new_run("after")
        after.write_result(acc=1.0)
    """
    done = run_script(db_url, tmp_path, body)
    assert (done.returncode, done.stderr) == (0, "")
    status, error = ended(db_url, 1)
    assert (status, error["type"], error["message"]) == ("failed", "KeyError", "'missing'")
    assert ended(db_url, 2) == ("finished", None)


def test_an_exception_in_a_worker_thread_fails_only_that_threads_run(db_url, tmp_path):
    body = """
        main = table.new_run("main")
        def work():
            run = table.new_run("worker")
            run.add_scalar("a", 1.0)
            raise RuntimeError("worker died")
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    """
    done = run_script(db_url, tmp_path, body)
    assert done.returncode == 0 and "RuntimeError: worker died" in done.stderr
    assert ended(db_url, 1) == ("finished", None)
    status, error = ended(db_url, 2)
    assert (status, error["type"], error["message"]) == ("failed", "RuntimeError", "worker died")


def test_sigterm_fails_the_run_and_names_the_signal(db_url, tmp_path):
    body = """
        import time
        run = table.new_run("term")
        run.add_scalar("a", 1.0)
        run.flush()
        print("ready", flush=True)
        time.sleep(60)
    """
    script = textwrap.dedent(PRELUDE.format(db_url=db_url)) + textwrap.dedent(body)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout.readline() == "ready\n"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.stdout.close()
    status, error = ended(db_url, 1)
    assert (status, error["type"], error["message"]) == ("failed", "SIGTERM", "the process received SIGTERM")


def test_ctrl_c_fails_the_run_with_the_keyboard_interrupt(db_url, tmp_path):
    done = run_script(db_url, tmp_path, 'run = table.new_run("interrupted")\nraise KeyboardInterrupt')
    assert done.returncode == -signal.SIGINT  # the interpreter dies of SIGINT, as Ctrl-C does
    status, error = ended(db_url, 1)
    assert (status, error["type"]) == ("failed", "KeyboardInterrupt")


def test_a_resumed_run_forgets_how_it_failed(db_url, tmp_path):
    run_script(db_url, tmp_path, 'run = table.new_run("again")\nsys.exit(2)')
    assert ended(db_url, 1)[0] == "failed"
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    resumed = table.resume_run(1)
    assert (resumed.status, resumed.error) == ("running", None)
    resumed.close()
    table.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_failure_text_with_nul_and_lone_surrogates_is_stored(db_url, tmp_path):
    done = run_script(db_url, tmp_path, 'run = table.new_run("odd")\nraise ValueError("a\\x00b\\udc80c")')
    assert done.returncode == 1
    assert ended(db_url, 1)[1]["message"] == "a\x00b\udc80c"

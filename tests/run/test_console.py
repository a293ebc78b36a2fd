"""A run's console: what a real process prints, logs and draws with tqdm reaches the run, line by
line, while the terminal still shows it; and what was captured before a SIGKILL stays."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tallyboard as tb
from tallyboard.run.console import last_state

CHILD = textwrap.dedent(
    """
    import logging, subprocess, sys, time
    import tallyboard as tb
    from tqdm import tqdm

    table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("console", capture_console=True, auto_log_plt=False)
    print("epoch 1 starts", flush=True)
    print("a warning on stderr", file=sys.stderr, flush=True)
    logging.getLogger("train").warning("loss went up")
    subprocess.run([sys.executable, "-c", "print('from a grandchild')"], check=True)
    for _ in tqdm(range(50), desc="batches", mininterval=0):
        pass
    print("MARKER", flush=True)
    time.sleep(600)
    """
)
DEADLINE = 120  # s for the child's lines to be committed; the loss window is the commit interval


def console_of(db_url: str) -> list[tuple[str, str]]:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    try:
        return [(line.stream, line.line) for line in table.get_console(1)]
    except KeyError:  # the child has not created its run yet
        return []
    finally:
        table.close()


def test_a_killed_child_keeps_the_console_it_printed_before_the_kill(db_url: str, tmp_path: Path) -> None:
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen([sys.executable, "-c", CHILD, db_url], stdout=stdout, stderr=stderr)
    try:
        deadline = time.monotonic() + DEADLINE
        while ("stdout", "MARKER") not in console_of(db_url):
            assert child.poll() is None, err.read_text()
            assert time.monotonic() < deadline, f"no MARKER in the run: {console_of(db_url)}"
            time.sleep(0.2)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    lines = console_of(db_url)
    assert ("stdout", "epoch 1 starts") in lines
    assert ("stderr", "a warning on stderr") in lines
    assert ("log", "WARNING train: loss went up") in lines
    assert ("stdout", "from a grandchild") in lines  # another process writing to the descriptor
    bars = [line for stream, line in lines if "batches" in line]
    assert len(bars) == 1 and "100%" in bars[0] and "50/50" in bars[0]  # tqdm's redraws: the last
    stdout_order = [line for stream, line in lines if stream == "stdout"]
    assert stdout_order == ["epoch 1 starts", "from a grandchild", "MARKER"]
    # The terminal saw everything too, the logging fallback included.
    assert "epoch 1 starts" in out.read_text() and "from a grandchild" in out.read_text()
    assert "a warning on stderr" in err.read_text() and "loss went up" in err.read_text()
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    assert table.load_run(1).status == "running"  # killed: nothing ended it
    table.close()


def test_capture_ends_with_the_run_and_restores_the_descriptors(db_url: str, capfd) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    before = os.fstat(1).st_ino, os.fstat(2).st_ino
    with table.new_run("console", capture_console=True, auto_log_plt=False) as run:
        os.write(1, b"raw bytes \xff from C\nno newline at the end")
        with pytest.raises(RuntimeError, match="already capturing"):
            table.new_run("second", capture_console=True, auto_log_plt=False)
    assert (os.fstat(1).st_ino, os.fstat(2).st_ino) == before
    print("after the run")
    lines = [(line.stream, line.line) for line in run.get_console()]
    assert ("stdout", "raw bytes \ufffd from C") in lines
    assert ("stdout", "no newline at the end") in lines  # flushed when the capture stopped
    assert all("after the run" not in line for _, line in lines)
    assert "raw bytes" in capfd.readouterr().out  # teed to what descriptor 1 was
    found = run.get_console(search="NO NEWLINE")
    assert [line.line for line in found] == ["no newline at the end"]
    assert run.get_console(after=found[0].console_id) == []
    assert run.get_console(search="100%_") == []  # LIKE's wildcards are taken literally
    table.close()


def test_add_console_line_refuses_bad_input(db_url: str) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("console", auto_log_plt=False) as run:
        with pytest.raises(ValueError, match="stream"):
            run.add_console_line("x", stream="stdin")
        with pytest.raises(ValueError, match="NUL"):
            run.add_console_line("a\x00b")
        run.add_console_line("kept", stream="stderr")
    assert [(line.stream, line.line) for line in run.get_console()] == [("stderr", "kept")]
    table.close()


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"plain", "plain"),
        (b"\r 10%|#   |\r 50%|#####|\r100%|##########|", "100%|##########|"),
        (b"done\r", "done"),  # a Windows line end
        (b"progress\r   \r", "progress"),  # a blanked line keeps what was last shown
        (b"", ""),
    ],
)
def test_a_line_is_its_last_carriage_return_state(raw: bytes, shown: str) -> None:
    assert last_state(raw) == shown

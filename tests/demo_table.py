"""The table `tallyboard demo` logs, made once per test session and shared by every test that reads it.

The demo trains for real (tens of seconds on a loaded 2-core machine), so each test running its own
demo made the suite minutes longer; tests that change the table copy it first.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

import pytest

from cli_runner import run_cli

DEMO_EPOCHS = 2  # enough to learn the digits (val accuracy > 0.8), a third of the default 6


@pytest.fixture(scope="session")
def demo_table(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Path of the session's demo table, made by the real command. Read it only; copy it to change it.

    Under pytest-xdist every worker is a session of its own: the first to need the table makes it
    in the folder the workers share, under a lock; the others wait for it and read the same file."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's base folder, above each worker's own
    path = shared / "demo" / "demo.db"
    path.parent.mkdir(exist_ok=True)
    with open(shared / "demo" / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = path.with_name("made")  # written once the demo succeeded: a failed one is made again
        if not made.exists():
            for leftover in path.parent.glob("demo.db*"):
                leftover.unlink()
            result = run_cli("demo", "--db", path, "--no-serve", "--quiet", "--epochs", str(DEMO_EPOCHS))
            assert "logged 8 runs" in result.stdout, result.stdout
            assert f"tallyboard serve {path}" in result.stdout
            made.touch()
    return str(path)


def copy_of(demo_table: str, path: Path) -> Path:
    """A private copy of the demo table at `path`, WAL included (SQLite's online backup)."""
    source, copy = sqlite3.connect(f"file:{demo_table}?mode=ro", uri=True), sqlite3.connect(path)
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    return path

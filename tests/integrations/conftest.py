"""Fixtures shared by the integration tests: a real result table on each engine, a way to read a row,
and a way to run a job as a process of its own."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tallyboard as tb

# The Transformers test builds its model from a config: nothing may be fetched from the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def results_of(table):
    """``results_of(run_id)``: the run's row of the result table as {column id: value}."""

    def read(run_id):
        names = table.get_results(run_id)
        [row] = names.data
        return dict(zip(names.col_ids, row, strict=True))

    return read


@pytest.fixture
def table(db_url):
    """A fresh result table on each engine (SQLite file, PostgreSQL schema): adapters are tested on both."""
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    yield table
    table.close()


@pytest.fixture
def run_job():
    """``run_job(script, *args, env=...)``: run a test job as a process of its own; its stdout lines."""

    def run(script, *args, env=None, check=True):
        done = subprocess.run(
            [sys.executable, str(Path(__file__).with_name(script)), *map(str, args)],
            env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{script} exited with {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
            )
        return done

    return run

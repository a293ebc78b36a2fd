"""The spool (store/spool.py) against a PostgreSQL server of the test's own (tests/own_postgres.py)
that is stopped while runs log, and a writer killed with SIGKILL while it is down: training goes on,
a warning says how far behind shipping is, and once the server is back every row is there once.

More processes, and the memory of a 60 s outage, are in bench/cluster.py.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import tallyboard as tb
from own_postgres import own_server
from tallyboard.cli import main
from tallyboard.store import open_store
from tallyboard.store.spool import SpoolStore


@pytest.fixture
def shipper_log(caplog):
    caplog.set_level(logging.WARNING, logger="tallyboard.store.spool_shipper")
    return caplog


pytestmark = pytest.mark.usefixtures("shippers_end_with_the_test")  # tests/conftest.py


def same_rows(url: str, run_id: int, spool: str, spool_run: int) -> tuple[int, int]:
    """(scalars, texts) of the run in the database, after checking they are the spool's exactly."""
    db, local = open_store(url), SpoolStore(spool)
    try:
        scalars, texts = db.scalars(run_id, "train/loss"), db.texts(run_id)
        assert scalars == local.scalars(spool_run, "train/loss")
        assert [row[-1] for row in texts] == [row[-1] for row in local.texts(spool_run)]
        assert len({row[1] for row in scalars}) == len(scalars)  # no step twice
        return len(scalars), len(texts)
    finally:
        db.close()
        local.close()


@pytest.mark.parametrize("seconds", [5, 60])
def test_an_outage_while_logging_through_a_spool_ships_every_row_once(tmp_path, shipper_log, seconds):
    spool = str(tmp_path / "spool.db")
    with own_server() as server:
        table = tb.ResultTable(server.url, spool=spool, nocommit_action=tb.NoCommitAction.NOP)
        run = table.new_run("outage", auto_log_plt=False)
        steps, stop = [0], threading.Event()

        def train() -> None:
            while not stop.is_set():
                run.add_scalar("train/loss", float(steps[0]), step=steps[0])
                if steps[0] % 500 == 0:
                    run.add_text(f"text {steps[0]}", step=steps[0])
                steps[0] += 1
                if steps[0] % 20 == 0:  # a training step's pace, not a tight loop's
                    time.sleep(0.001)

        trainer = threading.Thread(target=train, daemon=True)
        trainer.start()
        time.sleep(1)
        server.stop()
        down_at = steps[0]
        time.sleep(seconds)
        assert steps[0] > down_at  # training went on
        run.flush()  # durable in the spool while the database is down: no NotDurableError
        server.start()
        stop.set()
        trainer.join(timeout=30)
        run.close()
        assert table.ship(timeout=60)
        run_id = table.database_run_id(run.run_id)
        assert same_rows(server.url, run_id, spool, run.run_id) == (steps[0], len(range(0, steps[0], 500)))
        with open_store(server.url) as store:
            assert store.run(run_id).status == "finished"
    warnings = [r.getMessage() for r in shipper_log.records]
    assert any("could not ship" in w and "entries wait in the spool" in w for w in warnings), warnings
    assert any("ships to" in w and "again" in w for w in warnings)


def test_a_run_started_while_the_database_is_down_gets_its_id_when_it_returns(tmp_path):
    spool = str(tmp_path / "spool.db")
    with own_server() as server:
        with tb.ResultTable(server.url, nocommit_action=tb.NoCommitAction.NOP) as table:
            table.new_run("earlier").close()
        server.stop()
        table = tb.ResultTable(server.url, spool=spool, nocommit_action=tb.NoCommitAction.NOP)
        run = table.new_run("offline", auto_log_plt=False)
        for step in range(1000):
            run.add_scalar("train/loss", step / 10)
        run.close()
        assert table.database_run_id(run.run_id) is None
        assert not table.ship(timeout=1)  # the database is down: not shipped, nothing raised
        server.start()
        assert table.ship(timeout=60)
        assert table.database_run_id(run.run_id) == 2
        assert same_rows(server.url, 2, spool, run.run_id) == (1000, 0)


WRITER = """
import sys, time, tallyboard as tb
table = tb.ResultTable(sys.argv[1], spool=sys.argv[2], nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run("killed", auto_log_plt=False)
step = 0
while True:
    run.add_scalar("train/loss", float(step))
    if step % 1000 == 0:
        run.add_text(f"text {step}")
    step += 1
    if step == 5000:
        run.flush()
        print("flushed", flush=True)
"""


def test_a_writer_killed_while_the_database_is_down_is_shipped_by_tallyboard_sync(tmp_path):
    spool = str(tmp_path / "spool.db")
    with own_server() as server:
        with tb.ResultTable(server.url, nocommit_action=tb.NoCommitAction.NOP) as table:
            table.new_debug_run("schema").close()
        server.stop()
        command = [sys.executable, "-c", WRITER, server.url, spool]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as writer:  # closes its pipe
            assert writer.stdout.readline() == "flushed\n"
            time.sleep(0.5)
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(timeout=30)
        server.start()
        assert main(["sync", spool]) == 0
        db = open_store(server.url)
        run_id = next(row.run_id for row in db.runs() if row.experiment == "killed")
        db.close()
        scalars, texts = same_rows(server.url, run_id, spool, 1)
        assert scalars >= 5000 and texts >= 5  # at least what was flushed, each once
        assert main(["sync", spool]) == 0  # again: nothing left, nothing doubled
        assert same_rows(server.url, run_id, spool, 1) == (scalars, texts)

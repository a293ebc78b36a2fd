"""Logging to a tallyboard server (store/http_shipping.py, dashboard/ingest.py) through faults, all
on real processes: the server stopped for 5 s and for 60 s mid-run, SIGKILLed while batches
arrive and restarted, its PostgreSQL stopped, the client SIGKILLed and restarted on its spool,
the network cut by a proxy the test controls, and answers lost after the server committed. Each
time every row the client committed to its spool is in the server's table exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import tallyboard as tb
from own_postgres import own_server as own_postgres
from remote_server import WRITE_TOKEN, Proxy, own_server
from tallyboard.store import open_store
from tallyboard.store.http_shipping import UPLOAD_CHUNK
from tallyboard.store.spool import SpoolStore

pytestmark = pytest.mark.usefixtures("shippers_end_with_the_test")  # tests/conftest.py

CLIENT = """
import sys, time, tallyboard as tb
url, spool, name, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
table = tb.ResultTable(url, spool=spool, nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run("faults", comment=name, auto_log_plt=False)
for step in range(steps):
    run.add_scalar("train/loss", float(step), step=step)
    if step % 500 == 0:
        run.add_text(f"text {step}", step=step)
        print("step", step, flush=True)
    if step % 20 == 0:  # a training step's pace, not a tight loop's
        time.sleep(0.002)
run.close()
print("logged", flush=True)
if sys.argv[5] == "when told":  # the test says when: a ship() asks the shipper to try at once
    sys.stdin.readline()
print("shipped", table.ship(timeout=60), flush=True)
"""


@pytest.fixture
def client():
    """Start client processes (url, spool, run name, steps); each is ended with the test."""
    started: list[subprocess.Popen[str]] = []

    def start(url: str, spool: str, name: str, steps: int, ship: str = "at once") -> subprocess.Popen[str]:
        command = [sys.executable, "-c", CLIENT, url, spool, name, str(steps), ship]
        env = {**os.environ, "TALLYBOARD_TOKEN": WRITE_TOKEN}
        started.append(
            subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        )
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        for pipe in (process.stdin, process.stdout):
            assert pipe is not None
            pipe.close()


def wait_for(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdout is not None
    for seen in process.stdout:
        if seen.strip() == line:
            return
    raise AssertionError(f"the client ended (status {process.wait()}) before printing {line!r}")


def finish(process: subprocess.Popen[str]) -> None:
    wait_for(process, "shipped True")
    assert process.wait(timeout=60) == 0


def every_row_once(served: str, spool: str, name: str) -> int:
    """The scalars and texts of the run `name` of the spool, in the server's table exactly as the
    spool holds them (no row missing, none twice); returns the number of scalars."""
    local = SpoolStore(spool)
    try:
        (spool_run,) = [run.run_id for run in local.runs() if run.comment == name]
        run_id = local.database_run_id(spool_run)
        assert run_id is not None, f"run {name} never reached the server"
        with open_store(served) as db:
            scalars = db.scalars(run_id, "train/loss")
            assert scalars == local.scalars(spool_run, "train/loss")
            assert [row[-1] for row in db.texts(run_id)] == [row[-1] for row in local.texts(spool_run)]
            assert len({row[1] for row in scalars}) == len(scalars)  # no step twice
            assert len([run for run in db.runs() if run.comment == name]) == 1  # started once
            return len(scalars)
    finally:
        local.close()


@pytest.mark.parametrize("seconds", [5, 60])
def test_the_server_stopped_mid_run_gets_every_row_once_when_it_returns(tmp_path, client, seconds):
    served, spool = str(tmp_path / "served.db"), str(tmp_path / "spool.db")
    with own_server(served) as server:
        writer = client(server.url, spool, "stopped", 30_000, ship="when told")
        wait_for(writer, "step 1000")
        server.stop()
        wait_for(writer, "logged")  # training went on while the server was away
        time.sleep(seconds)
        server.start()
        assert writer.stdin is not None
        writer.stdin.write("ship\n")
        writer.stdin.flush()
        finish(writer)
        assert every_row_once(served, spool, "stopped") == 30_000
        with open_store(served) as db:
            assert [run.status for run in db.runs()] == ["finished"]


def test_the_server_killed_while_batches_arrive_loses_and_doubles_nothing(tmp_path, client):
    served, spool = str(tmp_path / "served.db"), str(tmp_path / "spool.db")
    with own_server(served) as server:
        writer = client(server.url, spool, "killed server", 40_000)
        for at in ("step 2000", "step 10000"):  # twice, while the shipper posts batch after batch
            wait_for(writer, at)
            server.kill()
            time.sleep(0.5)
            server.start()
        finish(writer)
        assert every_row_once(served, spool, "killed server") == 40_000


def test_a_client_killed_and_restarted_on_its_spool_ships_what_the_killed_one_logged(tmp_path, client):
    served, spool = str(tmp_path / "served.db"), str(tmp_path / "spool.db")
    with own_server(served) as server:
        proxy = Proxy(server.port)
        try:
            proxy.cut()  # the killed client's rows wait in its spool
            first = client(proxy.url, spool, "killed client", 1_000_000)
            wait_for(first, "step 5000")
            time.sleep(0.5)  # the sink commits what was logged (its window is 0.25 s)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            proxy.restore()
            second = client(proxy.url, spool, "restarted", 2_000)
            finish(second)
        finally:
            proxy.close()
        assert every_row_once(served, spool, "killed client") >= 5_000
        assert every_row_once(served, spool, "restarted") == 2_000


@pytest.mark.parametrize("mode", ["cut", "swallow"])
def test_a_network_cut_mid_run_ships_every_row_once(tmp_path, client, mode):
    """cut: no connection gets through for 3 s; swallow: requests reach the server, which applies
    them, but no answer comes back: the client sends them again and the server skips them."""
    served, spool = str(tmp_path / "served.db"), str(tmp_path / "spool.db")
    with own_server(served) as server:
        proxy = Proxy(server.port)
        try:
            writer = client(proxy.url, spool, mode, 30_000)
            wait_for(writer, "step 1000")
            proxy.cut(mode)
            time.sleep(3)
            proxy.restore()
            finish(writer)
        finally:
            proxy.close()
        if mode == "swallow":
            assert proxy.swallowed > 0  # the server did answer, and was not heard
        assert every_row_once(served, spool, mode) == 30_000


def test_the_servers_postgresql_stopped_mid_run_gets_every_row_once(tmp_path, client):
    spool = str(tmp_path / "spool.db")
    with own_postgres() as database, own_server(database.url) as server:
        writer = client(server.url, spool, "database stopped", 30_000, ship="when told")
        wait_for(writer, "step 1000")
        database.stop()  # the server answers 503 meanwhile; the client keeps its spool
        wait_for(writer, "logged")
        time.sleep(5)
        database.start()
        assert writer.stdin is not None
        writer.stdin.write("ship\n")
        writer.stdin.flush()
        finish(writer)
        assert every_row_once(database.url, spool, "database stopped") == 30_000


def test_the_server_killed_mid_upload_gets_the_artefact_whole_and_once(tmp_path):
    served, spool = str(tmp_path / "served.db"), tmp_path / "spool.db"
    checkpoint = tmp_path / "model.ckpt"
    checkpoint.write_bytes(os.urandom(3 * UPLOAD_CHUNK + 7))  # four chunks
    with own_server(served) as server:
        proxy = Proxy(server.port)
        proxy.max_puts = 1  # the first chunk reaches the server; the others are refused
        try:
            table = tb.ResultTable(
                proxy.url, token=WRITE_TOKEN, spool=spool, nocommit_action=tb.NoCommitAction.NOP
            )
            run = table.new_run("upload", auto_log_plt=False)
            run.log_artifact(checkpoint, kind="model")
            run.close()
            table.ship(timeout=0)  # ask the shipper to go now
            assert proxy.put_refused.wait(timeout=120)
            staged = tmp_path / "served.artifacts" / "uploads"
            assert [part.stat().st_size for part in staged.iterdir()] == [UPLOAD_CHUNK]
            server.kill()  # mid-upload: one chunk of four held
            server.start()
            proxy.max_puts = 100  # let the rest through (and count them)
            assert table.ship(timeout=120)
        finally:
            proxy.close()
        assert proxy.puts == 4  # each chunk sent once: the restarted server said where to go on
        assert not list(staged.iterdir())
    with tb.ResultTable(served, read_only=True) as read:
        (row,) = read.list_artifacts(table.database_run_id(run.run_id))
        read.save_artifact(row.run_id, "model.ckpt", tmp_path / "saved.ckpt")
    assert (tmp_path / "saved.ckpt").read_bytes() == checkpoint.read_bytes()

"""`ResultTable.resume_run` through a spool (store/run_claims.py): a run of a tallyboard server
(on each engine) or of a PostgreSQL spool's database, reopened at once by the server's id from
another node's spool, continues where it stopped; tokens, a run another spool writes and a server
out of reach are refused with errors that say so. The server is a real process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

import tallyboard as tb
from remote_server import READ_TOKEN, WRITE_TOKEN, ServerProcess, own_server
from tallyboard.errors import NotFoundError, StoreError

NOP = tb.NoCommitAction.NOP
pytestmark = pytest.mark.usefixtures("shippers_end_with_the_test")  # tests/conftest.py


def logged(
    url: str, spool, token: str | None = WRITE_TOKEN, close: bool = True
) -> tuple[tb.ResultTable, int]:
    """A run of 100 auto steps logged from a node's spool and shipped; (the table, the server's id)."""
    table = tb.ResultTable(url, token=token, spool=spool, nocommit_action=NOP)
    run = table.new_run("resumed", comment="first launch", auto_log_plt=False)
    for step in range(100):
        run.add_scalar("train/loss", float(step))
    if close:
        run.close()
    else:
        run.flush()
    assert table.ship(timeout=60)
    server_id = table.database_run_id(run.run_id)
    assert server_id is not None
    return table, server_id


def continued(table: tb.ResultTable, server_id: int) -> None:
    run = table.resume_run(server_id, auto_log_plt=False)
    for step in range(100):
        run.add_scalar("train/loss", float(100 + step))  # auto steps go on from 100
    run.close()
    assert table.ship(timeout=60)
    assert table.database_run_id(run.run_id) == server_id


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_run_resumed_through_the_server_from_another_node_goes_on_where_it_stopped(
    tmp_path, engine, request
):
    served = str(tmp_path / "served.db") if engine == "sqlite" else request.getfixturevalue("pg_url")
    with own_server(served) as server:
        _, server_id = logged(server.url, tmp_path / "node-a.db")
        other_node = tb.ResultTable(
            server.url, token=WRITE_TOKEN, spool=tmp_path / "node-b.db", nocommit_action=NOP
        )
        continued(other_node, server_id)
    with tb.ResultTable(served, read_only=True) as table:
        assert len(table.runs) == 1
        run = table.load_run(server_id)
        assert [(p.step, p.value) for p in run.get_scalar("train/loss")] == [
            (s, float(s)) for s in range(200)
        ]
        assert run.status == "finished"


def test_a_run_of_a_postgresql_spool_is_resumed_from_another_spool(tmp_path, pg_url):
    _, server_id = logged(pg_url, tmp_path / "node-a.db")
    continued(tb.ResultTable(pg_url, spool=tmp_path / "node-b.db", nocommit_action=NOP), server_id)
    with tb.ResultTable(pg_url, read_only=True) as table:
        assert len(table.load_run(server_id).get_scalar("train/loss")) == 200


def test_a_run_another_spool_is_writing_is_refused_and_an_unknown_run_is_not_found(tmp_path):
    with own_server(str(tmp_path / "served.db")) as server:
        _, server_id = logged(server.url, tmp_path / "node-a.db", close=False)  # still running there
        other_node = tb.ResultTable(
            server.url, token=WRITE_TOKEN, spool=tmp_path / "node-b.db", nocommit_action=NOP
        )
        with pytest.raises(StoreError, match="being written by another process"):
            other_node.resume_run(server_id)
        with pytest.raises(NotFoundError, match="no run with id 99"):
            other_node.resume_run(99)


def reopen(url: str, token: str | None) -> int:
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    body = json.dumps({"run": 1}).encode()
    request = urllib.request.Request(f"{url}/api/ingest/v1/spools/spool-of-the-test/reopen", body, headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_reopening_needs_a_write_token(tmp_path):
    with own_server(str(tmp_path / "served.db"), "--token", READ_TOKEN) as server:
        logged(server.url, tmp_path / "node-a.db")
        assert reopen(server.url, None) == 401
        assert reopen(server.url, READ_TOKEN) == 403
        reader = tb.ResultTable(
            server.url, token=READ_TOKEN, spool=tmp_path / "node-b.db", nocommit_action=NOP
        )
        with pytest.raises(StoreError, match="403"):
            reader.resume_run(1)
        assert reopen(server.url, WRITE_TOKEN) == 200


def test_a_resume_while_the_server_is_down_fails_at_once_saying_so(tmp_path):
    server = ServerProcess(str(tmp_path / "served.db"))  # its address is known; it is not started
    table = tb.ResultTable(server.url, token=WRITE_TOKEN, spool=tmp_path / "spool.db", nocommit_action=NOP)
    with pytest.raises(StoreError, match="cannot reach the tallyboard server"):
        table.resume_run(1)


def test_the_wandb_skin_resumes_its_run_through_the_server_by_its_id(tmp_path):
    script = (
        "import sys, tallyboard.wandb as wandb\n"
        "run = wandb.init(project='skin', id='abc', resume='allow')\n"
        "for _ in range(50): wandb.log({'loss': 0.5})\n"
        "wandb.finish()\n"
    )
    with own_server(str(tmp_path / "served.db")) as server:
        env = {
            **os.environ, "TALLYBOARD_URL": server.url, "TALLYBOARD_TOKEN": WRITE_TOKEN,
            "TALLYBOARD_SPOOL": str(tmp_path / "skin-spool.db"),
            "PYTHONPATH": os.path.dirname(os.path.dirname(tb.__file__)),  # this tree's tallyboard
        }  # fmt: skip
        for _ in range(2):  # the second launch finds its run in the spool, and resumes the server's
            subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120, cwd=tmp_path)
    with tb.ResultTable(str(tmp_path / "served.db"), read_only=True) as table:
        assert table.runs == [1]
        assert [p.step for p in table.load_run(1).get_scalar("loss")] == list(range(100))

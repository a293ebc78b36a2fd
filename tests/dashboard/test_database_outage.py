"""The dashboard of a PostgreSQL table whose server stops or restarts (a server of the test's own,
tests/own_postgres.py): a clear 503 while it is down, the page back as soon as it is, no restart of
the dashboard, and no password in anything said about it."""

import pytest
from starlette.testclient import TestClient

import tallyboard as tb
from own_postgres import own_server
from tallyboard.dashboard.app import create_app
from tallyboard.errors import NotDurableError

PASSWORD = "hunter2"


def with_password(url: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{PASSWORD}@")


def logged_run(url: str) -> int:
    table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("outage", auto_log_plt=False) as run:
        for step in range(10):
            run.add_scalar("train/loss", 1 / (step + 1), step)
    table.close()
    return run.run_id


@pytest.mark.parametrize("read_only", [False, True])
def test_a_restart_goes_unnoticed_and_a_stop_is_a_503_until_the_server_is_back(read_only):
    with own_server() as server:
        url = with_password(server.url)
        run_id = logged_run(url)
        app = create_app(url, read_only=read_only)
        with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
            assert client.get("/api/runs").json()["total"] == 1  # the pool now holds a connection
            server.stop()
            server.start()  # what the pool holds died with the old server: it is replaced unseen
            assert client.get(f"/api/runs/{run_id}").json()["experiment"] == "outage"

            server.stop()
            down = [client.get("/api/runs"), client.get(f"/api/runs/{run_id}")]
            server.start()
            back = client.get("/api/runs")
    for answer in down:
        assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
        error = answer.json()["error"]
        assert "does not answer" in error and "ask again once it is back" in error
        assert PASSWORD not in answer.text and "postgres:***@" in answer.text
    assert back.status_code == 200 and back.json()["rows"][0]["run_id"] == run_id


def test_the_logging_path_names_the_database_without_its_password():
    with own_server() as server:
        table = tb.ResultTable(with_password(server.url), nocommit_action=tb.NoCommitAction.NOP)
        run = table.new_run("outage", auto_log_plt=False)
        run.add_scalar("train/loss", 1.0, 0, flush=True)
        server.stop()
        run.add_scalar("train/loss", 2.0, 1)
        with pytest.raises(NotDurableError) as refused:
            run.flush()
        server.start()
        run.close()
        table.close()
    assert "could not write to postgresql://postgres:***@127.0.0.1" in str(refused.value)
    assert PASSWORD not in str(refused.value)

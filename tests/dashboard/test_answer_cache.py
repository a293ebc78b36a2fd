"""The dashboard's kept answers (dashboard/answer_cache.py): the same bytes while the table is
unchanged, a new answer once anything committed (another process's points, the dashboard's own
edits, on SQLite and PostgreSQL), bounded memory, and nothing kept that should not be."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.testclient import TestClient

import tallyboard as tb
from dashboard.sample_table import csrf_of
from tallyboard.dashboard import create_app
from tallyboard.dashboard.answer_cache import MAX_ANSWER, AnswerCache
from tallyboard.store import open_queries

NOP = tb.NoCommitAction.NOP


def request_for(path: str, query: str = "") -> Request:
    return Request(
        {"type": "http", "method": "GET", "path": path, "query_string": query.encode(), "headers": []}
    )


class Maker:
    """A handler that counts its calls and answers `body` with `status`."""

    def __init__(self, body: bytes = b'{"a":1}', status: int = 200) -> None:
        self.calls, self.body, self.status = 0, body, status

    def __call__(self, request: Request) -> Response:
        self.calls += 1
        return Response(self.body, status_code=self.status, media_type="application/json")


def test_an_answer_is_kept_until_the_version_changes():
    version = ["1"]
    cache, make = AnswerCache(lambda: version[0]), Maker()
    first = cache.answer(request_for("/api/series", "runs=1"), make)
    again = cache.answer(request_for("/api/series", "runs=1"), make)
    assert make.calls == 1 and again.body == first.body == make.body
    assert dict(again.headers) == dict(first.headers)  # content-type and length as made
    cache.answer(request_for("/api/series", "runs=2"), make)  # another query: another answer
    assert make.calls == 2
    version[0] = "2"
    cache.answer(request_for("/api/series", "runs=1"), make)
    assert make.calls == 3


def test_refusals_and_large_answers_are_not_kept():
    cache = AnswerCache(lambda: "1")
    refused = Maker(b'{"error":"no"}', status=400)
    for _ in range(2):
        assert cache.answer(request_for("/api/series"), refused).status_code == 400
    large = Maker(b" " * (MAX_ANSWER + 1))
    for _ in range(2):
        cache.answer(request_for("/api/runs"), large)
    assert refused.calls == 2 and large.calls == 2


def test_the_least_recently_used_go_first_past_the_bound():
    cache, make = AnswerCache(lambda: "1", max_bytes=250), Maker(b"x" * 100)
    for query in ("a", "b", "a", "c"):  # c needs room: b, the least recently used, goes
        cache.answer(request_for("/api/runs", query), make)
    assert make.calls == 3
    cache.answer(request_for("/api/runs", "a"), make)
    assert make.calls == 3
    cache.answer(request_for("/api/runs", "b"), make)
    assert make.calls == 4


@pytest.fixture
def logged(db_url) -> Iterator[tb.LogWriter]:
    """A run of 3,000 points of train/loss, left open to log more."""
    table = tb.ResultTable(db_url, nocommit_action=NOP)
    run = table.new_run("kept", auto_log_plt=False)
    log(run, range(3_000))
    yield run
    run.close()
    table.close()


def log(run: tb.LogWriter, steps: range) -> None:
    for step in steps:
        run.add_scalar("train/loss", float(step), step=step)
    run.flush()


@pytest.fixture
def served(db_url, logged) -> Iterator[tuple[TestClient, tb.LogWriter]]:
    with TestClient(create_app(db_url), base_url="http://127.0.0.1") as client:
        yield client, logged


def last_step(client: TestClient) -> int:
    answer = client.get("/api/series", params={"runs": "1", "metric": "loss", "width": 100})
    assert answer.status_code == 200
    return answer.json()["series"][0]["last_step"]


def test_points_logged_by_another_writer_are_in_the_next_answer(served):
    client, run = served
    assert last_step(client) == last_step(client) == 2_999
    log(run, range(3_000, 3_500))
    assert last_step(client) == 3_499


def test_an_edit_through_the_dashboard_is_in_the_next_page_of_runs(served):
    client, _ = served
    csrf = csrf_of(client.get("/").text)  # the page holds the CSRF secret its script sends
    before = client.get("/api/runs").json()["rows"]
    assert [row["note"] for row in before if row["run_id"] == 1] != ["kept?"]
    edited = client.post("/api/runs/1", json={"note": "kept?"}, headers={"X-CSRF-Token": csrf})
    assert edited.status_code == 200
    after = client.get("/api/runs").json()["rows"]
    assert [row["note"] for row in after if row["run_id"] == 1] == ["kept?"]


def test_a_kept_answer_is_compressed_again_each_time_it_is_sent(served):
    client, _ = served
    bodies = []
    for _ in range(3):
        sent = client.get("/api/runs", headers={"Accept-Encoding": "gzip"})
        assert sent.headers["content-encoding"] == "gzip"
        bodies.append(json.loads(sent.content))  # httpx decodes it: a valid stream each time
    assert bodies[0] == bodies[1] == bodies[2]
    raw = client.get("/api/runs", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in raw.headers and json.loads(raw.content) == bodies[0]
    assert int(raw.headers["content-length"]) == len(raw.content)


def test_the_version_moves_with_every_commit_and_only_then(db_url, logged):
    queries = open_queries(db_url)
    try:
        before = queries.data_version()
        if not db_url.startswith("postgresql"):  # a server's snapshot also moves with other databases' work
            assert queries.data_version() == before
        log(logged, range(3_000, 3_010))
        assert queries.data_version() != before
    finally:
        queries.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_version_that_cannot_be_read_keeps_nothing(db_url, logged):
    """The connection that asks SQLite's data_version dies: that request's version matches no
    other (its answer is made, never served again), and the next one asks on a new connection."""
    queries = open_queries(db_url)
    try:
        before = queries.data_version()
        queries._versions.close()  # what a connection lost under the server looks like
        lost = queries.data_version()
        after = queries.data_version()
        assert lost.startswith("unknown:") and len({before, lost, after}) == 3
        assert after == queries.data_version()  # asked on the new connection, nothing committed
    finally:
        queries.close()

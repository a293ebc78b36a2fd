"""The write endpoints (dashboard/ingest.py) in process: tokens, exactly once, and hostile clients.

Entries are made by a real spool (store/spool.py), so what is posted is what a client ships; the
hostile ones are those entries bent in every way a client of our own never bends them. After each
refusal the server still answers, and nothing was written outside the client's own runs.
"""

from __future__ import annotations

import copy
import gzip
import json
import threading
import time

import pytest
from starlette.testclient import TestClient

from tallyboard.dashboard import create_app
from tallyboard.dashboard import ingest as ingest_module
from tallyboard.store import open_store
from tallyboard.store.http_shipping import entries_document
from tallyboard.store.location import Location
from tallyboard.store.records import Batch, QueuedMedia, QueuedText, QueuedValue, RunUpdate
from tallyboard.store.spool import SpoolStore

WRITE, READ = "w-token", "r-token"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@pytest.fixture
def server(tmp_path):
    app = create_app(str(tmp_path / "served.db"), token=READ, write_tokens=[WRITE])
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client


def spool_entries(tmp_path, name: str = "spool.db") -> tuple[str, list[list]]:
    """A spool's id and its journal as the wire carries it (decoded JSON), after one run logged."""
    spool = SpoolStore(str(tmp_path / name), target=Location("http://tracker:8765"))
    run = spool.create_run({"experiment": "remote", "start_time": time.time(), "status": "running"})
    batch = Batch()
    batch.scalars = [(run, "train/loss", [(0, step, None, 0.5, step / 2) for step in range(100)])]
    batch.media = [QueuedMedia(run, "img", 0, 0, None, 0.5, "image", 1, 1, PNG)]
    batch.texts = [QueuedText(run, "note", 0, 0, None, 0.5, "text", "hello")]
    batch.hparams = [QueuedValue(run, "lr", "0.1")]
    batch.run_updates = [RunUpdate(run, {"status": "finished", "end_time": time.time()})]
    spool.write_batch(batch)
    spool_id = spool.state("spool_id")
    entries = spool.pending(0, 100, 2**30)
    spool.close()
    return spool_id, json.loads(entries_document(entries), object_hook=None)["entries"]


def post(client, spool_id: str, entries, token: str | None = WRITE, raw: bytes | None = None):
    body = raw if raw is not None else gzip.compress(json.dumps({"entries": entries}).encode())
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(f"/api/ingest/v1/spools/{spool_id}/entries", content=body, headers=headers)


def test_a_spool_ships_once_however_often_it_is_posted(server, tmp_path):
    spool_id, entries = spool_entries(tmp_path)
    first = post(server, spool_id, entries)
    assert first.status_code == 200, first.text
    assert first.json()["shipped"] == entries[-1][0]
    assert first.json()["runs"] == [[1, 1, None]]
    again = post(server, spool_id, entries)  # the answer was lost: the client sends it all again
    assert again.status_code == 200 and again.json()["shipped"] == entries[-1][0]
    state = server.get(f"/api/ingest/v1/spools/{spool_id}", headers={"Authorization": f"Bearer {WRITE}"})
    assert state.json() == {"spool": spool_id, "shipped": entries[-1][0], "runs": [[1, 1, None]]}
    with open_store(str(tmp_path / "served.db")) as store:
        assert len(store.scalars(1, "train/loss")) == 100
        assert store.run(1).status == "finished"
        assert [row.content for row in store.texts(1)] == ["hello"]


def test_writes_need_a_write_token(server, tmp_path):
    spool_id, entries = spool_entries(tmp_path)
    assert post(server, spool_id, entries, token=None).status_code == 401
    assert post(server, spool_id, entries, token="guess").status_code == 401
    refused = post(server, spool_id, entries, token=READ)
    assert refused.status_code == 403 and "read, not write" in refused.json()["error"]
    assert server.get("/api/ingest/v1").status_code == 401
    assert server.get("/api/ingest/v1", headers={"Authorization": f"Bearer {WRITE}"}).json()["version"] == 1


def bent(entries, path, value):
    """`entries` with the item at `path` (indexes and keys) replaced by `value`."""
    changed = copy.deepcopy(entries)
    item = changed
    for key in path[:-1]:
        item = item[key]
    item[path[-1]] = value
    return changed


HOSTILE = {
    "an unknown operation": ([0, 2], "drop_table"),
    "a seq that does not increase": ([1, 0], 1),
    "a bool as a run id": ([0, 3, "run"], True),
    "a run id of the server": ([0, 3, "fields", "run_id"], 7),
    "a column no client sets": ([0, 3, "fields", "updated_at"], 1.0),
    "an experiment that is not text": ([0, 3, "fields", "experiment"], 5),
    "a NUL in the experiment": ([0, 3, "fields", "experiment"], "a\x00b"),
    "an infinite start time": ([0, 3, "fields", "start_time"], 1e308 * 10),
    "a list that is no Batch list": ([1, 3, "runs"], []),
    "SQL as an edited column": ([1, 3, "run_updates", 0, 1], {"status = 'x', hidden": 1}),
    "a column no edit may touch": ([1, 3, "run_updates", 0, 1], {"experiment": "other"}),
    "bytes that are no PNG": ([1, 3, "media", 0, 9], {"$bytes": "aGVsbG8="}),
    "an image kind we never write": ([1, 3, "media", 0, 6], "executable"),
    "a text as bytes": ([1, 3, "texts", 0, 7], {"$bytes": "aGVsbG8="}),
    "a record with a field too many": ([1, 3, "texts", 0], [1, "t", 0, 0, None, 0.5, "text", "x", 0, 9]),
    "an hparam value that is not JSON": ([1, 3, "hparams", 0, 2], "{not json"),
    "an empty tag": ([1, 3, "scalars", 0, 1], ""),
    "a series with a short column": ([1, 3, "scalars", 0, 3], [0]),
    "a step beyond 64 bits": ([1, 3, "scalars", 0, 3], [2**70] * 100),
    "bad base64": ([1, 3, "media", 0, 9], {"$bytes": 5}),
}


@pytest.mark.parametrize("what", HOSTILE)
def test_a_hostile_entry_is_a_400_and_nothing_is_written(server, tmp_path, what):
    spool_id, entries = spool_entries(tmp_path)
    path, value = HOSTILE[what]
    refused = post(server, spool_id, bent(entries, path, value))
    assert refused.status_code == 400, refused.text
    assert "error" in refused.json()
    with open_store(str(tmp_path / "served.db")) as store:
        assert store.runs() == []
    assert post(server, spool_id, entries).status_code == 200  # the server goes on, the spool ships


def test_a_client_reaches_no_run_it_did_not_start(server, tmp_path):
    mine, entries = spool_entries(tmp_path, "mine.db")
    assert post(server, mine, entries).status_code == 200
    theirs, other = spool_entries(tmp_path, "theirs.db")
    # their batch (seq 2), alone: it names run 1 of *their* spool, which never started here
    refused = post(server, theirs, other[1:])
    assert refused.status_code == 409 and "never shipped" in refused.json()["error"]
    with open_store(str(tmp_path / "served.db")) as store:
        assert len(store.scalars(1, "train/loss")) == 100  # mine, once
        assert [run.run_id for run in store.runs()] == [1]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"not gzip at all", 400),
        (gzip.compress(b"[1, 2"), 400),
        (gzip.compress(b"[" * 100_000 + b"]" * 100_000), 400),  # nested past any parser's depth
        (gzip.compress(b" " * (ingest_module.MAX_DECOMPRESSED + 1)), 413),  # a gzip bomb
        (gzip.compress(json.dumps({"entries": []}).encode()), 400),
    ],
    ids=["not-gzip", "not-json", "nested", "bomb", "no-entries"],
)
def test_a_body_no_client_sends_is_refused(server, body, status):
    assert post(server, "a" * 36, None, raw=body).status_code == status


def test_a_spool_id_must_be_a_plain_name(server, tmp_path):
    _, entries = spool_entries(tmp_path)
    assert post(server, "..%2F..", entries).status_code in (400, 404)
    assert post(server, "short", entries).status_code == 400


def test_requests_of_one_spool_are_limited_in_rate(server, tmp_path, monkeypatch):
    spool_id, entries = spool_entries(tmp_path)
    monkeypatch.setattr(ingest_module.RateLimit, "take", lambda self, key, now: 2.5)
    limited = post(server, spool_id, entries)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"


def test_the_token_bucket_allows_a_burst_then_the_rate():
    limit = ingest_module.RateLimit(rate=10, burst=3)
    assert [limit.take("s", 0.0) for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.1)]
    assert limit.take("s", 0.1) == 0.0  # a token came back
    assert limit.take("other", 0.1) == 0.0  # spools have buckets of their own


def test_the_dashboard_beside_the_ingest_still_needs_its_token(server):
    assert server.get("/api/runs").status_code == 401
    assert server.get("/api/runs", headers={"Authorization": f"Bearer {READ}"}).status_code == 200


def test_shipments_that_wait_are_applied_together_and_a_refused_one_refuses_no_other(server, tmp_path):
    ingest = server.app.state.ingest
    shipments = [spool_entries(tmp_path, f"spool-{index}.db") for index in range(3)]
    shipments.append((shipments[2][0], shipments[2][1][1:]))  # spool 2's batch without its start...
    shipments[2] = spool_entries(tmp_path, "spool-other.db")  # ...and that spool never started a run
    answers: dict[int, int] = {}

    def send(index: int) -> None:
        spool_id, entries = shipments[index]
        answers[index] = post(server, spool_id, entries).status_code

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(shipments))]
    with ingest._writing:  # the writer is busy: all four wait, and are then applied as one group
        for thread in threads:
            thread.start()
        while len(ingest._queue) < len(shipments):
            time.sleep(0.01)
    for thread in threads:
        thread.join()
    assert answers == {0: 200, 1: 200, 2: 200, 3: 409}
    with open_store(str(tmp_path / "served.db")) as store:
        assert [len(store.scalars(run.run_id, "train/loss")) for run in store.runs()] == [100, 100, 100]

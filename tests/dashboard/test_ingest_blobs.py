"""Artefact bytes uploaded to `serve --accept-writes` (store/received_blobs.py behind
dashboard/ingest.py), in process on a real SQLite table and artefact folder: resumable and
idempotent chunks, and every hostile upload refused with nothing stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import random

import pytest
from starlette.testclient import TestClient

from tallyboard.dashboard import create_app
from tallyboard.store.artifacts import LocalBlobs

WRITE, READ = "w-token", "r-token"
DATA = random.Random(3000).randbytes(3000)  # the same in every test worker: it names parametrised tests
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def server(tmp_path):
    app = create_app(str(tmp_path / "served.db"), token=READ, write_tokens=[WRITE])
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
def stored(tmp_path) -> LocalBlobs:
    return LocalBlobs(tmp_path / "served.artifacts")


def put(client, sha: str, offset: int, total: int, chunk: bytes, token: str | None = WRITE):
    headers = {"Content-Type": "application/octet-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return client.put(
        f"/api/ingest/v1/blobs/{sha}?offset={offset}&total={total}", content=chunk, headers=headers
    )


def state(client, sha: str) -> dict:
    answer = client.get(f"/api/ingest/v1/blobs/{sha}", headers={"Authorization": f"Bearer {WRITE}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_chunks_retried_or_overlapping_arrive_once_and_the_file_is_stored_under_its_hash(server, stored):
    assert state(server, SHA) == {"sha256": SHA, "size": 0, "complete": False}
    assert put(server, SHA, 0, len(DATA), DATA[:1000]).json()["size"] == 1000
    assert put(server, SHA, 0, len(DATA), DATA[:1000]).json()["size"] == 1000  # an answer lost: sent again
    assert put(server, SHA, 500, len(DATA), DATA[500:2000]).json()["size"] == 2000  # overlapping
    assert state(server, SHA)["size"] == 2000  # where a restarted client goes on from
    assert not stored.exists(SHA)
    assert put(server, SHA, 2000, len(DATA), DATA[2000:]).json()["complete"] is True
    with stored.open(SHA) as blob:
        assert blob.read() == DATA
    assert state(server, SHA)["complete"] is True
    assert put(server, SHA, 0, len(DATA), DATA[:10]).json()["complete"] is True  # nothing to do
    assert not list((stored.root / "uploads").iterdir())


def test_bytes_that_hash_otherwise_are_never_stored(server, stored):
    wrong = hashlib.sha256(b"other bytes").hexdigest()
    answer = put(server, wrong, 0, len(DATA), DATA)
    assert answer.status_code == 422 and "hash to" in answer.json()["error"]
    assert not stored.exists(wrong) and not stored.exists(SHA)
    assert state(server, wrong)["size"] == 0  # dropped: an upload starts again from 0


def test_a_chunk_that_differs_from_what_was_received_starts_the_upload_again(server, stored):
    put(server, SHA, 0, len(DATA), DATA[:1000])
    answer = put(server, SHA, 0, len(DATA), b"\x00" * 1000)
    assert answer.status_code == 409 and "differ" in answer.json()["error"]
    assert state(server, SHA)["size"] == 0


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/ingest/v1/blobs/..%2F..%2Fserved.db?offset=0&total=3", 404),
        ("/api/ingest/v1/blobs/" + SHA.upper() + "?offset=0&total=3", 400),
        ("/api/ingest/v1/blobs/" + SHA[:63] + "?offset=0&total=3", 400),
        ("/api/ingest/v1/blobs/" + SHA + "/x?offset=0&total=3", 404),
        ("/api/ingest/v1/blobs/" + SHA + "?offset=-1&total=3", 400),
        ("/api/ingest/v1/blobs/" + SHA + "?offset=0", 400),
        ("/api/ingest/v1/blobs/" + SHA + "?offset=0&total=2", 400),  # the chunk lies past the end
        ("/api/ingest/v1/blobs/" + SHA + "?offset=1&total=4", 409),  # past what is held
        ("/api/ingest/v1/blobs/" + SHA + f"?offset=0&total={2**40}", 413),
    ],
)
def test_hostile_uploads_are_refused_and_store_nothing(server, stored, tmp_path, path, status):
    answer = server.put(path, content=b"abc", headers={"Authorization": f"Bearer {WRITE}"})
    assert answer.status_code == status, answer.text
    assert set(os.listdir(tmp_path)) <= {"served.db", "served.db-wal", "served.db-shm", "served.artifacts"}
    assert not [file for file in tmp_path.rglob("*") if file.is_file() and "served.db" not in file.name
                and file.stat().st_size]  # fmt: skip


def test_a_chunk_is_bounded(server):
    answer = put(server, SHA, 0, 2**30, b"\x00" * (8 * 2**20 + 1))
    assert answer.status_code == 413


def test_uploads_need_a_write_token(server):
    assert put(server, SHA, 0, len(DATA), DATA, token=None).status_code == 401
    assert put(server, SHA, 0, len(DATA), DATA, token=READ).status_code == 403
    assert put(server, SHA, 0, len(DATA), DATA, token="made-up").status_code == 401


def test_a_server_without_an_artefact_store_says_so(tmp_path, pg_url):
    os.environ.pop("TALLYBOARD_ARTIFACTS", None)
    app = create_app(pg_url, token=READ, write_tokens=[WRITE])
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert put(client, SHA, 0, len(DATA), DATA).status_code == 501


@pytest.mark.parametrize("sha", ["../../served.db", SHA.upper(), SHA + "0", 7])
def test_a_listing_whose_hash_is_no_sha256_is_refused(server, sha):
    entry = [1, 1764650000.0, "add_artifact", [1, "model.ckpt", "file", 3, sha, None, 1764650000.0]]
    body = json.dumps({"entries": [entry]}).encode()
    answer = server.post(
        "/api/ingest/v1/spools/spool-of-the-test/entries",
        content=body,
        headers={"Authorization": f"Bearer {WRITE}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 400 and "sha256" in answer.json()["error"]

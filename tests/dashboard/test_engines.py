"""The dashboard's API on both engines: the same answers from SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from dashboard.compact_series import decoded
from dashboard.sample_table import csrf_of, log_sample
from tallyboard.dashboard import create_app


@pytest.fixture
def engine_client(db_url):
    table, running = log_sample(db_url)
    try:
        with TestClient(create_app(db_url), base_url="http://127.0.0.1") as client:
            client.csrf = csrf_of(client.get("/").text)
            yield client
    finally:
        for writer in running:
            writer.close()
        table.close()


def test_reads_and_edits_on_every_engine(engine_client):
    client = engine_client
    page = client.get("/api/runs", params={"sort": "lr", "filter": "lr > 0.0001"}).json()
    assert [row["run_id"] for row in page["rows"]] == [1, 3]
    run = client.get("/api/runs/1").json()
    assert run["hparams"] == {"lr": 0.001, "optimizer": "adam"} and len(run["repetitions"]) == 2
    series = client.get("/api/series?runs=1,2&metric=loss&width=50").json()
    train = decoded(next(s for s in series["series"] if s["tag"] == "train/loss" and s["run_id"] == 2))
    assert len(train["step"]) == 50 and train["max"][0] == 0.5 and train["step"][-1] == 299
    cursor = f"3:{train['tag_id']}:0:290"
    live = client.get("/api/live", params={"runs": "3", "metric": "loss", "after": cursor}).json()
    train_live = decoded(next(s for s in live["series"] if s["tag"] == "train/loss"))
    assert train_live["step"] == list(range(291, 300))
    csv = client.get("/api/runs/1/scalars.csv", params={"tag": "val/loss"}).text.splitlines()
    assert len(csv) == 1 + 20
    media = client.get("/api/runs/1/media?kind=image").json()["media"]
    assert client.get(f"/api/media/{media[0]['media_id']}").content.startswith(b"\x89PNG")
    fragment = client.get("/api/runs/1/texts?kind=fragment").json()["texts"][0]
    assert "<script>" in client.get(f"/fragments/{fragment['text_id']}").text
    edited = client.post(
        "/api/runs/2", json={"note": "ok", "hidden": True}, headers={"X-CSRF-Token": client.csrf}
    )
    assert edited.json()["note"] == "ok" and edited.json()["hidden"] is True
    columns = [{"name": "lr", "alias": "LR", "position": 0}]
    saved = client.post("/api/columns", json={"columns": columns}, headers={"X-CSRF-Token": client.csrf})
    assert saved.status_code == 200 and saved.json()["columns"][0]["alias"] == "LR"


def test_long_lists_and_huge_numbers_are_filtered_by_the_database(engine_client):
    """Filters the page accepts (up to 2,000 characters) are answered on both engines, not a 500:
    an `in` list of ~1,000 items (once one OR per item, which SQLite refuses nested 1,000 deep) and
    integers beyond 64 bits (which neither engine's integer binds), read as the nearest float."""

    def ids(text):
        response = engine_client.get("/api/runs", params={"filter": text})
        assert response.status_code == 200, response.text
        count = engine_client.get("/api/runs/count", params={"filter": text})
        assert count.status_code == 200 and count.json()["total"] == response.json()["total"]
        return sorted(row["run_id"] for row in response.json()["rows"])

    padding = ",".join(["7"] * 985)
    assert ids(f"lr in [{padding},0.01]") == [3]
    assert ids(f'lr in [{padding},"AUTO"]') == [2]  # text compares without case, as `==` does
    assert ids(f"run_id in [{padding},1]") == [1]
    assert ids("status in [" + '"x",' * 480 + '"finished"]') == [1, 2]
    assert ids("run_id < " + "9" * 90) == ids("run_id > -" + "9" * 90) == [-1, 1, 2, 3]  # debug run too
    assert ids("lr < " + "9" * 400) == [1, 3]  # past a float's range: inf
    assert ids("run_id == " + "9" * 30) == []


@pytest.mark.parametrize(
    "url",
    [
        "/api/runs?filter=experiment == 'a%00b'", "/api/runs/count?filter=tag ~ '%00'",
        "/api/series?runs=1&metric=a%00b", "/api/live?runs=1&metric=%00", "/api/runs/1/scalars.csv?tag=%00",
        "/api/runs/1/scalar-events?tag=%00", "/api/runs/1/histograms?tag=%00",
        "/api/runs/1/console?search=%00",
        "/api/runs/1/artifacts/a%00b", "/api/compare?runs=1&metric=%00", "/api/compare?metric=loss&by=%00",
        "/api/summaries?runs=1&metric=%00",
    ],
)  # fmt: skip
def test_a_nul_character_in_a_request_is_a_400_on_every_engine(engine_client, url):
    """psycopg refuses to send a NUL in text (PostgreSQL cannot hold one): a 400 saying so, not a 500."""
    response = engine_client.get(url)
    assert response.status_code == 400, response.text
    assert "NUL character" in response.json()["error"]


def test_an_edit_with_a_nul_character_is_a_400_and_changes_nothing(engine_client):
    before = engine_client.get("/api/runs/1").json()["note"]
    response = engine_client.post(
        "/api/runs/1", json={"note": "a\x00b"}, headers={"X-CSRF-Token": engine_client.csrf}
    )
    assert response.status_code == 400 and "NUL character" in response.json()["error"]
    assert engine_client.get("/api/runs/1").json()["note"] == before

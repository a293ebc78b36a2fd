"""The live event stream (/api/stream) on both engines, against a real server and a live writer:
every point arrives exactly once across a reconnect with Last-Event-ID."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest

import tallyboard as tb
from dashboard.compact_series import decoded
from e2e.browser import running_dashboard

LIVE_INTERVAL = 0.05  # seconds between the hub's polls: the test waits on events, never on time


def events(response: httpx.Response) -> Iterator[tuple[str, str, dict]]:
    """(id, event, data) of each event of an open text/event-stream response."""
    event_id, name, data = "", "message", ""
    for line in response.iter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data:
            yield event_id, name, json.loads(data)
            name, data = "message", ""


def read_until(stream: Iterator[tuple[str, str, dict]], seen: list[int], last: int) -> str:
    """Collect the steps of train/loss until step `last` arrived; the id of the last event read."""
    last_id = ""
    for event_id, name, data in stream:
        last_id = event_id
        assert name in ("update", "ping"), (name, data)
        for series in data.get("series", []):
            assert series["tag"] == "train/loss" and not series["more"]
            seen.extend(decoded(series)["step"])
        if seen and seen[-1] >= last:
            return last_id
    raise AssertionError("the stream ended early")


@pytest.fixture
def live_run(db_url):
    """A running run with steps 0..9 of train/loss, served with a fast live poll; yields (http, run)."""
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("live", auto_log_plt=False)
    for step in range(10):
        run.add_scalar("train/loss", 1.0 / (step + 1), step=step)
    run.flush()
    try:
        with (
            running_dashboard(str(db_url), live_interval=LIVE_INTERVAL) as base,
            httpx.Client(base_url=base) as http,
        ):
            yield http, run
    finally:
        run.close()
        table.close()


def log_steps(run: tb.LogWriter, steps: range) -> threading.Thread:
    """A writer thread logging `steps` in small flushed batches while the test reads the stream."""

    def write() -> None:
        for step in steps:
            run.add_scalar("train/loss", 1.0 / (step + 1), step=step)
            if step % 7 == 0:
                run.flush()
        run.flush()

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_reconnect_with_last_event_id_has_no_gap_and_no_duplicate(live_run):
    http, run = live_run
    tag_id = http.get("/api/series", params={"runs": run.run_id}).json()["series"][0]["tag_id"]
    query = {"runs": run.run_id, "after": f"{run.run_id}:{tag_id}:0:9"}
    seen: list[int] = []
    writer = log_steps(run, range(10, 400))
    with http.stream("GET", "/api/stream", params=query, timeout=30) as first:
        assert first.headers["content-type"].startswith("text/event-stream")
        last_id = read_until(events(first), seen, 120)
    # Reconnect as a browser does: the same URL (its cursor long stale) plus Last-Event-ID.
    with http.stream(
        "GET", "/api/stream", params=query, headers={"Last-Event-ID": last_id}, timeout=30
    ) as second:
        writer.join()
        read_until(events(second), seen, 399)
    assert seen == list(range(10, 400))

    with http.stream("GET", "/api/stream", params=query, headers={"Last-Event-ID": "stale.3"}) as old:
        assert next(events(old))[1] == "reset"  # an id this server never gave: reload, then follow


def test_status_new_series_and_texts_arrive_live(live_run):
    http, run = live_run
    with http.stream("GET", "/api/stream", params={"runs": run.run_id}, timeout=30) as response:
        stream = events(response)
        _, name, first = next(stream)
        assert name == "update" and first["runs"][0]["status"] == "running" and first["series"] == []
        run.add_text("epoch done", tag="log", step=3)
        run.add_scalar("val/acc", 0.5, step=0)
        run.flush()
        got: dict[str, list] = {"texts": [], "series": []}
        for _, _name, data in stream:
            for kind in got:
                got[kind].extend(data.get(kind, []))
            if got["texts"] and got["series"]:
                break
        assert [(t["tag"], t["step"], t["kind"]) for t in got["texts"]] == [("log", 3, "text")]
        assert [(s["tag"], s["new"]) for s in got["series"]] == [("val/acc", True)]  # the page loads it
        run.close()
        states = next(data["runs"] for _, _name, data in stream if data.get("runs"))
        assert states[0]["status"] == "finished"


def test_the_runs_table_hears_of_changed_and_new_runs(live_run):
    http, run = live_run
    with http.stream("GET", "/api/stream", params={"table": "1"}, timeout=30) as response:
        stream = events(response)
        _, _, first = next(stream)
        assert first["version"]["runs"] == 1
        run.write_result(accuracy=0.5)
        changed = next(data["version"] for _, _name, data in stream if data.get("version"))
        assert changed["runs"] == 1 and changed["updated_at"] >= first["version"]["updated_at"]


def test_stream_refuses_bad_requests(live_run):
    http, _ = live_run
    assert http.get("/api/stream").status_code == 400
    assert http.get("/api/stream", params={"runs": "1", "after": "junk"}).status_code == 400
    assert http.get("/api/stream", params={"runs": ",".join(map(str, range(60)))}).status_code == 400


def test_stream_needs_the_token_like_every_route(db_url):
    tb.ResultTable(db_url).close()
    with running_dashboard(str(db_url), token="s3cret", live_interval=LIVE_INTERVAL) as base:
        assert httpx.get(f"{base}/api/stream?runs=1").status_code in (401, 403)


def test_serve_stops_with_streams_open(tmp_path):
    table = tb.ResultTable(tmp_path / "t.db", nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("live", auto_log_plt=False)
    run.add_scalar("train/loss", 1.0, step=0)
    run.flush()
    code = f"from tallyboard.dashboard import serve; serve({str(tmp_path / 't.db')!r}, port=0)"
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as server:
        try:
            base = re.search(r"(http://[^/\s]+)/", server.stdout.readline()).group(1)
            with httpx.stream("GET", f"{base}/api/stream?runs={run.run_id}", timeout=30) as response:
                stream = events(response)
                assert next(stream)[1] == "update"
                server.send_signal(signal.SIGINT)  # Ctrl+C
                assert list(stream) == []  # the server ended the stream cleanly (no error mid-chunk)
            assert server.wait(20) in (0, -signal.SIGINT)  # uvicorn re-raises the Ctrl+C once it stopped
        finally:
            server.kill()  # the with block then closes its pipe
            run.close()
            table.close()

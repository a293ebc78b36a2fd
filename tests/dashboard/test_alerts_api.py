"""Alerts in the dashboard's API: a run's list, the runs table's markers, the texts endpoint's
kind 'alert', and new alerts of any run pushed live to open runs tables (a real server)."""

from __future__ import annotations

import httpx
import pytest

import tallyboard as tb
from dashboard.test_stream import LIVE_INTERVAL, events
from e2e.browser import running_dashboard


@pytest.fixture
def served(db_url):
    """Two runs (one with two alerts), served with a fast live poll; yields (http, writer, ids)."""
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    quiet = table.new_run("quiet", auto_log_plt=False)
    loud = table.new_run("loud", auto_log_plt=False)
    loud.alert("disk almost full", "93%", level="warn", step=3)
    loud.alert("loss is not finite", "loss = nan at step 4", level="error", step=4)
    loud.flush()
    quiet.flush()
    try:
        with (
            running_dashboard(str(db_url), live_interval=LIVE_INTERVAL) as base,
            httpx.Client(base_url=base) as http,
        ):
            yield http, loud, (quiet.run_id, loud.run_id)
    finally:
        quiet.close()
        loud.close()
        table.close()


def test_a_runs_alerts_and_the_markers_of_the_runs_table(served):
    http, _, (quiet, loud) = served
    alerts = http.get(f"/api/runs/{loud}/alerts").json()["alerts"]
    assert [(a["title"], a["level"], a["step"], a["text"]) for a in alerts] == [
        ("disk almost full", "warn", 3, "93%"),
        ("loss is not finite", "error", 4, "loss = nan at step 4"),
    ]
    assert http.get(f"/api/runs/{quiet}/alerts").json() == {"alerts": []}
    marks = http.get("/api/alerts").json()["runs"]
    assert marks == {str(loud): {"count": 2, "level": "error", "latest": {
        "title": "loss is not finite", "time": alerts[1]["time"], "level": "error"}}}  # fmt: skip
    texts = http.get(f"/api/runs/{loud}/texts", params={"kind": "alert"}).json()["texts"]
    assert [t["tag"] for t in texts] == ["disk almost full", "loss is not finite"]
    assert http.get(f"/api/runs/{loud}/texts").json()["texts"] == []  # the Text tab shows texts only
    assert "/api/alerts" in http.get("/api/openapi.json").json()["paths"]


def test_a_new_alert_reaches_open_runs_tables_and_its_run_page(served):
    http, loud, (_, loud_id) = served
    with (
        http.stream("GET", "/api/stream", params={"table": 1}, timeout=30) as table_page,
        http.stream("GET", "/api/stream", params={"runs": loud_id}, timeout=30) as run_page,
    ):
        tables, runs = events(table_page), events(run_page)
        assert next(tables)[2]["alerts"] == [] and next(runs)[1] == "update"
        loud.alert("stalled", level="warn")
        loud.flush()
        new = next(data["alerts"] for _, _, data in tables if data.get("alerts"))
        assert [(a["run_id"], a["title"], a["level"]) for a in new] == [(loud_id, "stalled", "warn")]
        texts = next(data["texts"] for _, _, data in runs if data.get("texts"))
        assert [(t["kind"], t["tag"]) for t in texts] == [("alert", "stalled")]

"""Every filter and API example the README and docs/ show runs on the demo's table, as written.

The examples are read out of the Markdown files themselves, so an example edited into a doc later is
tested too. They ran into "unknown column" before (a logged series named where a result column was
meant), which a reader meets as the docs not working.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ports import free_port
from tallyboard import ResultTable
from tallyboard.analysis.runs_listing import RunsView

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_filters() -> list[str]:
    """`--filter '...'` of command lines, `filter=` of API URLs, and the dashboard's filter block."""
    found: list[str] = []
    for doc in DOCS:
        text = doc.read_text()
        found += re.findall(r"--filter '([^']+)'", text)
        found += [urllib.parse.unquote(f) for f in re.findall(r"[?&]filter=([^&'\s]+)", text)]
    dashboard = (ROOT / "docs" / "dashboard.md").read_text()
    block = re.search(r"\*\*Filter\*\*.*?```\n(.*?)```", dashboard, re.DOTALL)
    assert block, "docs/dashboard.md lost its block of filter examples"
    found += [line.strip() for line in block.group(1).splitlines() if line.strip()]
    return sorted(set(found))


def documented_api_calls() -> list[str]:
    """The paths of the `curl` examples against a local dashboard."""
    return sorted(
        {
            path
            for doc in DOCS
            for path in re.findall(r"curl -s 'http://127\.0\.0\.1:\d+(/api/[^']+)'", doc.read_text())
        }
    )


def load_runs(table: str, filter_text: str | None = None, show_hidden: bool = False) -> RunsView:
    """What `tallyboard runs TABLE --filter TEXT` lists."""
    opened = ResultTable(table, read_only=True)
    try:
        return opened.runs_table(filter_text, show_hidden)
    finally:
        opened.close()


def test_the_docs_show_examples() -> None:
    assert len(documented_filters()) >= 5 and documented_api_calls()


@pytest.mark.parametrize("expression", documented_filters())
def test_every_documented_filter_runs_on_the_demo_table(demo_table: str, expression: str) -> None:
    load_runs(demo_table, expression, show_hidden=True)  # raises on an unknown column or bad syntax


def test_null_matches_runs_without_a_note_or_tag(demo_table: str) -> None:
    runs = load_runs(demo_table).rows
    without_note = load_runs(demo_table, "note == null").rows
    assert [run["run_id"] for run in without_note] == [run["run_id"] for run in runs if not run["note"]]
    assert len(without_note) == len(runs) - 1  # only the diverging run has a note
    assert [run["run_id"] for run in load_runs(demo_table, "tag == null").rows] == [-1]  # the debug run


def _get(url: str, deadline: float) -> tuple[int, dict]:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)
        except OSError:
            assert time.monotonic() < deadline, "the dashboard never answered"
            time.sleep(0.2)


def test_every_documented_api_call_answers_on_the_demo_table(demo_table: str) -> None:
    port = free_port()
    command = [sys.executable, "-m", "tallyboard", "serve", demo_table, "--port", str(port), "--read-only"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        for path in documented_api_calls():
            status, body = _get(f"http://127.0.0.1:{port}{path}", deadline)
            assert status == 200, (path, body)
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
            if "sort" in query and body.get("rows"):
                key = query["sort"][0]
                values = [row.get(key, row["cells"].get(key)) for row in body["rows"]]
                assert values == sorted(values, reverse="desc" in query), (path, values)
    finally:
        server.terminate()
        server.communicate(timeout=30)  # waits, and closes the stderr pipe

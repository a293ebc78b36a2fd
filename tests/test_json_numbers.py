"""One rule for NaN and infinities in every JSON we emit: the strings "NaN", "Infinity", "-Infinity".

Each emitter is checked on a table holding such numbers as results and as scalars, and every
document is parsed as standard JSON (a `NaN` or `Infinity` token fails the parse).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cli_runner import run_cli
from dashboard.compact_series import decoded
from tallyboard import NoCommitAction, ResultTable
from tallyboard.dashboard import create_app
from tallyboard.json_numbers import dumps, jsonable

ODD = [1.0, math.nan, math.inf, -math.inf, 2.0]
ODD_AS_JSON = [1.0, "NaN", "Infinity", "-Infinity", 2.0]
ODD_RESULTS = {"lost": math.nan, "big": math.inf, "small": -math.inf, "fine": 0.5}
ODD_RESULTS_AS_JSON = {"lost": "NaN", "big": "Infinity", "small": "-Infinity", "fine": 0.5}


def standard_json(text: str) -> Any:
    """`json.loads` that refuses the NaN/Infinity tokens Python's json accepts by default."""

    def refuse(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def odd_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("odd") / "odd.db"
    table = ResultTable(str(db), nocommit_action=NoCommitAction.NOP)
    run = table.new_run("odd")
    for step, value in enumerate(ODD):
        run.add_scalar("train/odd", value, step=step)
    run.write_result(**ODD_RESULTS)
    table.close()
    return db


def test_non_finite_numbers_become_their_names_and_nothing_else_changes():
    value = {"a": [math.nan, (math.inf, -math.inf)], 1: {"b": 0.25, "c": None, "d": "NaN", "e": 3}}
    assert jsonable(value) == {
        "a": ["NaN", ["Infinity", "-Infinity"]],
        "1": {"b": 0.25, "c": None, "d": "NaN", "e": 3},
    }
    assert standard_json(dumps(value)) == jsonable(value)
    assert math.isnan(float("NaN")) and (float("Infinity"), float("-Infinity")) == (math.inf, -math.inf)


def test_the_api_writes_results_and_series_by_the_rule(odd_table: Path):
    with TestClient(create_app(str(odd_table), read_only=True), base_url="http://127.0.0.1") as client:
        runs = standard_json(client.get("/api/runs").text)
        (row,) = runs["rows"]
        assert {name: row["cells"][name] for name in ODD_RESULTS} == ODD_RESULTS_AS_JSON
        series = standard_json(client.get(f"/api/series?runs={row['run_id']}&metric=odd").text)
        (line,) = [decoded(s) for s in series["series"]]
        assert line["value"] == ODD_AS_JSON
        assert line["min"] == [1.0, None, "Infinity", "-Infinity", 2.0]  # a NaN point has no extreme


def test_runs_json_writes_results_by_the_rule(odd_table: Path):
    (run,) = standard_json(run_cli("runs", odd_table, "--json").stdout)
    assert {name: run["results"][name] for name in ODD_RESULTS} == ODD_RESULTS_AS_JSON


def test_a_jsonl_export_writes_scalars_by_the_rule_and_imports_them_back(odd_table: Path, tmp_path: Path):
    out = tmp_path / "export"
    run_cli("export", odd_table, "--format", "jsonl", "--out", out, "--quiet")
    for file in out.glob("*.jsonl"):
        for line in file.read_text(encoding="utf-8").splitlines():
            standard_json(line)
    scalars = [json.loads(line) for line in (out / "scalars.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["value"] for row in scalars] == ODD_AS_JSON

    back = tmp_path / "back.db"
    run_cli("import", "tallyboard", out, "--into", back, "--quiet")
    table = ResultTable(str(back), nocommit_action=NoCommitAction.NOP)
    try:
        (run_id,) = table.runs
        values = [point.value for point in table.load_run(run_id).get_scalar("train/odd")]
    finally:
        table.close()
    assert math.isnan(values[1]) and [values[i] for i in (0, 2, 3, 4)] == [1.0, math.inf, -math.inf, 2.0]

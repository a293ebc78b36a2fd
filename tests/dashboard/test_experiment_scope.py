"""A table of several experiments (projects): the runs table is scoped to one of them when asked,
with only the columns its runs hold, and `/api/experiments` lists them, the latest first."""

from __future__ import annotations

import pytest

import tallyboard as tb
from tallyboard.dashboard.runs_table import RunsTable
from tallyboard.store import open_queries


@pytest.fixture
def path(tmp_path):
    path = str(tmp_path / "results.db")
    with tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP) as table:
        for experiment, hparams in (("vision", {"lr": 0.1, "kernel": 3}), ("text", {"lr": 0.2, "vocab": 9})):
            for seed in range(2):
                run = table.new_run(experiment, cli={"seed": seed}, auto_log_plt=False)
                run.add_hparams(seed=seed, **hparams)
                run.write_result(**{f"{experiment}_acc": 0.5})
        odd = table.new_run('quote "this" \\ too', auto_log_plt=False)
        odd.close()
    return path


def test_a_page_of_one_experiment_has_its_runs_and_its_columns(path):
    queries = open_queries(path)
    try:
        runs = RunsTable(queries)
        page = runs.page(experiment="text")
        assert [row["run_id"] for row in page.rows] == [3, 4]
        names = {column.name for column in page.columns}
        assert {"lr", "vocab", "seed", "text_acc", "experiment", "status"} <= names
        assert not {"kernel", "vision_acc"} & names
        assert runs.count(experiment="text", filter_text="seed == 1") == 1
        assert [row["run_id"] for row in runs.page(experiment="text", filter_text="seed == 1").rows] == [4]
        assert [row["run_id"] for row in runs.page(experiment='quote "this" \\ too').rows] == [5]
        assert {"kernel", "vocab"} <= {column.name for column in runs.page().columns}  # all: every column
    finally:
        queries.close()


def test_the_api_lists_experiments_latest_first_and_scopes_a_view(path):
    from starlette.testclient import TestClient

    from tallyboard.dashboard import create_app

    with TestClient(create_app(path), base_url="http://127.0.0.1") as client:
        listed = client.get("/api/experiments").json()["experiments"]
        assert [(e["experiment"], e["runs"]) for e in listed] == [
            ('quote "this" \\ too', 1),
            ("text", 2),
            ("vision", 2),
        ]
        page = client.get("/api/runs", params={"experiment": "vision"}).json()
        assert [row["run_id"] for row in page["rows"]] == [1, 2]
        assert "vocab" not in {column["name"] for column in page["columns"]}
        assert client.get("/api/runs/count", params={"experiment": "vision"}).json() == {"total": 2}

"""The API of the deciding views (/api/compare, /api/summaries, /api/importance, /api/diff) on
both engines, against scipy and against `ResultTable.compare` for the same runs."""

from __future__ import annotations

import pytest
from scipy import stats as sp
from starlette.testclient import TestClient

import tallyboard as tb
from dashboard.sweep_table import BATCHES, LRS, final_value, log_sweep
from tallyboard.dashboard import create_app


@pytest.fixture
def sweep_client(db_url, tmp_path):
    runs = log_sweep(db_url, tmp_path)
    with TestClient(create_app(db_url), base_url="http://127.0.0.1") as client:
        client.runs = runs
        client.ids = ",".join(map(str, runs))
        yield client


def test_compare_groups_and_pairs_equal_scipy_and_the_library(sweep_client, db_url):
    client = sweep_client
    found = client.get(
        "/api/compare", params={"runs": client.ids, "metric": "val/accuracy", "by": "lr"}
    ).json()
    assert [g["label"] for g in found["groups"]] == [f"lr={lr}" for lr in LRS]
    for group, lr in zip(found["groups"], LRS, strict=True):
        values = [final_value(lr, b, rep) for b in BATCHES for rep in range(3)]
        assert sorted(group["samples"]) == pytest.approx(sorted(values))
        low, high = sp.t.interval(0.95, 5, loc=sp.tmean(values), scale=sp.sem(values))
        assert (group["ci_low"], group["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    try:
        pairs = table.compare("val/accuracy", by="lr").attrs["pairs"]
    finally:
        table.close()
    assert [p["p_holm"] for p in found["pairs"]] == list(pairs["p_holm"])
    assert [p["verdict"] for p in found["pairs"]] == list(pairs["verdict"])


def test_compare_by_two_hparams_per_run(sweep_client):
    client = sweep_client
    query = [
        ("runs", client.ids),
        ("metric", "val/accuracy"),
        ("by", "lr"),
        ("by", "batch_size"),
        ("unit", "run"),
    ]
    found = client.get("/api/compare", params=query).json()
    assert found["unit"] == "run" and len(found["groups"]) == 8
    assert found["groups"][0]["label"] == "lr=0.0001, batch_size=32"
    assert found["pairs"] == []


def test_summaries_give_one_point_per_run_with_its_repetitions(sweep_client):
    client = sweep_client
    found = client.get("/api/summaries", params={"runs": client.ids, "metric": "val/accuracy"}).json()
    by_run = {r["run_id"]: r for r in found["runs"]}
    assert set(by_run) == set(client.runs)
    for run_id, (lr, batch) in client.runs.items():
        values = [final_value(lr, batch, rep) for rep in range(3)]
        assert by_run[run_id]["n"] == 3
        assert by_run[run_id]["mean"] == pytest.approx(sp.tmean(values))
        assert by_run[run_id]["std"] == pytest.approx(sp.tstd(values))


def test_importance_ranks_lr_first(sweep_client):
    client = sweep_client
    found = client.get("/api/importance", params={"runs": client.ids, "metric": "accuracy"}).json()
    assert [r["hparam"] for r in found["rows"]] == ["lr", "batch_size"]
    lrs = [lr for lr, _ in client.runs.values()]
    acc = [final_value(lr, b, 1) for lr, b in client.runs.values()]
    assert found["rows"][0]["spearman"] == pytest.approx(sp.spearmanr(lrs, acc).statistic)
    assert found["rows"][0]["eta_squared"] > 0.95 > found["rows"][1]["eta_squared"]


def test_diff_shows_the_changed_hparam_config_and_cli(sweep_client):
    client = sweep_client
    first, second = list(client.runs)[:2]  # same lr, batch 32 vs 64
    found = client.get("/api/diff", params={"runs": f"{first},{second}"}).json()
    assert found["hparams"]["differing"] == ["batch_size"]
    fields = {f["field"]: f for f in found["fields"]}
    assert fields["config_content"]["changed"] and fields["cli"]["changed"]
    assert not fields["git_commit"]["changed"]
    changed = [r for r in fields["config_content"]["against"][0]["rows"] if r["op"] != "equal"]
    assert changed == [{"op": "replace", "a": "batch_size: 32", "b": "batch_size: 64"}]


@pytest.mark.parametrize(
    "path, query, message",
    [
        ("/api/compare", {"metric": "val/accuracy"}, "runs is required"),
        ("/api/compare", {"runs": "1,2"}, "metric is required"),
        ("/api/compare", {"runs": "1,2", "metric": "val/accuracy", "summary": "median"}, "summary must be"),
        ("/api/compare", {"runs": "1,2", "metric": "val/accuracy", "unit": "epoch"}, "unit must be"),
        ("/api/summaries", {"runs": "1,2", "metric": "val/accuracy", "k": "0"}, "k must be between"),
        ("/api/diff", {"runs": "1"}, "2 to 10"),
    ],
)
def test_bad_queries_are_400s_that_say_why(sweep_client, path, query, message):
    response = sweep_client.get(path, params=query)
    assert response.status_code == 400 and message in response.json()["error"]


def test_diff_of_a_missing_run_is_404_and_unknown_metric_is_empty(sweep_client):
    assert sweep_client.get("/api/diff", params={"runs": "1,999"}).status_code == 404
    empty = sweep_client.get("/api/compare", params={"runs": "1,2", "metric": "nope"}).json()
    assert empty["groups"] == [] and empty["pairs"] == []

"""`ResultTable.compare` and `tallyboard compare` on a real sweep, on both engines: the groups and
pairs equal scipy's numbers for the samples the sweep logged."""

from __future__ import annotations

import json
import math
from itertools import combinations

import pytest
from scipy import stats as sp

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from dashboard.sweep_table import BATCHES, LRS, STEPS, final_value, log_sweep


@pytest.fixture
def sweep(db_url, tmp_path):
    runs = log_sweep(db_url, tmp_path)
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    yield table, runs
    table.close()


def samples_of(lr: float) -> list[float]:
    return [final_value(lr, batch, rep) for batch in BATCHES for rep in range(3)]


def holm(pvalues):
    order = sorted(range(len(pvalues)), key=pvalues.__getitem__)
    out, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        out[i] = running
    return out


def test_compare_by_lr_equals_scipy(sweep):
    table, _ = sweep
    frame = table.compare("val/accuracy", by="lr")
    assert list(frame["lr"]) == list(LRS)
    for row in frame.itertuples():
        values = samples_of(row.lr)
        low, high = sp.t.interval(0.95, len(values) - 1, loc=sp.tmean(values), scale=sp.sem(values))
        assert (row.n, row.mean, row.std) == (
            6,
            pytest.approx(sp.tmean(values)),
            pytest.approx(sp.tstd(values)),
        )
        assert (row.ci_low, row.ci_high) == (pytest.approx(low), pytest.approx(high))
    pairs = frame.attrs["pairs"]
    expected = [sp.ttest_ind(samples_of(b), samples_of(a), equal_var=False) for a, b in combinations(LRS, 2)]
    assert list(pairs["p"]) == pytest.approx([t.pvalue for t in expected])
    assert list(pairs["p_holm"]) == pytest.approx(holm([t.pvalue for t in expected]))
    assert pairs.iloc[0]["verdict"].startswith("lr=0.001 > lr=0.0001, p = ")


def test_compare_per_run_by_two_hparams_and_summaries(sweep):
    table, runs = sweep
    frame = table.compare("val/accuracy", by=["lr", "batch_size"], unit="run")
    assert len(frame) == 8 and set(frame["n"]) == {1}  # one run per cell: nothing to test
    assert frame.attrs["pairs"].empty
    best = table.compare("val/accuracy", summary="best", unit="run")
    assert best["n"].item() == 8
    expected = [sum(final_value(lr, b, rep) for rep in range(3)) / 3 for lr, b in runs.values()]
    assert best["mean"].item() == pytest.approx(sum(expected) / 8)
    # The mean of the last 2 of 6 points is (5/6 + 6/6)/2 of the final value.
    tail = table.compare("val/accuracy", summary="last_k", k=2, run_ids=[1])
    assert tail["mean"].item() == pytest.approx(
        sum(final_value(*runs[1], rep) for rep in range(3)) / 3 * 11 / 12
    )
    assert tail["n"].item() == 3
    worst = table.compare("val/accuracy", summary="best", goal="min", run_ids=[1])
    assert worst["mean"].item() == pytest.approx(
        sum(final_value(*runs[1], rep) / STEPS for rep in range(3)) / 3
    )


def test_compare_a_result_column(sweep):
    table, _ = sweep
    frame = table.compare("accuracy", by="batch_size")
    assert list(frame["n"]) == [4, 4]
    assert frame["mean"].tolist() == pytest.approx(
        [sum(final_value(lr, b, 1) for lr in LRS) / 4 for b in BATCHES]
    )


def test_compare_refuses_unknown_metrics_runs_and_options(sweep):
    table, _ = sweep
    with pytest.raises(KeyError, match="named 'nope'"):
        table.compare("nope", by="lr")
    with pytest.raises(KeyError, match="no run with id 999"):
        table.compare("val/accuracy", run_ids=[1, 999])
    with pytest.raises(ValueError, match="summary must be one of"):
        table.compare("val/accuracy", summary="median")
    with pytest.raises(ValueError, match="unit must be"):
        table.compare("val/accuracy", unit="epoch")


def test_cli_compare_prints_groups_and_verdicts(sweep, db_url):
    table, _ = sweep
    out = run_cli("compare", db_url, "--metric", "val/accuracy", "--by", "lr").stdout
    lines = out.splitlines()
    assert lines[0] == "val/accuracy (one sample per repetition)"
    assert lines[1].split() == ["group", "n", "mean", "std", "95%", "CI"]
    assert lines[2].split()[:3] == ["lr=0.0001", "6", f"{sp.tmean(samples_of(0.0001)):.4g}"]
    assert sum(1 for line in lines if "Welch p =" in line) == 6
    data = json.loads(run_cli("compare", db_url, "--metric", "val/accuracy", "--by", "lr", "--json").stdout)
    assert [g["label"] for g in data["groups"]] == [f"lr={lr}" for lr in LRS]
    assert data["pairs"][0]["p"] == pytest.approx(
        table.compare("val/accuracy", by="lr").attrs["pairs"]["p"][0]
    )
    assert not math.isnan(data["groups"][0]["ci_low"])


def test_cli_compare_unknown_metric_is_one_line(sweep, db_url):
    assert_one_line_error(run_cli("compare", db_url, "--metric", "nope", check=False), "nope")


def test_cli_compare_json_has_nan_for_a_missing_spread(sweep, db_url):
    out = run_cli("compare", db_url, "--metric", "accuracy", "--by", "lr", "batch_size", "--json").stdout
    groups = json.loads(out)[
        "groups"
    ]  # one run per group: no std, no CI (docs/dashboard.md "Numbers in JSON")
    assert len(groups) == 8 and groups[0]["std"] == "NaN" and groups[0]["ci_low"] == "NaN"


def test_cli_compare_of_a_missing_table_creates_nothing(tmp_path):
    missing = tmp_path / "nope.db"
    assert_one_line_error(run_cli("compare", missing, "--metric", "acc", check=False), "nope.db")
    assert not missing.exists()

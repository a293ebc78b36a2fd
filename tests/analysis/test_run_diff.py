"""run_diff: side-by-side rows with unchanged stretches folded, JSON text diffed key by key, and
which hparams differ."""

from __future__ import annotations

import pytest

from tallyboard.analysis.run_diff import as_lines, diff_runs, differing_hparams, side_by_side


def test_a_long_unchanged_stretch_is_folded_to_three_lines_of_context():
    before = [f"line {i}" for i in range(40)]
    after = [*before[:20], "changed", *before[21:]]
    rows = side_by_side(before, after)
    assert [r["op"] for r in rows] == ["fold", *["equal"] * 3, "replace", *["equal"] * 3, "fold"]
    assert rows[0]["count"] == 17 and rows[-1]["count"] == 16
    assert rows[4] == {"op": "replace", "a": "line 20", "b": "changed"}
    assert sum(r.get("count", 1) for r in rows) == 40


def test_uneven_changes_leave_blank_cells_and_short_stretches_stay():
    rows = side_by_side(["a", "b", "c"], ["a", "x", "y", "z", "c"])
    assert rows[1:4] == [
        {"op": "replace", "a": "b", "b": "x"},
        {"op": "replace", "a": None, "b": "y"},
        {"op": "replace", "a": None, "b": "z"},
    ]
    assert side_by_side(["same"], ["same"]) == [{"op": "equal", "a": "same", "b": "same"}]


def test_json_text_is_diffed_key_by_key():
    assert as_lines('{"lr": 0.1, "bs": 32}') == ["{", '  "bs": 32,', '  "lr": 0.1', "}"]
    assert as_lines("not json\nsecond") == ["not json", "second"]
    assert as_lines(None) == []


def test_differing_hparams_counts_a_missing_one_as_different():
    assert differing_hparams([{"lr": 1, "bs": 2}, {"lr": 1, "bs": 3}, {"lr": 1}]) == ["bs"]
    assert differing_hparams([{"lr": 1}, {"lr": 1.0}]) == []  # equal numbers are the same value


def test_diff_runs_needs_two_runs_and_compares_each_with_the_first():
    runs = [
        {"run_id": 1, "config_content": "a: 1\n", "cli": None, "hparams": {"a": 1}},
        {"run_id": 2, "config_content": "a: 2\n", "cli": None, "hparams": {"a": 2}},
        {"run_id": 3, "config_content": "a: 1\n", "cli": None, "hparams": {"a": 1}},
    ]
    found = diff_runs(runs)
    config = next(f for f in found["fields"] if f["field"] == "config_content")
    assert config["changed"] and [x["changed"] for x in config["against"]] == [True, False]
    assert found["hparams"]["differing"] == ["a"]
    with pytest.raises(ValueError, match="two runs"):
        diff_runs(runs[:1])

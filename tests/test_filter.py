"""The filter language: what it accepts, what it refuses, that it never evaluates Python, and how it
finds a run's cells by column name or alias."""

from __future__ import annotations

import pytest

from tallyboard.errors import FilterError
from tallyboard.filter import MAX_DEPTH, parse_filter, run_cell, run_filter
from tallyboard.store.records import Column

ROWS = {
    1: {"lr": 0.001, "status": "finished", "tag": "Base", "note": None, "train/acc": 0.91, "hidden": False},
    2: {"lr": "auto", "status": "finished", "tag": "", "note": "x", "train/acc": None, "hidden": True},
    3: {
        "lr": 0.01,
        "status": "running",
        "tag": "baseline-2",
        "note": None,
        "train/acc": 0.95,
        "hidden": False,
    },
}


def resolve(name: str) -> str:
    if name not in ROWS[1]:
        raise FilterError(f"unknown column {name!r}")
    return name


def matching(text: str) -> list[int]:
    predicate = parse_filter(text, resolve)
    return [run for run, row in ROWS.items() if predicate(row.get)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('lr < 1e-3 or status == "running"', [3]),
        ("lr <= 1e-3", [1]),
        ('lr < 1e-2 and status == "finished"', [1]),
        ("lr > 0", [1, 3]),  # the string "auto" is neither < nor > a number
        ('lr == "AUTO"', [2]),  # strings compare case-insensitively
        ("note == null", [1, 3]),
        ("note != null", [2]),
        ('tag ~ "base"', [1, 3]),
        ("not hidden", [1, 3]),
        ("`train/acc` >= 0.95", [3]),
        ("train/acc >= 0.9", [1, 3]),
        ("lr in [0.01, 'auto']", [2, 3]),
        ("lr in [-1, 0.001]", [1]),
        ("(lr > 0.005 or lr == 'auto') and not hidden", [3]),
        ("lr > -1", [1, 3]),
        ("", [1, 2, 3]),
        ("tag", [1, 3]),  # a bare column is true when filled
    ],
)
def test_filters(text, expected):
    assert matching(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "lr <",
        "lr < 1 and",
        "(lr < 1",
        "lr << 1",
        "__import__('os').system('echo hacked')",
        "lr.__class__",
        "unknown > 1",
        "lr in 1",
        "lr in [status]",
        "'unterminated",
        "lr ; status",
    ],
)
def test_bad_filters_are_clear_errors(text):
    with pytest.raises(FilterError):
        parse_filter(text, resolve)


def test_nesting_and_length_are_bounded():
    with pytest.raises(FilterError, match="nests deeper"):
        parse_filter("(" * (MAX_DEPTH + 1) + "lr" + ")" * (MAX_DEPTH + 1), resolve)
    with pytest.raises(FilterError, match="nests deeper"):
        parse_filter("not " * 400 + "lr", resolve)
    with pytest.raises(FilterError, match="limited"):
        parse_filter("lr > 1 or " * 500 + "lr > 1", resolve)
    assert parse_filter("(" * MAX_DEPTH + "lr" + ")" * MAX_DEPTH, resolve)(ROWS[1].get)


RUN = {
    "run_id": 7,
    "status": "finished",
    "hparams": {"lr": 0.01, "seed": 1},
    "results": {"seed": 99, "val/acc": 0.93},
}
COLUMNS = [
    Column("status", "run", "status", 0),
    Column("lr", "hparam", "Learning rate", 1),
    Column("seed", "hparam", "seed", None),
    Column("val/acc", "result", "Accuracy (val)", 2),
]


def test_a_runs_cell_is_its_field_else_its_hparam_else_its_result():
    assert [run_cell(RUN, name) for name in ("status", "lr", "seed", "val/acc", "absent")] == [
        "finished",
        0.01,
        1,
        0.93,
        None,
    ]


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("`learning RATE` == 0.01", True),  # an alias, in any case
        ("`Accuracy (val)` > 0.95", False),
        ("seed == 1", True),  # a hidden column can be filtered on
        ('status == "finished" and `val/acc` > 0.9', True),
    ],
)
def test_run_filter_finds_columns_by_name_or_alias(text, matches):
    assert run_filter(text, COLUMNS)(RUN) is matches


def test_run_filter_names_an_unknown_column():
    with pytest.raises(FilterError, match="'hparams'"):
        run_filter("hparams == 1", COLUMNS)

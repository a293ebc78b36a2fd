"""A logged table (`LogWriter.add_table`, W&B's `Table`, MLflow's `log_table`) as the text the store
keeps: one `texts` row of kind 'table' whose content is standard JSON.

Why a text and not a table of its own: a logged table is written once and read whole (a page of
predictions, a confusion matrix), so one JSON document per call is what a reader wants, and it
travels with every copy, export and import that carries texts. The layout:
    {"columns": ["name", ...], "data": [[cell, ...], ...], "nonfinite": [[row, column], ...]}
Cells are JSON scalars. NaN and infinities are written as the strings of json_numbers.py, like all
JSON we emit, and `nonfinite` lists where they were floats, so a logged string "NaN" stays a string
and a NaN comes back as a float.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from tallyboard.json_numbers import dumps, number
from tallyboard.values import check_key, check_text

Cell = str | int | float | bool | None


def _cell(column: str, value: Any) -> Cell:
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()  # numpy scalars, 0-d tensors
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return check_text(f"a cell of column {column!r}", value)
    raise TypeError(
        f"table column {column!r}: cells must be numbers, strings, bools or None, got {type(value).__name__}"
    )


def encode(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The stored text of a table; every cell checked first (nothing half-logged)."""
    if isinstance(columns, str) or not columns:
        raise TypeError("a table needs a sequence of column names, got " + repr(columns))
    names = [check_key("table column name", name) for name in columns]
    if len(set(names)) != len(names):
        raise ValueError(f"table column names must be distinct, got {names}")
    data: list[list[Cell]] = []
    nonfinite: list[list[int]] = []
    for index, row in enumerate(rows):
        cells = list(row)
        if len(cells) != len(names):
            raise ValueError(f"table row {index} has {len(cells)} cells for {len(names)} columns")
        checked = [_cell(name, value) for name, value in zip(names, cells, strict=True)]
        for position, cell in enumerate(checked):
            if isinstance(cell, float) and not math.isfinite(cell):
                nonfinite.append([index, position])
        data.append([number(c) if isinstance(c, float) else c for c in checked])
    return check_text("table", dumps({"columns": names, "data": data, "nonfinite": nonfinite}))


def decode(content: str) -> tuple[list[str], list[list[Cell]]]:
    """(columns, rows) of a stored table, non-finite floats back as floats."""
    document = json.loads(content)
    rows: list[list[Cell]] = document["data"]
    for row, column in document.get("nonfinite", []):
        rows[row][column] = float(rows[row][column])
    return list(document["columns"]), rows

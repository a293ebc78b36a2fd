"""A typed copy of each hparam and result value, kept next to its JSON text (schema v10).

Why: the runs table of 100,000 runs is filtered and sorted by hparams and results. Stored only as
JSON text, every value had to be read into Python for that (seconds). With the value's type and
its number or lower-cased text in indexed columns, the database filters a range of an index and
walks a column's values in the runs table's order (`store/runs_sql.py`).

The columns mirror how the filter language and the runs table see a value (filter.py,
dashboard/runs_table.py), so that SQL over them selects and orders exactly the same runs:
- `value_rank`: NUMBER (0), TEXT (1), BOOL (2) are the runs table's sort tiers (numbers, then
  strings, then booleans); EMPTY_TEXT (3) and NAN (4) are the cells it sorts last with the missing
  ones; NULL is a JSON null (the filter's `null`, like a missing cell);
- `value_number`: the number (a boolean as 0 or 1, since `True == 1` in the filter), else NULL;
- `value_text`: the string, lower-cased as Python does (comparisons ignore case), else NULL.
Standard library only: the logging path writes these.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

NUMBER, TEXT, BOOL, EMPTY_TEXT, NAN = range(5)
FILLED_BELOW = EMPTY_TEXT  # ranks below it are cells with a value to sort by

TYPED_COLUMNS = ("value_rank", "value_number", "value_text")

# Writes one hparam or result (`table`) with its typed copy; a name already set is overwritten.
UPSERT_VALUE = (
    "INSERT INTO {table} (run_id, name, value, value_rank, value_number, value_text)"
    " VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value, value_rank = excluded.value_rank,"
    " value_number = excluded.value_number, value_text = excluded.value_text"
)

Typed = tuple[int | None, float | None, str | None]


def parse_value(text: Any) -> Any:
    """A stored value as Python reads it back: JSON (NaN and Infinity included), else the text."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def typed(text: Any) -> Typed:
    """(value_rank, value_number, value_text) of one stored value's JSON text."""
    value = parse_value(text)
    if value is None:
        return None, None, None
    if isinstance(value, bool):
        return BOOL, float(value), None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return NAN, None, None
        return NUMBER, float(value), None
    if value == "":
        return EMPTY_TEXT, None, ""
    return TEXT, None, str(value).lower()  # a string (or, against the schema, a list or object)


def with_types(
    rows: Sequence[tuple[int, str, str]],
) -> list[tuple[int, str, str, int | None, float | None, str | None]]:
    """(run_id, name, json_value) rows with their typed columns appended; each distinct text is
    parsed once (a sweep repeats its values)."""
    seen: dict[str, Typed] = {}
    out = []
    for run_id, name, value in rows:
        if value not in seen:
            seen[value] = typed(value)
        out.append((run_id, name, value, *seen[value]))
    return out

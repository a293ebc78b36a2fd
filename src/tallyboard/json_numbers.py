"""How a number that is not finite is written in every JSON document tallyboard emits.

JSON (RFC 8259) has no NaN or infinity; Python's `json` writes the tokens `NaN` and `Infinity`
anyway, which browsers, `jq` and most parsers reject. Training logs hold such numbers on purpose
(a diverged loss, a result that is `inf`), so dropping them to `null` would lose what happened.
The one rule, for the JSON API, `tallyboard runs --json`, `compare --json` and exports alike:

- NaN, +inf and -inf are the strings "NaN", "Infinity" and "-Infinity": the document stays
  standard JSON and nothing is lost; Python's `float()` and JavaScript's `Number()` read them back;
- `null` means that there is no value at all (nothing logged, a column not set).

Every emitter goes through `jsonable` (or `dumps`, which refuses anything the rule missed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

NAN = "NaN"
INFINITY = "Infinity"
MINUS_INFINITY = "-Infinity"


def number(value: float) -> float | str:
    """`value` itself when finite, else its string ("NaN", "Infinity", "-Infinity")."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return NAN
    return INFINITY if value > 0 else MINUS_INFINITY


def jsonable(value: Any) -> Any:
    """`value` with every non-finite float (in nested dicts, lists and tuples too) as its string;
    mapping keys become strings, as JSON's are."""
    if isinstance(value, float):
        return number(value)
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps` of `jsonable(value)`; `options` are `json.dumps`'s (indent, separators, ...)."""
    return json.dumps(jsonable(value), allow_nan=False, **options)

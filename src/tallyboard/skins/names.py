"""A peer's nested dicts as the table's names, and values as the table's values.

W&B's config and summary, and the dicts handed to `wandb.log`, nest (`{"optimizer": {"lr": 1e-3}}`);
a table column or a scalar tag is one name, so nesting becomes 'optimizer/lr': the 'split/name'
the dashboard groups by. A value that is no JSON scalar (a list, a tuple) becomes its JSON text,
because an hparam or result column holds one scalar.
"""

from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

Scalar = str | int | float | bool | None


def flat(values: Mapping[str, Any] | Namespace, prefix: str = "") -> dict[str, Any]:
    """Nested mappings (and argparse namespaces) as one level of 'a/b' names; leaves unchanged."""
    if isinstance(values, Namespace):
        values = vars(values)
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, (Mapping, Namespace)):
            out.update(flat(value, prefix=f"{name}/"))
        else:
            out[name] = value
    return out


def scalar(value: Any) -> Scalar:
    """`value` as an hparam or result holds it: JSON scalars and numpy/torch scalars as numbers,
    lists and tuples as their JSON text, anything else as its `str()`."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        item: Scalar = value.item()
        return item
    if isinstance(value, (list, tuple)):
        return json.dumps(value, default=str)
    return str(value)

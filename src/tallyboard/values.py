"""What the store can hold, checked in the caller's thread.

A value the database cannot store would otherwise fail its whole batch in the writer thread, far
from the call that caused it; these checks turn it into a clear error at the call instead.
"""

from __future__ import annotations

import json
import operator
from typing import Any

# Seconds whose milliseconds still fit the databases' 64-bit `walltime_ms` (about 290 million years).
MAX_WALLTIME = 9.2e15
# Steps and epochs are the databases' BIGINT.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def to_float(tag: str, value: Any) -> float:
    """Python numbers, numpy scalars, 1-element arrays and tensors, and numeric strings ('0.5', as
    DeepBoard's `float(value)` takes them); anything else is a TypeError."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise TypeError(f"add_scalar({tag!r}): expected a number, got the string {value!r}") from None
    if isinstance(value, (bytes, bytearray)) or not (hasattr(value, "__float__") or hasattr(value, "item")):
        raise TypeError(f"add_scalar({tag!r}): expected a number, got {type(value).__name__}")
    try:
        if hasattr(value, "item") and not isinstance(value, (int, float)):
            value = value.item()  # numpy/torch: 0-d or 1-element only, else ValueError/RuntimeError
        return float(value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(
            f"add_scalar({tag!r}): cannot log {type(value).__name__} as a scalar: {error}"
        ) from None


def to_walltime(tag: str, value: Any) -> float:
    """A walltime the user gave, checked here: a value the database cannot store would otherwise
    fail every commit of its batch in the writer thread, far from the call that caused it."""
    try:
        if isinstance(value, (str, bytes, bytearray)):
            raise TypeError("text is not a number")
        seconds = float(value)
    except (TypeError, ValueError, RuntimeError):  # e.g. a tensor of several values
        raise TypeError(
            f"add_scalar({tag!r}): walltime must be seconds as a number, got {type(value).__name__}"
        ) from None
    if not abs(seconds) <= MAX_WALLTIME:  # NaN fails this too
        raise ValueError(
            f"add_scalar({tag!r}): walltime must be finite seconds up to {MAX_WALLTIME:g}, got {seconds!r}"
        )
    return seconds


def to_int(what: str, value: Any) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}") from None
    if not INT64_MIN <= number <= INT64_MAX:
        raise ValueError(f"{what} must be a 64-bit integer, got {number}")
    return number


def json_value(name: str, value: Any) -> str:
    """An hparam/result value as JSON: JSON scalars as they are, numpy scalars as Python numbers."""
    if hasattr(value, "item") and not isinstance(value, (int, float, str, bool)):
        value = value.item() if getattr(value, "ndim", 0) == 0 else value
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise TypeError(
            f"{name!r}: values must be numbers, strings, bools or None, got {type(value).__name__}"
            " (serialise lists/dicts with json.dumps yourself to store them as text)"
        )
    return json.dumps(value)

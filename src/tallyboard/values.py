"""What the store can hold, checked in the caller's thread.

A value the database cannot store would otherwise fail its whole batch in the writer thread, far
from the call that caused it; these checks turn it into a clear error at the call instead.
"""

from __future__ import annotations

import json
import operator
from typing import Any

from tallyboard.errors import ScalarValueError

# Seconds whose milliseconds still fit the databases' 64-bit `walltime_ms` (about 290 million years).
MAX_WALLTIME = 9.2e15
# Steps and epochs are the databases' BIGINT.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Names that are keys of an index (tags, hparam and result names), in UTF-8 bytes: far below
# PostgreSQL's btree limit (2704 bytes a row), the same on both engines so a table moves freely.
MAX_KEY_BYTES = 1024
# Any other text (texts, fragments, notes, string values, CLI, run fields), in UTF-8 bytes: a
# quarter of what either engine holds in one field (SQLite 1e9 bytes, PostgreSQL 1 GiB).
MAX_TEXT_BYTES = 256 * 2**20


def check_text(what: str, value: Any, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """`value` if both engines can store it as text and give it back unchanged, else an error naming
    `what`: not a str, a lone surrogate (what `str(path)` gives for a file name that is not UTF-8),
    a NUL character (PostgreSQL text cannot hold one; refused on SQLite too, so a table copies
    between engines), or longer than `max_bytes` in UTF-8."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character (\\x00), which no store holds: {_clip(value)}")
    if len(value) * 4 > max_bytes or not value.isascii():  # ASCII text is valid UTF-8 of len bytes
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise ValueError(
                f"{what} contains a lone surrogate {value[error.start]!r} at position {error.start}, "
                f"which is not Unicode text (a file name that is not UTF-8? decode it with "
                f"errors='replace' or os.fsencode it): {_clip(value)}"
            ) from None
        if size > max_bytes:
            raise ValueError(f"{what} is {size} bytes in UTF-8; the limit is {max_bytes}: {_clip(value)}")
    return value


def check_key(what: str, value: Any) -> str:
    """A non-empty name that the store indexes (a tag, an hparam or result name): `check_text` with
    the limit of `MAX_KEY_BYTES`."""
    if isinstance(value, str) and not value:
        raise ValueError(f"{what} must not be empty")
    return check_text(what, value, MAX_KEY_BYTES)


def _clip(value: str, size: int = 60) -> str:
    """The start of a text for an error message (a 100 MB text must not become a 100 MB message)."""
    shown = value if len(value) <= size else value[:size] + "..."
    return shown.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")


def to_float(tag: str, value: Any) -> float:
    """Python numbers, numpy scalars, 1-element arrays and tensors, and numeric strings ('0.5', as
    DeepBoard's `float(value)` takes them); anything else is a `ScalarValueError` (a TypeError and
    a ValueError: see errors.py)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ScalarValueError(
                f"add_scalar({tag!r}): expected a number, got the string {_clip(value)!r}"
            ) from None
    if isinstance(value, (bytes, bytearray)) or not (hasattr(value, "__float__") or hasattr(value, "item")):
        raise ScalarValueError(f"add_scalar({tag!r}): expected a number, got {type(value).__name__}")
    try:
        if hasattr(value, "item") and not isinstance(value, (int, float)):
            value = value.item()  # numpy/torch: 0-d or 1-element only, else ValueError/RuntimeError
        return float(value)
    except OverflowError:  # e.g. 10**400: no 64-bit float holds it, and inf would be a lie
        raise ValueError(
            f"add_scalar({tag!r}): the {type(value).__name__} is beyond a 64-bit float's range (1.8e308)"
        ) from None
    except (TypeError, ValueError, RuntimeError) as error:
        raise ScalarValueError(
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
    """A step, epoch or repetition: an integer the databases' BIGINT holds; a bool is refused (True
    would silently be step 1)."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got a bool ({value})")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}") from None
    if not INT64_MIN <= number <= INT64_MAX:
        raise ValueError(f"{what} must be a 64-bit integer, got {number}")
    return number


def json_value(name: str, value: Any) -> str:
    """An hparam/result value as JSON: JSON scalars as they are, numpy scalars as Python numbers;
    a string follows `check_text`."""
    if hasattr(value, "item") and not isinstance(value, (int, float, str, bool)):
        value = value.item() if getattr(value, "ndim", 0) == 0 else value
    if isinstance(value, str):
        check_text(f"the value of {name!r}", value)
    elif value is not None and not isinstance(value, (bool, int, float)):
        raise TypeError(
            f"{name!r}: values must be numbers, strings, bools or None, got {type(value).__name__}"
            " (serialise lists/dicts with json.dumps yourself to store them as text)"
        )
    try:
        text = json.dumps(value)
    except ValueError as error:  # an int of more than 4300 digits
        raise ValueError(f"{name!r}: cannot store this value: {error}") from None
    if len(text) > MAX_TEXT_BYTES:  # ASCII: escapes can make it longer than the text was
        raise ValueError(f"{name!r}: the value is {len(text)} bytes as JSON; the limit is {MAX_TEXT_BYTES}")
    return text

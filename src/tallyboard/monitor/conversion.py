"""Arguments taken as torch's binding takes them, and handed back as the exact types it returns.

torch.monitor's pybind11 casters accept more than the type hints say (bytes for text, numpy scalars
and ``int``/``float``/``str`` subclasses for data, a ``date`` for a timestamp) and return plain
``str``, ``int``, ``float`` and ``datetime``. Code written for torch relies on both, so Event and Stat
convert the same way here, with the standard library only: numpy is never imported, its objects
are recognised by the module of their type and read through their own ``item()``.

Where torch accepts something it then mangles, this refuses it instead (docs/monitor.md lists each).
"""

from datetime import date, datetime
from typing import Any

data_value_t = str | float | int | bool
"""The type of an Event's data values (bools stay bools; torch turns them into floats)."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def text(value: object, what: str) -> str:
    """``value`` as a ``str``: str subclasses give their characters, bytes are decoded as UTF-8.

    Text that is not valid UTF-8 (undecodable bytes, a lone surrogate) is refused here, where torch
    refuses a lone surrogate too but keeps undecodable bytes and then fails on every read of them.
    """
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise TypeError(f"{what} must be UTF-8 text, not the bytes {value!r}") from None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise TypeError(f"{what} must be UTF-8 text, not {value!r} (a lone surrogate)") from None
    return str.__str__(value)  # the characters themselves, whatever a subclass's __str__ says


def data_value(value: object, key: str) -> data_value_t:
    """An Event data value as the plain ``str``, ``int`` (64 bits), ``float`` or ``bool`` torch holds."""
    if type(value).__module__ == "numpy":
        value = _numpy_value(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"Event data[{key!r}] = {value} does not fit in 64 bits")
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str | bytes):
        return text(value, f"Event data[{key!r}]")
    raise TypeError(f"Event data[{key!r}] must be str, float, int or bool, not {type(value).__name__}")


def _numpy_value(value: Any) -> object:
    """The Python value of a numpy scalar or 0-d array; anything else (an array, a complex number, a
    datetime64) is returned as it is, to be refused like any other type."""
    if getattr(value, "ndim", None) != 0:
        return value
    kind = value.dtype.kind
    if kind == "f":
        return float(value)  # the item() of a longdouble is still a numpy scalar
    if kind in "biuSU":  # bool, integers, bytes, str
        return value.item()
    return value


def timestamp(value: object) -> datetime:
    """An Event timestamp as a plain ``datetime``; a ``date`` is its midnight, as in torch.

    A timezone stays attached: torch reads an aware datetime's fields as local time and drops the
    zone, which moves the instant unless the zone is the local one.
    """
    if value.__class__ is datetime:
        return value
    if isinstance(value, datetime):
        fields = (value.year, value.month, value.day, value.hour, value.minute, value.second)
        return datetime(*fields, value.microsecond, value.tzinfo, fold=value.fold)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    raise TypeError(f"Event timestamp must be a datetime or a date, not {type(value).__name__}")

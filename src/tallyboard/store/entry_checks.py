"""A spool's journal entries from a client nobody vouches for, checked before a server applies them.

A tallyboard server accepting writes (dashboard/ingest.py) applies the entries its clients ship
(store/http_shipping.py) with the shipper's own code (`spool_shipper.Destination`). That code
trusts its input: a spool is written by our own writer, which checked every value in the caller's
thread (values.py, media.py). A client on the network may be anyone holding a write token, so
every field is checked here as strictly as the client's calls check it, and anything else is a
`BadEntry` (a 400) before a transaction starts. What a check cannot see -- which runs are the
client's -- the destination enforces: a run id in an entry is the spool's own, mapped through
the spool's runs on the server, so a client reaches no run it did not start or reopen.

The checks of records are derived from their declarations (`Batch`'s lists of named records in
store/records.py, the run row in store/run_fields.py), so a record that gains a field is checked
without a change here; what the declarations do not say (kinds, streams, PNG bytes, editable
names) is listed below.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, get_type_hints

from tallyboard.store.artifacts import SHA256
from tallyboard.store.records import TEXT_KINDS, ArtifactRow, Batch, QueuedMedia, QueuedValue, RunUpdate
from tallyboard.store.run_fields import EDITABLE_RUN_FIELDS, FIELDS
from tallyboard.store.tables import BATCH_RECORDS
from tallyboard.values import INT64_MAX, INT64_MIN, MAX_WALLTIME, check_key, check_text

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Fields whose text is a key of an index (values.check_key); other text is values.check_text's.
KEY_FIELDS = frozenset({"tag", "name"})
# ... but an image's or a text's tag may be '' (logged without one: run/logging_calls.py)
MAY_BE_EMPTY = frozenset({("media", "tag"), ("texts", "tag")})
# What the declarations leave open: the values the writer ever puts there.
CHOICES = {
    ("media", "kind"): ("image", "figure"),
    ("texts", "kind"): TEXT_KINDS,
    ("texts", "markdown"): (0, 1),
    ("console", "stream"): ("stdout", "stderr", "log"),
}
# Run fields a client may give a new run: not its id, nor the server's bookkeeping.
START_FIELDS = frozenset(FIELDS) - {"run_id", "updated_at"}
VALUE_KINDS = ("hparams", "results")


class BadEntry(ValueError):
    """An entry no client of ours would ship: what is wrong with it, for the 400 answer."""


def _int(what: str, value: Any) -> int:
    if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
        raise BadEntry(f"{what} must be a 64-bit integer, got {_shown(value)}")
    return value


def _float(what: str, value: Any) -> float:
    if type(value) not in (int, float):
        raise BadEntry(f"{what} must be a number, got {_shown(value)}")
    return float(value)


def _text(what: str, value: Any, key: bool = False) -> str:
    try:
        return check_key(what, value) if key else check_text(what, value)
    except (TypeError, ValueError) as error:
        raise BadEntry(str(error)) from None


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {str(value)[:40]!r}"


def _checked(what: str, kind: Any, value: Any, key: bool = False) -> Any:
    """`value` as the declared `kind` (int, float, str, bytes, a dict of str keys, or X | None)."""
    if getattr(kind, "__args__", None) and type(None) in kind.__args__:
        if value is None:
            return None
        (kind,) = (arg for arg in kind.__args__ if arg is not type(None))
    if kind is int:
        return _int(what, value)
    if kind is float:
        return _float(what, value)
    if kind is str:
        return _text(what, value, key)
    if kind is bytes:
        if not isinstance(value, bytes):
            raise BadEntry(f'{what} must be bytes ({{"$bytes": BASE64}}), got {_shown(value)}')
        return value
    if getattr(kind, "__origin__", None) is dict:
        if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):
            raise BadEntry(f"{what} must be an object, got {_shown(value)}")
        return value
    raise BadEntry(f"{what}: no check for {kind!r}")  # a record gained a type: add its check


def _walltime(what: str, value: float) -> float:
    if not abs(value) <= MAX_WALLTIME:
        raise BadEntry(f"{what} must be finite seconds up to {MAX_WALLTIME:g}, got {value!r}")
    return value


def _run_values(what: str, values: Any, allowed: frozenset[str]) -> dict[str, Any]:
    """Run columns and their values, each name allowed and each value of its column's type."""
    if not isinstance(values, dict):
        raise BadEntry(f"{what} must be an object of run columns, got {_shown(values)}")
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise BadEntry(f"{what}: these run columns cannot be set: {unknown[:5]}")
    checked = {}
    for name, value in values.items():
        field = FIELDS[name]
        if value is None and not field.nullable:
            raise BadEntry(f"{what}: the run column {name} cannot be null")
        checked[name] = _checked(f"{what}.{name}", field.type | None, value)
        if field.type is float and value is not None:
            _walltime(f"{what}.{name}", checked[name])
    return checked


def _json_text(what: str, value: str) -> str:
    try:
        json.loads(value)
    except ValueError:
        raise BadEntry(f"{what} must be JSON text") from None
    return value


def _is_key(name: str, field: str, value: Any) -> bool:
    return field in KEY_FIELDS and not (value == "" and (name, field) in MAY_BE_EMPTY)


def _record(name: str, row: Any, index: int) -> Any:
    """One record of the `Batch` list `name`, every field as its record declares it."""
    record: Any = BATCH_RECORDS[name]  # a NamedTuple class
    hints = get_type_hints(record)
    where = f"batch.{name}[{index}]"
    if not isinstance(row, list):
        raise BadEntry(f"{where} must be a list of {record.__name__}'s fields")
    required = len(record._fields) - len(record._field_defaults)
    if not required <= len(row) <= len(record._fields):
        raise BadEntry(f"{where} must have the fields {list(record._fields)}, got {len(row)} values")
    values = [
        _checked(f"{where}.{field}", hints[field], value, key=_is_key(name, field, value))
        for field, value in zip(record._fields, row, strict=False)  # a default may be left out
    ]
    for field, value in zip(record._fields, values, strict=False):
        allowed = CHOICES.get((name, field))
        if allowed is not None and value not in allowed:
            raise BadEntry(f"{where}.{field} must be one of {list(allowed)}, got {_shown(value)}")
        if field == "walltime":
            _walltime(f"{where}.walltime", value)
    checked: Any = record(*values)
    if isinstance(checked, QueuedMedia) and not checked.png.startswith(PNG_SIGNATURE):
        raise BadEntry(f"{where}.png is not a PNG image")
    if isinstance(checked, QueuedValue):
        _json_text(f"{where}.value", checked.value)
    if isinstance(checked, RunUpdate):
        edited = _run_values(f"{where}.values", checked.values, EDITABLE_RUN_FIELDS)
        checked = RunUpdate(checked.run_id, edited)
    return checked


def _column(what: str, values: Any, kinds: set[type], optional: bool) -> list[Any]:
    """The values of a column other than None (when `optional`), each one of `kinds`: checked a
    column at a time (a shipment holds many thousands of values; one call each would be the
    server's main cost), the first bad one named."""
    if not isinstance(values, list):
        raise BadEntry(f"{what} must be a column (a list or a packed column)")
    present = [value for value in values if value is not None] if optional and None in values else values
    strange = set(map(type, present)) - kinds
    if strange:
        bad = next(value for value in present if type(value) in strange)
        names = " or ".join(sorted(kind.__name__ for kind in kinds))
        raise BadEntry(f"{what} must hold {names}, got {_shown(bad)}")
    return present


def _int_column(what: str, values: Any, optional: bool = False) -> list[Any]:
    present = _column(what, values, {int}, optional)
    if present and not (min(present) >= INT64_MIN and max(present) <= INT64_MAX):
        raise BadEntry(f"{what} must hold 64-bit integers, got {min(present)}..{max(present)}")
    return values  # type: ignore[no-any-return]  # a list: `_column` checked it


def _float_column(what: str, values: Any, optional: bool = False, bound: float | None = None) -> list[Any]:
    present = _column(what, values, {int, float}, optional)
    if any(map(math.isnan, present)):
        raise BadEntry(f"{what}: NaN is not a value here (a NaN scalar is null)")
    if bound is not None and present and not (min(present) >= -bound and max(present) <= bound):
        raise BadEntry(f"{what} must hold finite seconds up to {bound:g}")
    return values  # type: ignore[no-any-return]


# A series of scalars: (run, tag, rep, step, epoch, walltime, value), the last five as columns.
SCALAR_COLUMNS: tuple[Callable[[str, Any], list[Any]], ...] = (
    _int_column,
    _int_column,
    lambda what, values: _int_column(what, values, optional=True),
    lambda what, values: _float_column(what, values, bound=MAX_WALLTIME),
    lambda what, values: _float_column(what, values, optional=True),
)


def _scalars(series: Any) -> list[list[Any]]:
    if not isinstance(series, list):
        raise BadEntry("batch.scalars must be a list of series")
    checked = []
    for index, item in enumerate(series):
        where = f"batch.scalars[{index}]"
        if not isinstance(item, list) or len(item) != 2 + len(SCALAR_COLUMNS):
            raise BadEntry(f"{where} must be [run, tag, reps, steps, epochs, walltimes, values]")
        run, tag, *columns = item
        cols = [
            check(f"{where}[{2 + i}]", col)
            for i, (col, check) in enumerate(zip(columns, SCALAR_COLUMNS, strict=True))
        ]
        if len({len(col) for col in cols}) != 1:
            raise BadEntry(f"{where}: its columns differ in length")
        checked.append([_int(f"{where}[0]", run), _text(f"{where}[1]", tag, key=True), *cols])
    return checked


def check_batch(fields: Any) -> dict[str, list[Any]]:
    """A batch entry's arguments (`spool.batch_to_json`'s shape, JSON decoded), checked."""
    if not isinstance(fields, dict):
        raise BadEntry("a batch must be an object of Batch lists")
    unknown = sorted(set(fields) - set(BATCH_RECORDS) - {"scalars"})
    if unknown:
        raise BadEntry(f"a batch has no lists {unknown[:5]}; it has {sorted(vars(Batch()))}")
    checked: dict[str, list[Any]] = {}
    for name, rows in fields.items():
        if name == "scalars":
            checked[name] = _scalars(rows)
            continue
        if not isinstance(rows, list):
            raise BadEntry(f"batch.{name} must be a list")
        checked[name] = [list(_record(name, row, index)) for index, row in enumerate(rows)]
    return checked


def _object(op: str, args: Any, keys: set[str], optional: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`args` if it is an object of `keys` (and of any `optional` keys: what a later client adds)."""
    if not isinstance(args, dict) or not keys <= set(args) <= keys | optional:
        extra = f", and optionally {sorted(optional)}" if optional else ""
        raise BadEntry(f"a {op} entry must be an object with exactly {sorted(keys)}{extra}")
    return args


def check_entry(op: str, args: Any) -> Any:
    """The arguments of one journal entry of operation `op`, checked (and normalised where JSON
    is looser than the records: a float field given as an int)."""
    if op == "batch":
        return check_batch(args)
    if op == "create_run":
        args = _object(op, args, {"run", "fields", "debug"}, frozenset({"rerun"}))
        fields = _run_values("create_run.fields", args["fields"], START_FIELDS)
        if "experiment" not in fields or "start_time" not in fields:
            raise BadEntry("create_run.fields must hold experiment and start_time")
        rerun = args.get("rerun", False)
        if not isinstance(args["debug"], bool) or not isinstance(rerun, bool):
            raise BadEntry("create_run.debug and create_run.rerun must be true or false")
        run = _int("create_run.run", args["run"])
        return {"run": run, "fields": fields, "debug": args["debug"], "rerun": rerun}
    if op == "attach_run":
        args = _object(op, args, {"run", "run_id"})
        return {
            "run": _int("attach_run.run", args["run"]),
            "run_id": _int("attach_run.run_id", args["run_id"]),
        }
    if op == "update_run":
        args = _object(op, args, {"run", "values"})
        values = _run_values("update_run.values", args["values"], EDITABLE_RUN_FIELDS)
        return {"run": _int("update_run.run", args["run"]), "values": values}
    if op == "change_run_tags":
        args = _object(op, args, {"run", "add", "remove"})
        lists = {}
        for key in ("add", "remove"):
            if not isinstance(args[key], list):
                raise BadEntry(f"change_run_tags.{key} must be a list of tags")
            lists[key] = [_text(f"change_run_tags.{key}", tag, key=True) for tag in args[key]]
        return {"run": _int("change_run_tags.run", args["run"]), **lists}
    if op == "put_values":
        args = _object(op, args, {"kind", "rows"})
        if args["kind"] not in VALUE_KINDS or not isinstance(args["rows"], list):
            raise BadEntry(f"put_values.kind must be one of {list(VALUE_KINDS)} and rows a list")
        rows = [list(_record(args["kind"], row, index)) for index, row in enumerate(args["rows"])]
        return {"kind": args["kind"], "rows": rows}
    if op == "add_artifact":
        hints = get_type_hints(ArtifactRow)
        if not isinstance(args, list) or len(args) != len(ArtifactRow._fields):
            raise BadEntry(f"an add_artifact entry must be the list {list(ArtifactRow._fields)}")
        row = ArtifactRow(*(
            _checked(f"add_artifact.{f}", hints[f], v, key=f == "name")
            for f, v in zip(ArtifactRow._fields, args, strict=True)
        ))  # fmt: skip
        if SHA256.fullmatch(row.sha256) is None or row.size < 0:
            raise BadEntry("add_artifact.sha256 must be 64 lowercase hex digits and its size 0 or more")
        return list(row)
    raise BadEntry(f"unknown entry {op!r}")

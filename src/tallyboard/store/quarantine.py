"""Records the database rejected, and how the sink finds them in a batch.

Every record is checked at the call (values.py), so a batch should never fail for its data. When
one does anyway (a trigger or constraint a user added, a limit of an engine we did not foresee),
holding the batch back would hold back every run logging to that database, forever: the same data
fails the same way every time. So the sink splits the failed batch in halves until each rejected
record is alone, writes everything else, and sets each rejected record aside in the `quarantine`
table: losslessly, as JSON, so nothing logged is lost and it can be inspected or replayed.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import fields
from functools import partial
from typing import Any

from tallyboard.store.histograms import from_columns
from tallyboard.store.records import (
    Batch,
    Quarantined,
    QueuedEnvironment,
    QueuedHistogram,
    QueuedLine,
    QueuedMedia,
    QueuedRepetition,
    QueuedText,
    QueuedValue,
    RunUpdate,
    ScalarRow,
)

# Batch lists in the order `Store._write` applies them, so two halves written one after the other
# apply the records in the same order as the whole batch would have.
_LISTS = tuple(f.name for f in fields(Batch))


def halves(batch: Batch) -> tuple[Batch, Batch] | None:
    """`batch` split in two, first half first; None when it is one record (a scalar series is split
    by its rows, so one bad scalar among a million is found in 20 splits)."""
    entries = _entries(batch)
    if len(entries) > 1:
        middle = len(entries) // 2
        return _batch(entries[:middle]), _batch(entries[middle:])
    if entries and entries[0][0] == "scalars" and len(entries[0][1][2]) > 1:
        run_id, tag, rows = entries[0][1]
        middle = len(rows) // 2
        return Batch(scalars=[(run_id, tag, rows[:middle])]), Batch(scalars=[(run_id, tag, rows[middle:])])
    return None


def _entries(batch: Batch) -> list[tuple[str, Any]]:
    return [(name, item) for name in _LISTS for item in getattr(batch, name)]


def _batch(entries: list[tuple[str, Any]]) -> Batch:
    batch = Batch()
    for name, item in entries:
        getattr(batch, name).append(item)
    return batch


def describe(batch: Batch, error: BaseException) -> Quarantined:
    """The quarantine row of a batch of one record (see `halves`) that failed with `error`."""
    ((name, item),) = _entries(batch)
    run_id, kind, tag, record = DESCRIBERS[name](item)
    return Quarantined(
        None, run_id, kind, None if tag is None else storable(tag), storable(str(error)),
        record_json(record), time.time(),
    )  # fmt: skip


# A record as the quarantine keeps it: (run_id, kind, tag or None, the record's other fields).
Described = tuple[int, str, str | None, dict[str, Any]]


def _scalar(series: tuple[int, str, list[ScalarRow]]) -> Described:
    run_id, tag, ((rep, step, epoch, walltime, value),) = series
    record = {"rep": rep, "step": step, "epoch": epoch, "walltime": walltime, "value": value}
    return run_id, "scalar", tag, record


def _media(row: QueuedMedia) -> Described:
    run_id, tag, rep, step, epoch, walltime, kind, width, height, png = row
    record = {"rep": rep, "step": step, "epoch": epoch, "walltime": walltime, "width": width,
              "height": height, "png_base64": base64.b64encode(png).decode("ascii")}  # fmt: skip
    return run_id, kind, tag, record


def _text(row: QueuedText) -> Described:
    run_id, tag, rep, step, epoch, walltime, kind, content, *markdown = row
    record = {"rep": rep, "step": step, "epoch": epoch, "walltime": walltime, "content": content}
    record["markdown"] = markdown[0] if markdown else 0
    return run_id, kind, tag, record


def _histogram(row: QueuedHistogram) -> Described:
    run_id, tag, rep, step, epoch, walltime, *stats = row
    record = {"rep": rep, "step": step, "epoch": epoch, "walltime": walltime}
    histogram = from_columns(stats)
    record.update({name: getattr(histogram, name) for name in histogram.__slots__})
    return run_id, "histogram", tag, record


def _console(row: QueuedLine) -> Described:
    run_id, rep, walltime, stream, line = row
    return run_id, "console", stream, {"rep": rep, "walltime": walltime, "line": line}


def _environment(row: QueuedEnvironment) -> Described:
    run_id, content = row
    return run_id, "environment", None, {"content": content}


def _value(kind: str, row: QueuedValue) -> Described:
    run_id, name, value = row
    return run_id, kind, name, {"name": name, "value": value}


def _repetition(row: QueuedRepetition) -> Described:
    run_id, rep, start_time = row
    return run_id, "repetition", None, {"rep": rep, "start_time": start_time}


def _run_update(row: RunUpdate) -> Described:
    run_id, values = row
    return run_id, "run_update", None, dict(values)


# How each `Batch` list's record is kept (tests/store/test_tables.py: one for every list).
DESCRIBERS: dict[str, Callable[[Any], Described]] = {
    "scalars": _scalar,
    "media": _media,
    "texts": _text,
    "histograms": _histogram,
    "hparams": partial(_value, "hparam"),
    "results": partial(_value, "result"),
    "repetitions": _repetition,
    "console": _console,
    "environments": _environment,
    "run_updates": _run_update,
}


def record_json(record: dict[str, Any]) -> str:
    """JSON that `json.loads` turns back into `record` exactly, and that any engine stores: ASCII
    only (a lone surrogate or a NUL becomes a \\u escape), NaN and infinities as JSON's extended
    tokens, integers of any size (one the check would have refused may be what failed); an object
    JSON has no type for (which the checks never let through) as its repr."""
    try:
        return json.dumps(record, ensure_ascii=True, default=repr)
    except ValueError:  # an integer longer than int -> str conversion allows: keep it as hex
        return json.dumps(
            {key: _hex_if_huge(value) for key, value in record.items()}, ensure_ascii=True, default=repr
        )


def _hex_if_huge(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3000:
        return {"int_hex": hex(value)}
    return value


def storable(text: str) -> str:
    """`text` made storable in a text column for display (the lossless copy is in `record`):
    lone surrogates and NUL become backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")

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
from dataclasses import fields
from typing import Any

from tallyboard.store.histograms import from_columns
from tallyboard.store.records import Batch, Quarantined

# Batch lists in the order `Store._write` applies them, so two halves written one after the other
# apply the records in the same order as the whole batch would have.
_LISTS = tuple(f.name for f in fields(Batch))


def halves(batch: Batch) -> tuple[Batch, Batch] | None:
    """`batch` split in two, first half first; None when it is one record (a scalar series is split
    by its rows, so one bad scalar among a million is found in 20 splits)."""
    entries = [(name, item) for name in _LISTS for item in getattr(batch, name)]
    if len(entries) > 1:
        middle = len(entries) // 2
        return _batch(entries[:middle]), _batch(entries[middle:])
    if entries and entries[0][0] == "scalars" and len(entries[0][1][2]) > 1:
        run_id, tag, rows = entries[0][1]
        middle = len(rows) // 2
        return Batch(scalars=[(run_id, tag, rows[:middle])]), Batch(scalars=[(run_id, tag, rows[middle:])])
    return None


def _batch(entries: list[tuple[str, Any]]) -> Batch:
    batch = Batch()
    for name, item in entries:
        getattr(batch, name).append(item)
    return batch


def describe(batch: Batch, error: BaseException) -> Quarantined:
    """The quarantine row of a batch of one record (see `halves`) that failed with `error`."""
    if batch.scalars:
        run_id, tag, ((rep, step, epoch, walltime, value),) = batch.scalars[0]
        record: dict[str, Any] = {"rep": rep, "step": step, "epoch": epoch, "walltime": walltime}
        record["value"] = value
        return _row(run_id, "scalar", tag, error, record)
    if batch.media:
        run_id, tag, rep, step, epoch, walltime, kind, width, height, png = batch.media[0]
        record = {"rep": rep, "step": step, "epoch": epoch, "walltime": walltime, "width": width,
                  "height": height, "png_base64": base64.b64encode(png).decode("ascii")}  # fmt: skip
        return _row(run_id, kind, tag, error, record)
    if batch.texts:
        run_id, tag, rep, step, epoch, walltime, kind, content, *markdown = batch.texts[0]
        record = {"rep": rep, "step": step, "epoch": epoch, "walltime": walltime, "content": content}
        record["markdown"] = markdown[0] if markdown else 0
        return _row(run_id, kind, tag, error, record)
    if batch.histograms:
        run_id, tag, rep, step, epoch, walltime, *stats = batch.histograms[0]
        record = {"rep": rep, "step": step, "epoch": epoch, "walltime": walltime}
        histogram = from_columns(stats)
        record.update({name: getattr(histogram, name) for name in histogram.__slots__})
        return _row(run_id, "histogram", tag, error, record)
    if batch.console:
        run_id, rep, walltime, stream, line = batch.console[0]
        return _row(run_id, "console", stream, error, {"rep": rep, "walltime": walltime, "line": line})
    if batch.environments:
        run_id, content = batch.environments[0]
        return _row(run_id, "environment", None, error, {"content": content})
    for name in ("hparams", "results"):
        for run_id, key, value in getattr(batch, name):
            return _row(run_id, name[:-1], key, error, {"name": key, "value": value})
    if batch.repetitions:
        run_id, rep, start_time = batch.repetitions[0]
        return _row(run_id, "repetition", None, error, {"rep": rep, "start_time": start_time})
    run_id, values = batch.run_updates[0]
    return _row(run_id, "run_update", None, error, dict(values))


def _row(
    run_id: int, kind: str, tag: str | None, error: BaseException, record: dict[str, Any]
) -> Quarantined:
    return Quarantined(
        None, run_id, kind, None if tag is None else storable(tag), storable(str(error)),
        record_json(record), time.time(),
    )  # fmt: skip


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

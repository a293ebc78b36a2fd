"""Reading a scalar series from its blocks: the one range scan every reader of points shares.

Why one module: `get_scalar`, the query API, the dashboard, export and copy all read the points of
a series in step order, from some step to some other. Because the blocks of a series never overlap
and are keyed by `first_step` (schema v14), that is one index range scan from the block holding
the first step asked for, read a page of blocks at a time (bounded memory: a page is at most
`PAGE_BLOCKS` blocks of decoded points), each block decoded by store/block_codec.py and cut to the
range. `read` is whatever runs a statement for the caller (the store's `execute` under its lock, or
a dashboard reader connection), so the SQL is written once.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tallyboard.store.block_codec import Points, unpack, unsqueezed, value_or_none
from tallyboard.store.records import NO_EPOCH

Read = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
SeriesId = tuple[int, int, int]  # (run_id, tag_id, rep)
PAGE_BLOCKS = 64  # blocks per statement: some 64,000 points decoded at a time
KEY = "run_id = ? AND tag_id = ? AND rep = ?"
DATA = "step_data, walltime_data, value_data, epoch_data"
# The first block a read from step `lo` needs: the one holding `lo`, or the one before it when `lo` is
# in a gap (cut away whole), or the first (when `lo` comes before the series' first step).
FROM_STEP = (
    f"first_step >= COALESCE((SELECT MAX(first_step) FROM scalar_blocks WHERE {KEY} AND first_step <= ?), ?)"
)


def cut(points: Points, lo: int | None, hi: int | None) -> Points:
    """The points of a decoded block with lo <= step <= hi (None: open)."""
    steps = points.steps
    start = 0 if lo is None or steps[0] >= lo else bisect_left(steps, lo)
    stop = len(steps) if hi is None or steps[-1] <= hi else bisect_right(steps, hi)
    if start == 0 and stop == len(steps):
        return points
    steps, epochs, walltimes, values = points
    return Points(steps[start:stop], epochs[start:stop], walltimes[start:stop], values[start:stop])


def blocks(read: Read, key: SeriesId, lo: int | None = None, hi: int | None = None) -> Iterator[Points]:
    """The decoded blocks of a series with a point in [lo, hi], in step order, each cut to it."""
    sql, params = f"SELECT first_step, {DATA} FROM scalar_blocks WHERE {KEY}", list(key)
    if lo is not None:
        sql, params = f"{sql} AND {FROM_STEP}", [*params, *key, lo, lo]
    if hi is not None:
        sql, params = f"{sql} AND first_step <= ?", [*params, hi]
    after: list[Any] = []
    while True:
        page = read(
            f"{sql}{' AND first_step > ?' if after else ''} ORDER BY first_step LIMIT {PAGE_BLOCKS}",
            [*params, *after],
        )
        for _, *data in page:
            points = cut(unpack(*data), lo, hi)
            if points.steps:
                yield points
        if len(page) < PAGE_BLOCKS:
            return
        after = [page[-1][0]]


def rows(points: Points) -> Iterator[tuple[int, int | None, int, float | None]]:
    """(step, epoch, walltime_ms, value) rows of a block, value None for NaN (as rows had it)."""
    return zip(
        points.steps, points.epochs, points.walltimes_ms, map(value_or_none, points.values), strict=True
    )


def points(
    read: Read, key: SeriesId, lo: int | None = None, hi: int | None = None, limit: int | None = None
) -> list[tuple[int, int | None, int, float | None]]:
    """The (step, epoch, walltime_ms, value) rows of a series with lo <= step <= hi, at most `limit`."""
    out: list[tuple[int, int | None, int, float | None]] = []
    for block in blocks(read, key, lo, hi):
        out.extend(rows(block))
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


def last_block(read: Read, key: SeriesId, columns: str = DATA) -> tuple[Any, ...] | None:
    """`columns` of the series' last block (one index seek), None for a series without blocks."""
    found = read(
        f"SELECT {columns} FROM scalar_blocks WHERE {KEY} ORDER BY first_step DESC LIMIT 1", list(key)
    )
    return found[0] if found else None


def arrays(blocks: Sequence[tuple[Any, ...]], columns: Sequence[str]) -> dict[str, Any]:
    """{column: numpy array} of blocks given as (rep, step_data, walltime_data, value_data,
    epoch_data) rows in order: 'rep', 'step', 'epoch' (int64, -1 where none), 'walltime_ms'
    (int64), 'value' (float64, NaN as logged). Values are one `np.frombuffer` per block; integer
    columns are inflated and summed by numpy (int64 deltas, as block_codec packs them)."""
    import numpy as np

    def integers(data: bytes) -> Any:
        raw = np.frombuffer(unsqueezed(data), dtype="<i8")
        return raw if data[:1].isupper() else np.cumsum(raw)

    parts: dict[str, list[Any]] = {name: [] for name in columns}
    for rep, step_data, walltime_data, value_data, epoch_data in blocks:
        values = np.frombuffer(value_data, dtype="<f8")
        for name in columns:
            if name == "value":
                parts[name].append(values)
            elif name == "rep":
                parts[name].append(np.full(len(values), rep, dtype=np.int64))
            elif name == "step":
                parts[name].append(integers(step_data))
            elif name == "walltime_ms":
                parts[name].append(integers(walltime_data))
            elif epoch_data is None:
                parts[name].append(np.full(len(values), -1, dtype=np.int64))
            else:
                epochs = np.frombuffer(unsqueezed(epoch_data), dtype="<i8")
                parts[name].append(np.where(epochs == NO_EPOCH, -1, epochs))
    empty = {"value": np.float64}
    return {
        name: np.concatenate(found).astype(empty.get(name, np.int64), copy=False)
        if found
        else np.array([], empty.get(name, np.int64))
        for name, found in parts.items()
    }

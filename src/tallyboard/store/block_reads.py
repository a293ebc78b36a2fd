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


def arrays(blocks: Sequence[tuple[Any, ...]], columns: Sequence[str], no_epoch: int = -1) -> dict[str, Any]:
    """{column: numpy array} of blocks given as (rep, step_data, walltime_data, value_data,
    epoch_data) rows in order: 'rep', 'step', 'epoch' (int64, `no_epoch` where none), 'walltime_ms'
    (int64), 'value' (float64, NaN as logged).

    Each column of all the blocks is joined into one buffer and decoded by a handful of numpy
    calls, whatever the number of blocks: numpy's cost per call, not per point, is what a few
    hundred blocks of a thousand points cost when decoded one at a time (3x as long)."""
    import numpy as np

    counts = [len(value_data) // 8 for _, _, _, value_data, _ in blocks]
    found: dict[str, Any] = {}
    for name in columns:
        if name == "value":
            found[name] = np.frombuffer(b"".join(block[3] for block in blocks), dtype="<f8")
        elif name == "rep":
            found[name] = np.repeat(np.array([block[0] for block in blocks], dtype=np.int64), counts)
        elif name in ("step", "walltime_ms"):
            found[name] = _integers(np, [block[1 if name == "step" else 2] for block in blocks], counts)
        else:
            none = NO_EPOCH.to_bytes(8, "little", signed=True)
            epoch_data = (block[4] for block in blocks)
            data = (none * n if e is None else unsqueezed(e) for e, n in zip(epoch_data, counts, strict=True))
            epochs = np.frombuffer(b"".join(data), dtype="<i8")
            found[name] = np.where(epochs == NO_EPOCH, no_epoch, epochs)
    kinds = {"value": np.float64}
    return {name: found[name].astype(kinds.get(name, np.int64), copy=False) for name in columns}


def _integers(np: Any, columns: Sequence[bytes], counts: Sequence[int]) -> Any:
    """The int64 numbers of some blocks' integer columns (block_codec.pack_deltas), in order.

    Deltas are summed once over all the blocks; each block's first number is absolute, so the
    running sum of the blocks before it is taken off again. int64 sums wrap past its range and the
    subtraction wraps back: modulo 2**64 every number that fits an int64 comes out exact."""
    raw = np.frombuffer(b"".join(unsqueezed(data) for data in columns), dtype="<i8")
    if not len(raw):
        return raw
    stored = [data[:1].isupper() for data in columns]  # numbers as they are, not deltas: rare
    absolute = np.repeat(np.array(stored), counts) if any(stored) else None
    with np.errstate(over="ignore"):
        summed = np.cumsum(raw if absolute is None else np.where(absolute, 0, raw))
        ends = np.cumsum(counts)
        summed -= np.repeat(np.r_[0, summed[ends[:-1] - 1]], counts)
    return summed if absolute is None else np.where(absolute, raw, summed)

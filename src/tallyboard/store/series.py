"""Reading logged series in bulk, for the query API (tallyboard/query.py): SQL only, named records out.

Why pages per series: a series is one range of `scalar_blocks` keys, read a page of blocks at a
time (store/block_reads.py), so a query of ten million points never has more than a chunk of
points and a page of blocks in memory. A chunk never spans two series, so its run, tag and
repetition are stated once and its points come as columns (`SeriesChunk`), ready to become typed
arrays.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from tallyboard.store import block_reads
from tallyboard.store.base import Store
from tallyboard.store.block_codec import Points, unpack
from tallyboard.values import check_text

DEFAULT_CHUNK_ROWS = 100_000


class SeriesKey(NamedTuple):
    """One logged series: a tag of a repetition of a run."""

    run_id: int
    tag_id: int
    tag: str
    rep: int


class SeriesChunk(NamedTuple):
    """Consecutive points of one series as columns: `epochs` hold None where none was given,
    `walltimes` are seconds since the repetition started, `values` NaN where NaN was logged."""

    run_id: int
    tag: str
    rep: int
    steps: Sequence[int]
    epochs: Sequence[int | None]
    walltimes: Sequence[float]
    values: Sequence[float]


class SeriesSummary(NamedTuple):
    """The end of one series: its last step and value, and min, max and mean of its last `points`
    points (`last_n`, or fewer in a shorter series; NaN points are skipped, NaN when all are)."""

    run_id: int
    tag: str
    rep: int
    points: int
    last_step: int
    last: float
    min: float
    max: float
    mean: float


def _select(store: Store, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    return store.execute(sql, params)


def _marks(items: Sequence[object]) -> str:
    return ", ".join("?" * len(items))


def series_keys(
    store: Store, run_ids: Sequence[int], tags: Sequence[str] | None = None, reps: Sequence[int] | None = None
) -> list[SeriesKey]:
    """The series of these runs (of these tags and repetitions; None = all), ordered by run, tag
    name and repetition. Read from `scalar_blocks`, which has a row per block of points, not per point."""
    if not run_ids or tags == [] or reps == []:
        return []
    sql = (
        "SELECT DISTINCT b.run_id, b.tag_id, t.name, b.rep"
        " FROM scalar_blocks b JOIN tags t ON t.tag_id = b.tag_id"
        f" WHERE b.run_id IN ({_marks(run_ids)})"
    )
    params: list[object] = list(run_ids)
    if tags is not None:
        sql += f" AND t.name IN ({_marks(tags)})"
        params += [check_text("a tag", tag) for tag in tags]
    if reps is not None:
        sql += f" AND b.rep IN ({_marks(reps)})"
        params += list(reps)
    rows = _select(store, sql + " ORDER BY b.run_id, t.name, b.rep", params)
    return [SeriesKey(*row) for row in rows]


class _Columns:
    """Points gathered into a chunk's columns."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.epochs: list[int | None] = []
        self.walltimes_ms: list[int] = []
        self.values: list[float] = []

    def __len__(self) -> int:
        return len(self.steps)

    def append(self, point: tuple[Any, ...]) -> None:
        step, epoch, walltime_ms, value = point
        self.steps.append(step)
        self.epochs.append(epoch)
        self.walltimes_ms.append(walltime_ms)
        self.values.append(value)

    def extend(self, points: Points) -> None:
        self.steps += points.steps
        self.epochs += points.epochs
        self.walltimes_ms += points.walltimes_ms
        self.values += points.values

    def take(self, key: SeriesKey, count: int) -> SeriesChunk:
        """The first `count` points as a chunk of `key`, taken out."""
        chunk = SeriesChunk(
            key.run_id,
            key.tag,
            key.rep,
            self.steps[:count],
            self.epochs[:count],
            [ms / 1000 for ms in self.walltimes_ms[:count]],
            self.values[:count],
        )
        for column in (self.steps, self.epochs, self.walltimes_ms, self.values):
            del column[:count]
        return chunk


def _range(step_range: tuple[int | None, int | None] | None) -> tuple[int | None, int | None]:
    low, high = step_range if step_range is not None else (None, None)
    return (None if low is None else int(low)), (None if high is None else int(high))


def _read(store: Store) -> block_reads.Read:
    return lambda sql, params: _select(store, sql, params)


def iter_chunks(
    store: Store,
    keys: Sequence[SeriesKey],
    step_range: tuple[int | None, int | None] | None = None,
    downsample: int | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator[SeriesChunk]:
    """The points of each series in step order, at most `chunk_rows` per chunk. With `downsample`
    = n, a longer series is cut into n equal step buckets and each gives its last point."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be 1 or more, got {chunk_rows}")
    if downsample is not None and downsample < 1:
        raise ValueError(f"downsample must be 1 or more, got {downsample}")
    lo, hi = _range(step_range)
    for key in keys:
        where = (key.run_id, key.tag_id, key.rep)
        if downsample is not None:
            columns = _downsampled(store, where, lo, hi, downsample)
            while len(columns):
                yield columns.take(key, chunk_rows)
            continue
        columns = _Columns()
        for points in block_reads.blocks(_read(store), where, lo, hi):
            columns.extend(points)
            while len(columns) >= chunk_rows:
                yield columns.take(key, chunk_rows)
        if len(columns):
            yield columns.take(key, len(columns))


def _downsampled(
    store: Store, where: tuple[int, int, int], lo: int | None, hi: int | None, buckets: int
) -> _Columns:
    """The last point of each of `buckets` equal step buckets over the series' points in [lo, hi]
    (every point when there are no more than `buckets`): two passes over the blocks, so memory
    holds one page of blocks and the answer."""
    first = last = None
    count = 0
    for points in block_reads.blocks(_read(store), where, lo, hi):
        first = points.steps[0] if first is None else first
        last = points.steps[-1]
        count += len(points.steps)
    out = _Columns()
    if first is None or last is None:
        return out
    width = 1 if count <= buckets else -(-(last - first + 1) // buckets)  # ceil: covers [first, last]
    pending: tuple[Any, ...] | None = None
    for points in block_reads.blocks(_read(store), where, lo, hi):
        for point in zip(*points, strict=True):
            if pending is not None and (point[0] - first) // width != (pending[0] - first) // width:
                out.append(pending)
            pending = point
    if pending is not None:
        out.append(pending)
    return out


def summaries(store: Store, keys: Sequence[SeriesKey], last_n: int) -> list[SeriesSummary]:
    """A `SeriesSummary` per series from its last blocks, read from the end until they hold
    `last_n` points, so the cost does not grow with the series' length."""
    if last_n < 1:
        raise ValueError(f"last_n must be 1 or more, got {last_n}")
    sql = (
        f"SELECT first_step, {block_reads.DATA} FROM scalar_blocks WHERE {block_reads.KEY}"
        " AND first_step < ? ORDER BY first_step DESC LIMIT 8"
    )
    out = []
    for key in keys:
        where = (key.run_id, key.tag_id, key.rep)
        tail: list[float] = []
        last_step, before = None, 2**63 - 1
        while len(tail) < last_n:
            page = _select(store, sql, (*where, before))
            for _, *data in page:
                points = unpack(*data)
                last_step = points.steps[-1] if last_step is None else last_step
                tail[:0] = points.values[-(last_n - len(tail)) :]
                if len(tail) >= last_n:
                    break
            if len(page) < 8:
                break
            before = page[-1][0]
        if last_step is None:
            continue
        finite = [value for value in tail if value == value]
        figures = (
            tail[-1],
            min(finite, default=math.nan),
            max(finite, default=math.nan),
            math.fsum(finite) / len(finite) if finite else math.nan,
        )
        out.append(SeriesSummary(key.run_id, key.tag, key.rep, len(tail), last_step, *figures))
    return out


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)

"""Server-side downsampling: a series of any length becomes about one bucket per pixel.

Why: a chart is a few hundred pixels wide, so shipping a million points (what DeepBoard does on
every refresh) costs megabytes and seconds for nothing a screen can show. Each bucket keeps its
minimum, maximum and last point, so a spike survives as the band around the line; random
sampling (TensorBoard's reservoir) would drop it. Zooming asks again for a narrower step range,
which comes back at full resolution once it holds no more than two points per pixel.

A long series is read once, in one pass over its points (`DashboardQueries.buckets`), into a
summary of ~2,048 blocks (min, max and last point per block, in compact arrays); later requests
at any width, and live growth, are answered from the summary (and the few new blocks), not by
scanning the million rows again. Requests finer than the summary (deep zooms) read the range
itself, which is then small.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tallyboard.store.queries import DashboardQueries, SeriesKey

MAX_WIDTH = 4000  # buckets; a 4K screen
DEFAULT_WIDTH = 800
SUMMARY_BLOCKS = 2048  # blocks per summary; a request uses it when a bucket spans >= 2 blocks
MIN_BLOCKS_PER_BUCKET = 2
SUMMARIES_KEPT = 64  # series; about 115 kB each, so the cache stays near 7 MB
PARALLEL_READS = 4  # parts of a long first read; as many as the store's connection pool holds
NO_EPOCH = -1.0  # epochs are never negative; stands for "no epoch" in the float array


@dataclass
class Series:
    """Columns of one (possibly downsampled) series, ready for JSON."""

    step: list[int] = field(default_factory=list)
    epoch: list[int | None] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)  # seconds since the repetition started
    value: list[float | None] = field(default_factory=list)
    low: list[float | None] = field(default_factory=list)
    high: list[float | None] = field(default_factory=list)
    bucket: int = 1  # steps per bucket; 1 = raw points

    def add(self, row: tuple) -> None:
        """Append a (step, epoch, walltime_ms, value, low, high) row."""
        step, epoch, wall_ms, value, low, high = row
        self.step.append(step)
        self.epoch.append(epoch)
        self.wall.append(wall_ms / 1000.0)
        self.value.append(value)
        self.low.append(low)
        self.high.append(high)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "epoch": self.epoch,
            "wall": self.wall,
            "value": [_finite(v) for v in self.value],
            "min": [_finite(v) for v in self.low],
            "max": [_finite(v) for v in self.high],
            "bucket": self.bucket,
        }


def _finite(value: float | None) -> float | str | None:
    """JSON has no NaN or infinity: NaN (stored as NULL) is null, infinities are strings."""
    if value is None or math.isfinite(value):
        return value
    return None if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def bucket_width(lo: int, hi: int, width: int) -> int:
    """Steps per bucket so that [lo, hi] fits in at most `width` buckets."""
    return max(1, math.ceil((hi - lo + 1) / width))


class _Summary:
    """Min, max and last point per block of `block` steps (blocks at multiples of `block`)."""

    def __init__(self, block: int) -> None:
        self.block = block
        self.index = array("q")  # block number = step // block
        self.step = array("q")  # last step in the block
        self.epoch = array("d")
        self.wall = array("d")  # ms
        self.value = array("d")
        self.low = array("d")
        self.high = array("d")
        self.covered = -(2**62)  # last step read

    def extend(
        self,
        queries: DashboardQueries,
        key: SeriesKey,
        first_step: int,
        last_step: int,
        pool: ThreadPoolExecutor,
    ) -> None:
        """Read the blocks from the one holding `covered` (it may have grown) up to `last_step`.

        A long read is split into parts read in parallel on the store's pooled connections (the
        database drivers release the GIL while a query runs), so a first view scales with cores."""
        start = max(self.covered, first_step) // self.block
        while self.index and self.index[-1] >= start:
            for column in (self.index, self.step, self.epoch, self.wall, self.value, self.low, self.high):
                column.pop()
        count = last_step // self.block - start + 1
        parts = PARALLEL_READS if count >= SUMMARY_BLOCKS // 4 else 1
        size = math.ceil(count / parts)
        firsts = range(start, start + count, size)
        reads = pool.map(
            lambda first: queries.buckets(
                key, first * self.block, self.block, min(size, start + count - first)
            ),
            firsts,
        )
        nan = math.nan
        for step, epoch, wall_ms, value, low, high in (row for rows in reads for row in rows):
            self.index.append(step // self.block)
            self.step.append(step)
            self.epoch.append(NO_EPOCH if epoch is None else epoch)
            self.wall.append(wall_ms)
            self.value.append(nan if value is None else value)
            self.low.append(nan if low is None else low)
            self.high.append(nan if high is None else high)
        self.covered = last_step

    def answer(self, lo: int, hi: int, span: int) -> Series:
        """Merge blocks into buckets of `span` steps from `lo` (a block goes where it starts)."""
        out = Series(bucket=span)
        current = None
        for i, block in enumerate(self.index):
            start = block * self.block
            if self.step[i] < lo or start > hi:
                continue
            bucket = (max(start, lo) - lo) // span
            low, high = _none(self.low[i]), _none(self.high[i])
            if bucket != current:
                current = bucket
                out.add((self.step[i], self._epoch(i), self.wall[i], _none(self.value[i]), low, high))
                continue
            out.step[-1], out.epoch[-1], out.wall[-1] = self.step[i], self._epoch(i), self.wall[i] / 1000.0
            out.value[-1] = _none(self.value[i])
            out.low[-1] = _pick(min, out.low[-1], low)
            out.high[-1] = _pick(max, out.high[-1], high)
        return out

    def _epoch(self, i: int) -> int | None:
        return None if self.epoch[i] == NO_EPOCH else int(self.epoch[i])


def _none(value: float) -> float | None:
    return None if math.isnan(value) else value


def _pick(choose, a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return b if a is None else a
    return choose(a, b)


class Downsampler:
    """Reads series through the store at pixel resolution, keeping summaries of long series."""

    def __init__(self, queries: DashboardQueries) -> None:
        self.queries = queries
        self._summaries: OrderedDict[SeriesKey, _Summary] = OrderedDict()
        self._lock = threading.Lock()
        self._readers = ThreadPoolExecutor(PARALLEL_READS, thread_name_prefix="tallyboard-summary")

    def series(self, key: SeriesKey, lo: int, hi: int, width: int, first_step: int, last_step: int) -> Series:
        """The points of `key` with lo <= step <= hi at `width` buckets (raw when they fit).
        `first_step`/`last_step` are the series' own bounds (they tell growth and length)."""
        width = max(1, min(width, MAX_WIDTH))
        span = bucket_width(lo, hi, width)
        if span <= 2:  # at most two steps per pixel: every point fits
            return _raw(self.queries.points(key, lo, hi))
        block = max(1, math.ceil((last_step - first_step + 1) / SUMMARY_BLOCKS))
        if span < MIN_BLOCKS_PER_BUCKET * block or last_step - first_step < SUMMARY_BLOCKS:
            out = Series(bucket=span)
            for row in self.queries.buckets(key, lo, span, math.ceil((hi - lo + 1) / span)):
                out.add(row)
            return out
        return self._summary(key, block, first_step, last_step).answer(lo, hi, span)

    def _summary(self, key: SeriesKey, block: int, first_step: int, last_step: int) -> _Summary:
        with self._lock:
            summary = self._summaries.get(key)
            if summary is None or block > 2 * summary.block:  # new, or the series outgrew it
                summary = self._summaries[key] = _Summary(block)
            self._summaries.move_to_end(key)
            while len(self._summaries) > SUMMARIES_KEPT:
                self._summaries.popitem(last=False)
            if summary.covered < last_step:
                summary.extend(self.queries, key, first_step, last_step, self._readers)
            return summary


def raw_after(queries: DashboardQueries, key: SeriesKey, after: int, limit: int) -> tuple[Series, bool]:
    """Points after a step (live updates), at most `limit`; True when more are waiting."""
    rows = queries.points(key, after + 1, 2**62, limit=limit + 1)
    return _raw(rows[:limit]), len(rows) > limit


def _raw(rows: list[tuple]) -> Series:
    out = Series()
    for step, epoch, wall_ms, value in rows:
        out.add((step, epoch, wall_ms, value, value, value))
    return out

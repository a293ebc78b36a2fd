"""Server-side downsampling: a series of any length becomes about one bucket per pixel.

Why: a chart is a few hundred pixels wide, so shipping a million points (what DeepBoard does on
every refresh) costs megabytes and seconds for nothing a screen can show. Each bucket keeps its
minimum, maximum and last point, so a spike survives as the band around the line; random
sampling (TensorBoard's reservoir) would drop it. Zooming asks again for a narrower step range,
which comes back at full resolution once it holds no more than two points per pixel.

Buckets are exact (the MIN, MAX and last row of their steps) and cheap however long the series:
once a bucket would span half a `scalar_blocks` block or more, its width is rounded up to whole
blocks and the buckets are laid on block boundaries (`grid`), so `DashboardQueries.buckets` reads
one summary row per 256 steps and only the two blocks cut by the ends of the range from the
points themselves. The price is at most half the asked resolution (a bucket of 300 steps becomes
one of 512). Narrower buckets read their range directly, which is then under 128 steps a bucket.
Nothing is cached: the writer keeps the block summaries up to date in the store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from tallyboard.json_numbers import NAN, number
from tallyboard.store.dashboard_reads import DashboardQueries, SeriesKey
from tallyboard.store.schema import BLOCK_BITS, BLOCK_STEPS

MAX_WIDTH = 4000  # buckets; a 4K screen
DEFAULT_WIDTH = 800


@dataclass
class Series:
    """Columns of one (possibly downsampled) series, ready for JSON."""

    step: list[int] = field(default_factory=list)
    epoch: list[int | None] = field(default_factory=list)
    wall: list[int] = field(default_factory=list)  # milliseconds since the repetition started
    value: list[float | None] = field(default_factory=list)
    low: list[float | None] = field(default_factory=list)
    high: list[float | None] = field(default_factory=list)
    bucket: int = 1  # steps per bucket; 1 = raw points

    def add(self, row: tuple) -> None:
        """Append a (step, epoch, walltime_ms, value, low, high) row."""
        step, epoch, wall_ms, value, low, high = row
        self.step.append(step)
        self.epoch.append(epoch)
        self.wall.append(wall_ms)
        self.value.append(value)
        self.low.append(low)
        self.high.append(high)

    def to_json(self) -> dict[str, Any]:
        """The compact encoding (described in openapi.py): steps as a range where they are regular
        and as differences where not, wall times as differences of milliseconds, values to 9
        significant digits, epochs only when some point has one, min and max only when some
        bucket's differ from its value (never for raw points).

        Every value is a logged point, so an empty one is a NaN (the store keeps NaN as NULL):
        "NaN", as json_numbers says. An empty min or max is a bucket of NaN only: it has none."""
        out: dict[str, Any] = {"step": _steps(self.step), "wall_ms": _deltas(self.wall)}
        out["value"] = [NAN if v is None else _shown(v) for v in self.value]
        if any(e is not None for e in self.epoch):
            out["epoch"] = self.epoch
        if self.low != self.value or self.high != self.value:
            out["min"] = [None if v is None else _shown(v) for v in self.low]
            out["max"] = [None if v is None else _shown(v) for v in self.high]
        out["bucket"] = self.bucket
        return out


def _shown(value: float) -> float | str:
    """A value to 9 significant digits: a float32's precision (what most training values are),
    more than a chart or its 5-digit readout can show, and half the characters of a float64's 17;
    the CSV export and the query API keep every digit."""
    return number(float(f"{value:.9g}"))


def _steps(steps: list[int]) -> list[int] | dict[str, int]:
    """Steps a constant stride apart (most series of points: one per step, or every k steps) as
    {first, stride, count}; others (buckets: their last steps) as differences, like `_deltas`."""
    if len(steps) > 2 and all(b - a == steps[1] - steps[0] for a, b in pairwise(steps)):
        return {"first": steps[0], "stride": steps[1] - steps[0], "count": len(steps)}
    return _deltas(steps)


def _deltas(numbers: list[int]) -> list[int]:
    """The first number, then each one's difference from the one before (a few digits each, where
    steps and milliseconds since the start have many)."""
    return [b - a for a, b in pairwise([0, *numbers])]


def bucket_width(lo: int, hi: int, width: int) -> int:
    """Steps per bucket so that [lo, hi] fits in at most `width` buckets."""
    return max(1, math.ceil((hi - lo + 1) / width))


def grid(lo: int, hi: int, width: int) -> tuple[int, int]:
    """(origin, span): the buckets [origin + k * span, origin + (k + 1) * span) that cover [lo, hi]
    in at most `width` buckets. Spans of half a block or more are whole blocks from a block
    boundary, so that every bucket but the first and last is made of whole blocks."""
    width = max(1, min(width, MAX_WIDTH))
    if bucket_width(lo, hi, width) < BLOCK_STEPS // 2:
        return lo, bucket_width(lo, hi, width)
    origin = lo >> BLOCK_BITS << BLOCK_BITS
    return origin, -(-bucket_width(origin, hi, width) >> BLOCK_BITS) << BLOCK_BITS


class Downsampler:
    """Reads series through the store at pixel resolution."""

    def __init__(self, queries: DashboardQueries) -> None:
        self.queries = queries

    def series(self, key: SeriesKey, lo: int, hi: int, width: int, first_step: int, last_step: int) -> Series:
        """The points of `key` with lo <= step <= hi in buckets of `grid(lo, hi, width)` (raw
        points when a bucket would hold at most two steps). `first_step`/`last_step` are the
        series' own bounds."""
        return self.chart({key: (first_step, last_step)}, lo, hi, width)[key]

    def chart(
        self, bounds: Mapping[SeriesKey, tuple[int, int]], lo: int, hi: int, width: int
    ) -> dict[SeriesKey, Series]:
        """The series of one chart (`bounds`: each one's first and last step) on the grid of its
        whole range [lo, hi], in one set of statements for all of them; a series without a step in
        the range is empty."""
        origin, span = grid(lo, hi, width)
        inside = [key for key, (first, last) in bounds.items() if lo <= hi and first <= hi and last >= lo]
        out = {key: Series() for key in bounds}
        if span <= 2:  # at most two steps per pixel: every point fits
            for key, rows in self.queries.points_of(inside, lo, hi).items():
                out[key] = _raw(rows)
            return out
        for key, rows in self.queries.buckets_of(inside, lo, hi, span, origin).items():
            out[key] = Series(bucket=span)
            for row in rows:
                out[key].add(row)
        return out


def raw_after(
    queries: DashboardQueries, key: SeriesKey, after: int, limit: int, upto: int = 2**62
) -> tuple[Series, bool]:
    """Points after a step up to `upto` (live updates), at most `limit`; True when more are waiting."""
    rows = queries.points(key, after + 1, upto, limit=limit + 1)
    return _raw(rows[:limit]), len(rows) > limit


def _raw(rows: list[tuple]) -> Series:
    out = Series()
    for step, epoch, wall_ms, value in rows:
        out.add((step, epoch, wall_ms, value, value, value))
    return out

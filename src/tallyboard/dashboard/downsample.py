"""Server-side downsampling: a series of any length becomes about one bucket per pixel.

Why: a chart is a few hundred pixels wide, so shipping a million points (what DeepBoard does on
every refresh) costs megabytes and seconds for nothing a screen can show. Each bucket keeps its
minimum, maximum and last point, so a spike survives as the band around the line; random
sampling (TensorBoard's reservoir) would drop it. Zooming asks again for a narrower step range,
which comes back at full resolution once it holds fewer points than pixels.

Buckets are aligned to multiples of their width from the requested start, so series requested
together (the splits of one chart, the runs of a compare view) share bucket boundaries and can be
averaged bucket by bucket in the browser.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from tallyboard.store.queries import DashboardQueries, SeriesKey

MAX_WIDTH = 4000  # buckets; a 4K screen
DEFAULT_WIDTH = 800


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
    """JSON has no NaN or infinity: send them as strings the browser maps back."""
    if value is None or math.isfinite(value):
        return value
    return "Infinity" if value > 0 else "-Infinity"


def bucket_width(lo: int, hi: int, width: int) -> int:
    """Steps per bucket so that [lo, hi] fits in at most `width` buckets."""
    return max(1, math.ceil((hi - lo + 1) / width))


class Downsampler:
    """Reads series through the store at pixel resolution, with a small LRU cache of answers.

    The cache key includes the series' last step, so an answer is reused only while the series
    has not grown (live runs invalidate their own entries and nobody else's)."""

    def __init__(self, queries: DashboardQueries, cache_entries: int = 256) -> None:
        self.queries = queries
        self._cache: OrderedDict[tuple, Series] = OrderedDict()
        self._limit = cache_entries
        self._lock = threading.Lock()

    def series(self, key: SeriesKey, lo: int, hi: int, width: int, last_step: int) -> Series:
        """The points of `key` with lo <= step <= hi at `width` buckets (raw when they fit)."""
        width = max(1, min(width, MAX_WIDTH))
        cache_key = (key, lo, hi, width, last_step)
        with self._lock:
            hit = self._cache.get(cache_key)
            if hit is not None:
                self._cache.move_to_end(cache_key)
                return hit
        result = self._read(key, lo, hi, width)
        with self._lock:
            self._cache[cache_key] = result
            if len(self._cache) > self._limit:
                self._cache.popitem(last=False)
        return result

    def _read(self, key: SeriesKey, lo: int, hi: int, width: int) -> Series:
        step_span = bucket_width(lo, hi, width)
        if step_span <= 2:  # at most two steps per pixel: every point fits
            return _raw(self.queries.points(key, lo, hi))
        out = Series(bucket=step_span)
        count = math.ceil((hi - lo + 1) / step_span)
        for step, epoch, wall_ms, value, low, high in self.queries.buckets(key, lo, step_span, count):
            out.step.append(step)
            out.epoch.append(epoch)
            out.wall.append(wall_ms / 1000.0)
            out.value.append(value)
            out.low.append(low)
            out.high.append(high)
        return out


def raw_after(queries: DashboardQueries, key: SeriesKey, after: int, limit: int) -> tuple[Series, bool]:
    """Points after a step (live updates), at most `limit`; True when more are waiting."""
    rows = queries.points(key, after + 1, 2**62, limit=limit + 1)
    return _raw(rows[:limit]), len(rows) > limit


def _raw(rows: list[tuple]) -> Series:
    out = Series()
    for step, epoch, wall_ms, value in rows:
        out.step.append(step)
        out.epoch.append(epoch)
        out.wall.append(wall_ms / 1000.0)
        out.value.append(value)
        out.low.append(value)
        out.high.append(value)
    return out

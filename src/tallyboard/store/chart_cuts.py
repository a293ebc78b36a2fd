"""What the blocks a chart bucket's edge cuts add to the buckets (`DashboardQueries.buckets_of`):
all the cut blocks of a series decoded and folded at once by numpy.

Why numpy: a chart's buckets rarely fall on block boundaries (a 1M-point series at 800 buckets
cuts three blocks in five), and folding those points in Python (a min, a max and a NaN check per
part of a bucket, every walltime and epoch decoded) cost most of the chart's answer: 60 of 90 ms.
numpy comes with the dashboard (scipy stands on it); the logging path never imports this module.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tallyboard.store.block_reads import arrays
from tallyboard.store.records import NO_EPOCH

COLUMNS = ("step", "epoch", "walltime_ms", "value")


def parts(
    blocks: Sequence[tuple[Any, ...]], lo: int, hi: int, origin: int, span: int
) -> Iterator[tuple[int, float | None, float | None, tuple[Any, ...]]]:
    """(k, lowest, highest, last point) for each bucket k = (step - origin) // span that the
    points of `blocks` with lo <= step <= hi reach. `blocks` are one series' cut blocks in step
    order, as (step_data, walltime_data, value_data, epoch_data); the extremes skip NaN (None: NaN
    only) and the last point is (step, epoch, walltime_ms, value) as `buckets` rows hold it."""
    import numpy as np

    found = arrays([(0, *block) for block in blocks], COLUMNS, no_epoch=NO_EPOCH)
    steps = found["step"]
    start, stop = np.searchsorted(steps, lo, "left"), np.searchsorted(steps, hi, "right")
    steps, values = steps[start:stop], found["value"][start:stop]
    if not len(steps):
        return
    # A step's distance from the origin may pass int64 (steps near both ends of its range): as
    # uint64, which wraps as two's complement does, every distance in [0, 2**64) is exact.
    k = (steps.astype(np.uint64) - np.uint64(origin % 2**64)) // np.uint64(span)
    firsts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    lasts = np.r_[firsts[1:] - 1, len(steps) - 1]
    with np.errstate(invalid="ignore"):  # an all-NaN part: its extremes are NaN, read as None
        lows, highs = np.fmin.reduceat(values, firsts), np.fmax.reduceat(values, firsts)
    epochs, walltimes = found["epoch"][start:stop], found["walltime_ms"][start:stop]
    ends = zip(k[firsts].tolist(), lows.tolist(), highs.tolist(), lasts.tolist(), strict=True)
    for bucket, low, high, last in ends:
        epoch = int(epochs[last])
        point = (
            int(steps[last]),
            None if epoch == NO_EPOCH else epoch,
            int(walltimes[last]),
            _or_none(float(values[last])),
        )
        yield bucket, _or_none(low), _or_none(high), point


def _or_none(value: float) -> float | None:
    """None for NaN, as rows and bucket extremes have it."""
    return None if value != value else value

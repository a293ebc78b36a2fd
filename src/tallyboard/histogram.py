"""Histograms of logged values: summarised in the caller's thread, stored compactly.

`summarise` turns a numpy array, a torch tensor (on any device) or a plain sequence of numbers into
a `Histogram`: the count, min, max, sum and sum of squares of the finite values, plus `bins`
equal-width buckets between min and max. The summary is what crosses the queue to the sink, never
the values: a 1M-element tensor becomes ~1 KB, so the bounded queue's rules hold as for any record.

Why the work is done at the call rather than in the sink: the values may be a GPU tensor that the
training loop overwrites on its next step, and copying 1M values to hand them over costs as much as
summarising them. A tensor is summarised on its own device (`torch.aminmax`, `torch.histc`); only
the few numbers of the summary move to the CPU.

NaN and +-inf: they are counted in `nonfinite` and left out of everything else (count, min, max,
sums and buckets), so one exploding gradient does not blank the histogram. A histogram whose values
are all non-finite (or that has none) has count 0, min/max None and no buckets.

Buckets are numpy's `histogram` rule: `bins` equal buckets from min to max, each closed on the left,
the last also on the right. When min == max there is one bucket [min, max] holding every value.
Edges and counts are stored as little-endian float64 / int64 arrays (`pack`, `unpack`).

Only the standard library is imported here; numpy and torch are used when the caller hands them.
"""

from __future__ import annotations

import itertools
import math
import numbers
import sys
from array import array
from dataclasses import dataclass
from typing import Any

MAX_BINS = 10_000


@dataclass(frozen=True, slots=True)
class Histogram:
    """The summary of one logged set of values (see the module docstring for the rules)."""

    count: int
    nonfinite: int
    minimum: float | None
    maximum: float | None
    total: float
    total_squares: float
    edges: tuple[float, ...]
    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class HistogramRecord:
    """A stored histogram, as `LogWriter.get_histograms` returns it."""

    id: int
    tag: str
    run_rep: int
    step: int
    epoch: int | None
    walltime: float
    histogram: Histogram


def check_bins(bins: Any) -> int:
    if isinstance(bins, bool) or not isinstance(bins, int):
        raise TypeError(f"bins must be an int, got {type(bins).__name__}")
    if not 1 <= bins <= MAX_BINS:
        raise ValueError(f"bins must be between 1 and {MAX_BINS}, got {bins}")
    return bins


def summarise(values: Any, bins: int = 64) -> Histogram:
    """The `Histogram` of `values`; `TypeError` for what is not numbers, nothing kept half-done."""
    bins = check_bins(bins)
    module = type(values).__module__.split(".")[0]
    if module == "torch" and "torch" in sys.modules:
        return _from_tensor(values, bins)
    if module == "numpy" and "numpy" in sys.modules:
        return _from_array(values, bins)
    if isinstance(values, (str, bytes, bytearray, dict)) or not hasattr(values, "__iter__"):
        raise TypeError(
            f"cannot log a histogram of {type(values).__name__}: expected a numpy array, a torch tensor "
            "or a sequence of numbers"
        )
    return _from_sequence(values, bins)


def from_buckets(edges: Any, counts: Any) -> Histogram:
    """The `Histogram` of values known only by their buckets (`counts[i]` values between `edges[i]`
    and `edges[i + 1]`): what a peer's pre-computed histogram (numpy's `(counts, edges)`, a TF2
    histogram tensor) holds. Min and max are the outer edges; the sum and sum of squares are
    estimated from the bucket centres, the best the buckets allow. Checked here: edges finite and
    not decreasing, one more edge than counts, counts not negative (rounded to whole ones)."""
    edge_list = [float(edge) for edge in edges]
    count_list = [round(float(count)) for count in counts]  # weighted buckets: the nearest count
    if any(count < 0 for count in count_list):
        raise ValueError("histogram bucket counts must not be negative")
    if not edge_list and not count_list:
        return _empty(0)
    if len(edge_list) != len(count_list) + 1:
        raise ValueError(
            f"a histogram needs one more edge than counts, got {len(edge_list)} and {len(count_list)}"
        )
    if not all(math.isfinite(edge) for edge in edge_list) or any(
        b < a for a, b in itertools.pairwise(edge_list)
    ):
        raise ValueError("histogram edges must be finite and in increasing order")
    total_count = sum(count_list)
    if not total_count:
        return _empty(0)
    centres = [(left + right) / 2 for left, right in itertools.pairwise(edge_list)]
    total = math.fsum(c * n for c, n in zip(centres, count_list, strict=True))
    squares = math.fsum(c * c * n for c, n in zip(centres, count_list, strict=True))
    return Histogram(
        total_count, 0, edge_list[0], edge_list[-1], total, squares, tuple(edge_list), tuple(count_list)
    )


def _edges(low: float, high: float, bins: int) -> tuple[float, ...]:
    if low == high:
        return (low, high)
    width = (high - low) / bins
    return (low, *(low + width * i for i in range(1, bins)), high)


def _empty(nonfinite: int) -> Histogram:
    return Histogram(0, nonfinite, None, None, 0.0, 0.0, (), ())


def _from_array(values: Any, bins: int) -> Histogram:
    import numpy as np

    if values.dtype.kind not in "biuf":
        raise TypeError(f"cannot log a histogram of a numpy array of dtype {values.dtype}: expected numbers")
    data = values.ravel()
    if data.dtype not in (np.float32, np.float64):  # ints, bools, halves: sums without overflow
        data = data.astype(np.float64)
    if not data.size:
        return _empty(0)
    low, high = data.min(), data.max()
    nonfinite = 0
    if not (np.isfinite(low) and np.isfinite(high)):  # a mask only when a NaN or inf is there
        finite = np.isfinite(data)
        data = data[finite]
        nonfinite = int(finite.size - data.size)
        if not data.size:
            return _empty(nonfinite)
        low, high = data.min(), data.max()
    low, high = float(low), float(high)
    total, squares = float(np.sum(data, dtype=np.float64)), float(np.dot(data, data))
    if not math.isfinite(squares):  # float32 overflows past ~1.8e19 per value: redo it wide
        wide = data.astype(np.float64)
        squares = float(np.dot(wide, wide))
    if low == high:
        counts: tuple[int, ...] = (int(data.size),)
    else:
        counts = tuple(np.histogram(data, bins=bins, range=(low, high))[0].tolist())
    return Histogram(int(data.size), nonfinite, low, high, total, squares, _edges(low, high, bins), counts)


def _from_tensor(values: Any, bins: int) -> Histogram:
    import torch

    data = values.detach().reshape(-1)
    if data.dtype.is_complex:
        raise TypeError(f"cannot log a histogram of a complex tensor ({data.dtype})")
    if data.device.type == "cpu" and _numpy_available():  # numpy's kernels are 2-4x torch's on CPU
        if data.dtype == torch.bfloat16:  # numpy has no bfloat16
            data = data.to(torch.float32)
        return _from_array(data.numpy(), bins)
    if data.dtype not in (torch.float32, torch.float64):  # ints, bools, halves: histc wants these
        data = data.to(torch.float64 if not data.dtype.is_floating_point else torch.float32)
    if not data.numel():
        return _empty(0)
    low, high = torch.aminmax(data)
    nonfinite = 0
    if not bool(torch.isfinite(low) & torch.isfinite(high)):  # one sync; a mask only when needed
        finite = torch.isfinite(data)
        data = data[finite]
        nonfinite = int(finite.numel() - data.numel())
        if not data.numel():
            return _empty(nonfinite)
        low, high = torch.aminmax(data)
    low_f, high_f = float(low), float(high)
    wide = data.to(torch.float64) if max(-low_f, high_f) > 1e18 else data  # float32 squares overflow
    sums = torch.stack((torch.sum(data, dtype=torch.float64), torch.dot(wide, wide).to(torch.float64)))
    total, squares = sums.cpu().tolist()
    if low_f == high_f:
        counts: tuple[int, ...] = (int(data.numel()),)
    else:
        counts = tuple(torch.histc(data, bins, low_f, high_f).to("cpu", torch.int64).tolist())
    edges = _edges(low_f, high_f, bins)
    return Histogram(int(data.numel()), nonfinite, low_f, high_f, total, squares, edges, counts)


def _numpy_available() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def _from_sequence(values: Any, bins: int) -> Histogram:
    finite: list[float] = []
    nonfinite = 0
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"histogram values must be numbers, got {type(value).__name__}")
        value = float(value)
        if math.isfinite(value):
            finite.append(value)
        else:
            nonfinite += 1
    if not finite:
        return _empty(nonfinite)
    low, high = min(finite), max(finite)
    if low == high:
        counts = [len(finite)]
    else:
        counts = [0] * bins
        scale = bins / (high - low)
        for value in finite:
            counts[min(int((value - low) * scale), bins - 1)] += 1
    squares = math.fsum(v * v for v in finite)
    return Histogram(
        len(finite), nonfinite, low, high, math.fsum(finite), squares, _edges(low, high, bins), tuple(counts)
    )


def pack_floats(numbers: tuple[float, ...]) -> bytes:
    """Little-endian float64 bytes (the stored form of `edges`)."""
    return _little_endian(array("d", numbers)).tobytes()


def pack_ints(numbers: tuple[int, ...]) -> bytes:
    """Little-endian int64 bytes (the stored form of `counts`)."""
    return _little_endian(array("q", numbers)).tobytes()


def unpack_floats(blob: bytes) -> tuple[float, ...]:
    return tuple(_little_endian(_frombytes("d", blob)))


def unpack_ints(blob: bytes) -> tuple[int, ...]:
    return tuple(_little_endian(_frombytes("q", blob)))


def _frombytes(code: str, blob: bytes) -> array[Any]:
    numbers = array(code)
    numbers.frombytes(bytes(blob))
    return numbers


def _little_endian(numbers: array[Any]) -> array[Any]:
    if sys.byteorder == "big":
        numbers.byteswap()
    return numbers

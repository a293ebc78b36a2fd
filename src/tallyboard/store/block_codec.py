"""A block of scalar points packed into the columns of one `scalar_blocks` row, and back.

Why these encodings (schema v14; bench/blocks.py measures them): a point is a step, a walltime in
milliseconds, a float64 value and, where logged, an epoch. Steps and walltimes mostly grow by a
constant, so they are stored as little-endian int64 deltas (the first one absolute). Values are raw
little-endian float64 (`array('d')`): random mantissas do not compress, and raw bytes keep every
bit, NaN and infinities included, and read back with one `np.frombuffer`. Epochs are stored only
where some point has one, as int64 (NO_EPOCH where a point has none): they repeat.

Integer columns start with one byte that says how the rest is stored: ZLIB (deflated at level 1,
which turns 8 KiB of ones into a few dozen bytes for a few microseconds: what SQLite files hold)
or RAW (PostgreSQL, whose TOAST compresses a row's large values on the server, and whose SQL can
then decode them: the `scalar_points` view, store/points_view.py); in upper case when the numbers
are stored as they are, not as deltas (a step of -2**63 next to one of 2**63 - 1: a delta that no
int64 holds). Standard library only: this
runs in the sink's thread of the logging process.
"""

from __future__ import annotations

import math
import sys
import zlib
from array import array
from collections.abc import MutableSequence, Sequence
from itertools import accumulate, chain
from operator import sub
from typing import Any, NamedTuple

from tallyboard.store.records import (
    NO_EPOCH,  # an epoch's slot in `epoch_data` for a point logged without one
)

ZLIB, RAW = b"z", b"r"  # the first byte of an integer column
NAN = float("nan")
_LEVEL = 1  # zlib's fastest level: nearly all of the gain on deltas, at a fifth of level 6's cost
# An 8 KiB window and a small hash (memLevel 4): a column is at most 8 KiB, and zlib.compress's
# default state (256 KiB to set up per call) cost ten times the deflating itself (measured: 58 us
# against 6 us a column, the same bytes out). Any zlib stream: `zlib.decompress` reads it as ever.
_WBITS, _MEM_LEVEL = 13, 4
_SWAP = sys.byteorder != "little"  # stored bytes are little-endian on every machine


class Points(NamedTuple):
    """The points of one block, in step order: parallel lists, or the writer's arrays (a value is
    NaN, never None)."""

    steps: MutableSequence[int]
    epochs: list[int | None]
    walltimes_ms: MutableSequence[int]
    values: MutableSequence[float]


class Packed(NamedTuple):
    """A block's columns, in `BLOCK_COLUMNS` order after its key."""

    last_step: int
    n: int
    lowest: float | None
    highest: float | None
    first_value: float | None
    last_value: float | None
    step_data: bytes
    walltime_data: bytes
    value_data: bytes
    epoch_data: bytes | None


# The columns of `scalar_blocks` after its key (run_id, tag_id, rep, first_step), as `Packed` holds them.
BLOCK_COLUMNS = Packed._fields


def _little_endian(numbers: array[Any]) -> array[Any]:
    if _SWAP:
        numbers.byteswap()
    return numbers


def _ints(numbers: Sequence[int]) -> bytes:
    return _little_endian(array("q", numbers)).tobytes()


def _int_array(data: bytes) -> array[int]:
    return _little_endian(array("q", data))


def _squeezed(data: bytes, squeeze: bool, absolute: bool = False) -> bytes:
    tag = ZLIB if squeeze else RAW
    return (tag.upper() if absolute else tag) + (_deflate(data) if squeeze else data)


def _deflate(data: bytes) -> bytes:
    deflater = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL)
    return deflater.compress(data) + deflater.flush()


def unsqueezed(data: bytes) -> bytes:
    """The int64 bytes of an integer column (its first byte says how they are stored)."""
    return zlib.decompress(data[1:]) if data[:1] in (b"z", b"Z") else bytes(data[1:])


def consecutive(numbers: Sequence[int]) -> bool:
    """Whether `numbers` are first, first + 1, ... (a training loop's steps), told by one compare
    of their bytes rather than a Python step per number (OverflowError past int64)."""
    count = len(numbers)
    if not count:
        return False
    first = numbers[0]
    return numbers[-1] - first == count - 1 and _ints(numbers) == _ints(range(first, first + count))


def pack_deltas(numbers: Sequence[int], squeeze: bool = True) -> bytes:
    """int64 deltas of `numbers` (the first against 0), zlib'd when `squeeze`; the numbers as they
    are when a delta does not fit in an int64."""
    try:
        if consecutive(numbers):
            return _squeezed(_ints((numbers[0],)) + _ints((1,)) * (len(numbers) - 1), squeeze)
        deltas = _ints(list(map(sub, numbers, chain((0,), numbers))))
    except OverflowError:
        return _squeezed(_ints(numbers), squeeze, absolute=True)
    return _squeezed(deltas, squeeze)


def unpack_deltas(data: bytes) -> list[int]:
    numbers = _int_array(unsqueezed(data))
    return numbers.tolist() if data[:1].isupper() else list(accumulate(numbers))


def pack_values(values: Sequence[float]) -> bytes:
    return _little_endian(array("d", values)).tobytes()


def unpack_values(data: bytes) -> array[float]:
    return _little_endian(array("d", data))


def pack(points: Points, squeeze: bool = True) -> tuple[int, Packed]:
    """(first_step, columns) of a non-empty block whose steps strictly increase; integer columns
    zlib'd when `squeeze` (SQLite), else raw (PostgreSQL)."""
    steps, epochs, walltimes, values = points
    finite = values
    if math.isnan(sum(values)):  # NaN is no extreme (as SQL's MIN/MAX skip NULL); sum() is C speed
        finite = [v for v in values if v == v]
    epoch_data = None
    if epochs.count(None) != len(epochs):
        epoch_data = _squeezed(_ints([NO_EPOCH if e is None else e for e in epochs]), squeeze)
    packed = Packed(
        steps[-1],
        len(steps),
        min(finite, default=None),
        max(finite, default=None),
        value_or_none(values[0]),
        value_or_none(values[-1]),
        pack_deltas(steps, squeeze),
        pack_deltas(walltimes, squeeze),
        pack_values(values),
        epoch_data,
    )
    return steps[0], packed


def unpack_epochs(epoch_data: bytes) -> list[int | None]:
    """The epochs of a block that has an `epoch_data` column (None where a point has none)."""
    return [None if e == NO_EPOCH else e for e in _int_array(unsqueezed(epoch_data))]


def last_of_deltas(data: bytes) -> int:
    """The last number of a `pack_deltas` column, without the list of them all: a chart bucket
    made of whole blocks needs only its last point's walltime (the sum of the deltas, at C speed)."""
    numbers = _int_array(unsqueezed(data))
    return numbers[-1] if data[:1].isupper() else sum(numbers)


def last_epoch(epoch_data: bytes) -> int | None:
    """The epoch of a block's last point (as `unpack_epochs(epoch_data)[-1]`, without the list)."""
    epoch = _int_array(unsqueezed(epoch_data))[-1]
    return None if epoch == NO_EPOCH else epoch


def unpack(step_data: bytes, walltime_data: bytes, value_data: bytes, epoch_data: bytes | None) -> Points:
    """The points of a block from its four data columns."""
    steps = unpack_deltas(step_data)
    epochs: list[int | None] = [None] * len(steps) if epoch_data is None else unpack_epochs(epoch_data)
    return Points(steps, epochs, unpack_deltas(walltime_data), unpack_values(value_data).tolist())


def walltime_ms(seconds: float) -> int:
    """Exactly the milliseconds that writes.WALLTIME_MS_SQL stores in SQLite for `seconds`."""
    ms = seconds * 1000
    return int(ms + 0.5) if ms >= 0 else -int(0.5 - ms)


def value_or_none(value: float) -> float | None:
    """A point's value as rows have it: None for NaN."""
    return None if value != value else value

"""The open window of a Stat: buffered samples, their running aggregates, and when to look again.

``Stat.add``'s fast path (stat.py) appends floats (and ints, converted) to ``buffer`` while the
clock is before ``deadline``, without locking: ``list.append`` is atomic, and a fold only removes
the samples it counted, so concurrent adds lose nothing. Everything else comes through
``StatWindow.add`` and runs under ``_lock``: converting other numbers, closing an ended window,
folding the buffer into running aggregates (at the latest every ``FOLD_INTERVAL_MS`` of the clock,
which bounds the buffer), and ``max_samples``. Events are logged after the lock is released, so a
handler may use the Stat.

A fold continues the window's aggregates exactly as if every sample had been added one at a time,
as torch's Stat adds them, so where the folds fall never shows: SUM is a plain left-to-right sum of
doubles, and MIN and MAX start from the window's first sample and take a later one only when it
compares lower (higher), so a NaN that comes first stays and a later NaN is passed over.
"""

import math
import operator
import sys
import threading
import warnings
import weakref
from datetime import datetime
from functools import reduce
from itertools import chain

from tallyboard.monitor.aggregation import Aggregation
from tallyboard.monitor.events import Event, _trusted_event, log_event

STAT_EVENT = "torch.monitor.Stat"
"""The name of the events that a Stat logs (torch's, so handlers written for torch keep working)."""

FOLD_INTERVAL_MS = 4
"""How often (on the Stat's clock) buffered samples are folded into the running aggregates."""
_SMALL_CAP = 1 << 16
"""A window capped at this many samples needs no timed folding to keep its buffer small."""
_NEEDS_TOTAL = {Aggregation.MEAN, Aggregation.SUM}

if sys.version_info >= (3, 12):

    def _running_sum(start: float, samples: list[float]) -> float:
        """``start + samples[0] + samples[1] + ...`` in double precision, rounded at each step.
        ``sum()`` compensates the rounding of floats from Python 3.12 on, which torch does not."""
        return reduce(operator.add, samples, start)

else:

    def _running_sum(start: float, samples: list[float]) -> float:
        """``start + samples[0] + samples[1] + ...``: before 3.12, ``sum()``'s own float loop."""
        return sum(samples, start)


def _as_float(value: object) -> float:
    if isinstance(value, str | bytes | bytearray):  # float() would parse them; torch refuses them
        raise TypeError(f"Stat.add() takes a number, not {type(value).__name__}")
    try:
        return float(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"Stat.add() takes a number, not {type(value).__name__}") from None


class StatWindow:
    """The open window of one Stat. It never refers back to its Stat, so it dies with the last of
    the Stat and its ``add``, and then logs what it still holds."""

    __slots__ = (
        "__weakref__",
        "_aggregations",
        "_closed",
        "_count",
        "_end",
        "_fold_ticks",
        "_high",
        "_keys",
        "_last",
        "_limit",
        "_lock",
        "_logged",
        "_low",
        "_name",
        "_total",
        "_window_ticks",
        "buffer",
        "deadline",
        "drop_until",
        "room",
    )

    def __init__(
        self,
        name: str,
        aggregations: tuple[Aggregation, ...],
        window_ms: int,
        ticks_per_ms: float,
        limit: int,
    ) -> None:
        """``ticks_per_ms`` is the clock's unit: 1_000_000 for nanoseconds, 0.001 for seconds."""
        self._name = name
        self._aggregations = aggregations
        self._keys = [(agg, f"{name}.{agg.name.lower()}") for agg in aggregations]
        self._window_ticks = window_ms * ticks_per_ms
        self._fold_ticks = FOLD_INTERVAL_MS * ticks_per_ms
        self._limit = limit
        self._lock = threading.Lock()
        self._logged = dict.fromkeys(aggregations, 0.0)
        self._closed = False
        self._end: float = -math.inf  # the first add opens the first window
        self.buffer: list[float] = []
        self.deadline: float = -math.inf  # the fast path defers to add() from this clock reading on
        self.drop_until: float = -math.inf  # the end of a window that is full (max_samples)
        self._reset()
        _live_windows.add(self)

    def _reset(self) -> None:
        self._count = 0  # samples folded out of the buffer
        self._total = 0.0
        self._low = 0.0  # MIN and MAX are set by the window's first fold
        self._high = 0.0
        self._last = 0.0
        self.room = self._limit  # the buffer length at which the window is full

    def add(self, now: float, value: object) -> None:
        """``Stat.add`` beyond its fast path: ``value`` is not a float, or the clock reached
        ``deadline`` (the window ended, the buffer is due for a fold, or the Stat is closed)."""
        if value.__class__ is not float:
            value = _as_float(value)
        if now < self.drop_until:
            return
        ended = None
        if now >= self.deadline:
            with self._lock:
                if self._closed:
                    raise ValueError(f"add() on closed Stat {self._name!r}")
                if now >= self._end:
                    # After a full window, the buffer holds only adds that raced with the filling one.
                    ended = self._close_window(discard_buffer=self.drop_until != -math.inf)
                    self._end = (now // self._window_ticks + 1) * self._window_ticks
                    self.drop_until = -math.inf
                else:
                    self._fold()
                self._schedule(now)
        try:
            self.buffer.append(value)  # counted in the new window even if a handler fails below
        finally:
            if ended is not None:
                log_event(ended)
        if len(self.buffer) >= self.room:
            self.fill()

    def fill(self) -> None:
        """Called when the buffer may hold ``max_samples``: logs the window at once, and drops the
        adds that follow until it ends."""
        with self._lock:
            if self._closed or self._count + len(self.buffer) < self._limit:
                return  # another thread logged it first
            full = self._close_window(discard_buffer=False)
            self.drop_until = self._end
            self.deadline = -math.inf  # no fast path until the window ends
        if full is not None:
            log_event(full)

    def log_early(self) -> None:
        """Logs the open window now if it has samples, as if it had ended; the Stat stays open, and
        later adds of the same window are logged when it ends, as another event."""
        with self._lock:
            if self._closed:
                return
            early = self._close_window(discard_buffer=self.drop_until != -math.inf)
        if early is not None:
            log_event(early)

    def close(self) -> None:
        """Logs the open window if it has samples; later adds raise ValueError. Runs during cleanup,
        so a failing handler becomes a RuntimeWarning rather than an exception."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            last = self._close_window(discard_buffer=self.drop_until != -math.inf)
            self.deadline = -math.inf
            self.drop_until = -math.inf
        if last is None:
            return
        try:
            log_event(last)
        except Exception as error:
            message = f"event handler failed on the last window of Stat {self._name!r}: {error!r}"
            warnings.warn(message, RuntimeWarning, stacklevel=2)

    def __del__(self) -> None:
        self.close()

    def logged(self) -> dict[Aggregation, float]:
        with self._lock:
            return dict(self._logged)

    def count(self) -> int:
        with self._lock:
            return min(self._count + len(self.buffer), self._limit)

    def _schedule(self, now: float) -> None:
        if self._limit - self._count > _SMALL_CAP:  # the cap alone does not bound the buffer
            self.deadline = min(self._end, now + self._fold_ticks)
        else:
            self.deadline = self._end
        self.room = self._limit - self._count

    def _fold(self) -> None:
        """Moves the buffered samples (up to the cap) into the running aggregates."""
        buffer = self.buffer
        buffered = len(buffer)  # samples appended from now on stay in the buffer
        samples = buffer[: min(buffered, self._limit - self._count)]
        del buffer[:buffered]  # any sample beyond the cap raced with the add that filled the window
        if not samples:
            return
        first = not self._count
        self._count += len(samples)
        self._last = samples[-1]
        aggregations = self._aggregations
        if not _NEEDS_TOTAL.isdisjoint(aggregations):
            self._total = _running_sum(self._total, samples)
        if Aggregation.MIN in aggregations:
            self._low = min(samples) if first else min(chain((self._low,), samples))
        if Aggregation.MAX in aggregations:
            self._high = max(samples) if first else max(chain((self._high,), samples))

    def _close_window(self, discard_buffer: bool) -> Event | None:
        """Ends the open window: returns its event, or None when it had no samples."""
        if discard_buffer:
            del self.buffer[:]
        else:
            self._fold()
        count = self._count
        if not count:
            return None
        values = {
            Aggregation.VALUE: self._last,
            Aggregation.MEAN: self._total / count,
            Aggregation.COUNT: float(count),
            Aggregation.SUM: self._total,
            Aggregation.MAX: self._high,
            Aggregation.MIN: self._low,
        }
        self._logged = {agg: values[agg] for agg in self._aggregations}
        self._reset()
        return _trusted_event(STAT_EVENT, datetime.now(), {key: values[agg] for agg, key in self._keys})


# Every StatWindow alive, so that `log_open_windows` can reach them (weakly: a Stat still dies, and
# logs its last window, when its last reference goes).
_live_windows: "weakref.WeakSet[StatWindow]" = weakref.WeakSet()


def log_open_windows() -> None:
    """Log the open window of every live Stat that has samples, now (see `StatWindow.log_early`).

    For whoever is about to stop listening: a result-table run that ends calls it so that the
    last windows of the Stats logging into it arrive while it can still write them."""
    for window in list(_live_windows):
        window.log_early()

"""Stat: summary statistics of the values added during each fixed window of time.

``Stat.add`` sits in training loops, so it is a closure over exactly what its fast path needs: one
clock read, one comparison, one type check and one ``list.append`` (ints are converted inline).
Aggregation is deferred to C loops over the buffered samples; that and the rest live in
``StatWindow`` (window.py).

Without ``clock=``, the clock is ``time.monotonic`` (float seconds) rather than ``monotonic_ns``:
the same clock, but reading and comparing a float costs about 20 ns less than a multi-digit int,
which is a sixth of an add.
"""

import operator
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from tallyboard.monitor.aggregation import Aggregation
from tallyboard.monitor.conversion import text
from tallyboard.monitor.window import STAT_EVENT, StatWindow

__all__ = ["STAT_EVENT", "Stat"]

_NS_PER_MS = 1_000_000
_UNLIMITED = 2**63 - 1
_PLAIN_NUMBERS = (float, int)  # what the fast path stores without calling out


def _uncapped_add(clock: Callable[[], float], window: StatWindow) -> Callable[[object], None]:
    append = window.buffer.append

    def add(value: Any) -> None:  # any object: the type is checked here, in the hot path
        """Adds one number to the open window (TypeError for anything else; ValueError once closed)."""
        now = clock()
        if now < window.deadline:
            if value.__class__ is float:
                append(value)
                return
            if value.__class__ is int:
                append(float(value))
                return
        window.add(now, value)

    return add


def _capped_add(clock: Callable[[], float], window: StatWindow) -> Callable[[object], None]:
    buffer = window.buffer
    append = buffer.append

    def add(value: Any) -> None:  # any object: the type is checked here, in the hot path
        """Adds one number to the open window, unless it is full (TypeError for anything else)."""
        now = clock()
        if now < window.deadline:
            if value.__class__ is float:
                append(value)
            elif value.__class__ is int:
                append(float(value))
            else:
                window.add(now, value)
                return
            if len(buffer) >= window.room:
                window.fill()
        elif now >= window.drop_until or value.__class__ not in _PLAIN_NUMBERS:
            window.add(now, value)
        # else: dropped, the window already holds max_samples

    return add


def _window_ms(window_size: timedelta | float) -> int:
    """``window_size`` truncated to whole milliseconds."""
    if isinstance(window_size, bool) or not isinstance(window_size, timedelta | int | float):
        raise TypeError(f"window_size must be a timedelta or seconds, not {type(window_size).__name__}")
    if not isinstance(window_size, timedelta):
        window_size = timedelta(seconds=window_size)
    window_ms = window_size // timedelta(milliseconds=1)
    if window_ms < 1:
        raise ValueError(f"window_size must be at least 1 millisecond, not {window_size!r}")
    return window_ms


class Stat:
    """Summary statistics of the values added during each ``window_size`` window of a clock.

    Windows are aligned to multiples of ``window_size`` on the clock and checked only by ``add``: the
    first add of a new window logs the previous window (if it had samples) as one ``STAT_EVENT``
    event with data ``{"<name>.<aggregation>": float}``. With ``max_samples``, a window is logged as
    soon as it holds that many samples and later adds in that window are dropped. Closing the Stat,
    or dropping the last reference to it and its ``add``, logs the open window early.

    ``clock`` returns monotonic time in integer nanoseconds; by default the Stat reads the same
    monotonic clock as ``time.monotonic()`` seconds, which is cheaper (see the module docstring).
    """

    __slots__ = ("__weakref__", "_name", "_window", "add")

    add: Callable[[float], None]
    """Adds one number to the open window: a closure, so that the hot path needs no lookups on self."""

    def __init__(
        self,
        name: str | bytes,
        aggregations: Iterable[Aggregation],
        window_size: timedelta | float,
        max_samples: int = _UNLIMITED,
        *,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._name = text(name, "Stat name")
        wanted = set(aggregations)
        for aggregation in wanted:
            if not isinstance(aggregation, Aggregation):
                raise TypeError(f"aggregations must be Aggregation members, not {aggregation!r}")
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a callable returning nanoseconds, not {type(clock).__name__}")
        limit = max(1, operator.index(max_samples))
        ordered = tuple(agg for agg in Aggregation if agg in wanted)
        read: Callable[[], float] = time.monotonic if clock is None else clock
        ticks_per_ms = 0.001 if clock is None else _NS_PER_MS
        self._window = StatWindow(self._name, ordered, _window_ms(window_size), ticks_per_ms, limit)
        make_add = _uncapped_add if limit >= _UNLIMITED else _capped_add
        self.add = make_add(read, self._window)

    @property
    def name(self) -> str:
        return self._name

    @property
    def count(self) -> int:
        """The number of samples in the open window."""
        return self._window.count()

    def get(self) -> dict[Aggregation, float]:
        """The aggregates of the last logged window (all 0.0 before the first one)."""
        return self._window.logged()

    def close(self) -> None:
        """Logs the open window now if it has samples; later adds raise ValueError. A failing
        handler becomes a RuntimeWarning, as during cleanup."""
        self._window.close()

    def __enter__(self) -> "Stat":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        aggregations = ", ".join(agg.name for agg in self._window._aggregations)
        return f"Stat({self._name!r}, [{aggregations}])"

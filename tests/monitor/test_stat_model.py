"""Stat against a plain reference model of the rules in issue 2, on random add/clock sequences.

The model aggregates one sample at a time as torch's Stat does (a plain sum of doubles, MIN and MAX
started by the first sample), so NaN, infinities and rounding must come out the same however
Stat's buffer happens to be folded.
"""

import math
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tallyboard import monitor
from tallyboard.monitor import Aggregation, Stat

NS_PER_MS = 1_000_000


class ModelStat:
    """The rules written out directly: every sample kept, aggregated when its window is logged."""

    def __init__(self, window_ms: int, max_samples: int) -> None:
        self.window_ms = window_ms
        self.cap = max(1, max_samples)
        self.window = None
        self.samples: list[float] = []
        self.full = False
        self.logged: list[dict] = []

    def add(self, now_ns: int, value: float) -> None:
        window = now_ns // NS_PER_MS // self.window_ms
        if window != self.window:
            self._log()
            self.window, self.full = window, False
        if self.full:
            return
        self.samples.append(value)
        if len(self.samples) >= self.cap:
            self._log()
            self.full = True

    def close(self) -> None:
        self._log()

    def _log(self) -> None:
        s = self.samples
        if s:
            total, low, high = 0.0, s[0], s[0]
            for value in s:  # torch's Stat<double>::add
                total += value
                if low > value:
                    low = value
                if high < value:
                    high = value
            summary = {"value": s[-1], "mean": total / len(s), "count": float(len(s)), "sum": total}
            self.logged.append({**summary, "max": high, "min": low})
        self.samples = []


def reprs(data: dict) -> dict:
    """``data`` with its floats as reprs, so that NaN equals NaN and -0.0 differs from 0.0."""
    return {key: repr(value) for key, value in data.items()}


values = st.one_of(
    st.integers(-50, 50).map(float),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.1, 1e16]),
    st.floats(),
)
steps = st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 2, 3, 5, 40, 999, 5000]), values), max_size=200)


@settings(max_examples=150, deadline=None)
@given(
    steps=steps,
    window_ms=st.sampled_from([1, 3, 10, 1000]),
    max_samples=st.sampled_from([0, 1, 2, 3, 7, 2**63 - 1]),
    start_ms=st.integers(0, 10_000),
)
def test_stat_matches_the_reference_model(steps, window_ms, max_samples, start_ms):
    now = [start_ms * NS_PER_MS]
    events: list[dict] = []
    handle = monitor.register_event_handler(lambda event: events.append(event.data))
    try:
        window = timedelta(milliseconds=window_ms)
        stat = Stat("m", list(Aggregation), window, max_samples, clock=lambda: now[0])
        model = ModelStat(window_ms, max_samples)
        for advance_ms, value in steps:
            now[0] += advance_ms * NS_PER_MS
            stat.add(value)
            model.add(now[0], value)
            assert stat.count == len(model.samples)
        stat.close()
        model.close()
    finally:
        monitor.unregister_event_handler(handle)
    assert [reprs(data) for data in events] == [
        reprs({f"m.{key}": value for key, value in data.items()}) for data in model.logged
    ]
    if model.logged:
        assert reprs({a.name.lower(): v for a, v in stat.get().items()}) == reprs(model.logged[-1])

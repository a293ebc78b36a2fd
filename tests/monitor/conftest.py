"""Fixtures for the monitor tests: a controllable clock and a handler that records events."""

import itertools
import threading
from collections.abc import Iterator

import pytest

from support import require
from tallyboard import monitor

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


class FakeClock:
    """A monotonic nanosecond clock that moves only when ``set``, or by ``step_ns`` on every reading
    when ``step_ns`` is given (thread-safe: ``itertools.count`` is one atomic step)."""

    def __init__(self, start_ns: int = 0, step_ns: int = 0) -> None:
        self.now_ns = start_ns
        self._ticks = itertools.count(start_ns, step_ns) if step_ns else None

    def __call__(self) -> int:
        if self._ticks is not None:
            return next(self._ticks)
        return self.now_ns

    def set(self, ms: float = 0, s: float = 0) -> None:
        self.now_ns = int(ms * NS_PER_MS + s * NS_PER_S)


class Recorder:
    """An event handler that keeps what it receives (thread-safe)."""

    def __init__(self) -> None:
        self.events: list[monitor.Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: monitor.Event) -> None:
        with self._lock:
            self.events.append(event)

    @property
    def stat_data(self) -> list[dict]:
        return [event.data for event in self.events if event.name == monitor.STAT_EVENT]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_clock() -> type[FakeClock]:
    """For a clock that starts elsewhere than 0 or ticks on every reading."""
    return FakeClock


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """A Recorder registered for the duration of the test."""
    recorder = Recorder()
    handle = monitor.register_event_handler(recorder)
    try:
        yield recorder
    finally:
        monitor.unregister_event_handler(handle)


@pytest.fixture
def registered() -> Iterator[list]:
    """Registers handlers for a test and unregisters them afterwards: ``registered.append(handle)``."""
    handles: list = []
    try:
        yield handles
    finally:
        for handle in handles:
            monitor.unregister_event_handler(handle)


@pytest.fixture
def torch_monitor():
    """The real torch.monitor: the reference our port is compared with (required in CI)."""
    try:
        import torch.monitor
    except ImportError:
        require(False, "torch")
    return torch.monitor

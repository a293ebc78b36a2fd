"""Stat under concurrency: no sample lost, and handlers that use the Stat never deadlock."""

import sys
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from tallyboard import monitor
from tallyboard.monitor import Aggregation, Stat

THREADS = 8
ADDS = 10_000
NS_PER_US = 1_000


@pytest.fixture(autouse=True)
def frequent_thread_switches() -> Iterator[None]:
    """Switch threads every microsecond so that adds interleave with folds and window changes."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def run_threads(target: Callable[[], None], count: int = THREADS) -> None:
    start = threading.Barrier(count)

    def run() -> None:
        start.wait()
        target()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "adding threads did not finish"


@pytest.mark.parametrize("step_ns", [NS_PER_US, 1_000 * NS_PER_US])  # a fold every 4000 or 4 readings
def test_eight_threads_adding_to_one_window_lose_nothing(make_clock, recorder, step_ns):
    clock = make_clock(step_ns=step_ns)
    stat = Stat("s", [Aggregation.COUNT, Aggregation.SUM], timedelta(hours=1), clock=clock)

    def adds() -> None:
        for _ in range(ADDS):
            stat.add(1.0)

    run_threads(adds)
    assert stat.count == THREADS * ADDS
    stat.close()
    assert recorder.stat_data == [{"s.count": 80_000.0, "s.sum": 80_000.0}]


def test_eight_threads_across_many_windows_lose_nothing(make_clock, recorder):
    clock = make_clock(step_ns=50 * NS_PER_US)  # a new 10 ms window every 200 readings
    stat = Stat("s", [Aggregation.COUNT, Aggregation.SUM], timedelta(milliseconds=10), clock=clock)

    def adds() -> None:
        for _ in range(ADDS):
            stat.add(2)

    run_threads(adds)
    stat.close()
    counts = [data["s.count"] for data in recorder.stat_data]
    assert len(counts) > 100
    assert sum(counts) == THREADS * ADDS
    assert sum(data["s.sum"] for data in recorder.stat_data) == 2 * THREADS * ADDS


def test_eight_threads_never_overfill_a_capped_window(make_clock, recorder):
    clock = make_clock(step_ns=50 * NS_PER_US)
    stat = Stat("s", [Aggregation.COUNT], timedelta(milliseconds=10), 50, clock=clock)

    def adds() -> None:
        for _ in range(ADDS // 10):
            stat.add(1.0)

    run_threads(adds)
    stat.close()
    counts = [data["s.count"] for data in recorder.stat_data]
    assert counts and max(counts) == 50.0


def in_other_thread(action: Callable[[], object]) -> object:
    """Runs ``action`` in a new thread and waits for it, failing (not hanging) on a deadlock."""
    results: list = []
    worker = threading.Thread(target=lambda: results.append(action()))
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "the other thread deadlocked"
    return results[0]


@pytest.mark.timeout(20)
def test_a_handler_may_use_the_logging_stat_from_any_thread(clock, registered):
    stat = Stat("s", [Aggregation.COUNT], timedelta(seconds=1), clock=clock)
    seen = []

    def handler(event: monitor.Event) -> None:
        if event.name != monitor.STAT_EVENT or seen:
            return
        seen.append(event.data)
        stat.add(10.0)  # same thread, while the stat is logging
        in_other_thread(lambda: stat.add(20.0))
        seen.append((stat.get(), stat.count, in_other_thread(lambda: (stat.get(), stat.count))))
        in_other_thread(lambda: monitor.log_event(monitor.Event("nested", event.timestamp, {})))

    registered.append(monitor.register_event_handler(handler))
    stat.add(1.0)
    clock.set(s=1)
    stat.add(2.0)
    logged = {Aggregation.COUNT: 1.0}
    assert seen == [{"s.count": 1.0}, (logged, 3, (logged, 3))]
    assert stat.count == 3


@pytest.mark.timeout(20)
def test_a_handler_may_close_the_stat_that_is_logging(clock, recorder, registered):
    stat = Stat("s", [Aggregation.MAX], timedelta(seconds=1), 2, clock=clock)
    registered.append(monitor.register_event_handler(lambda event: in_other_thread(stat.close)))
    stat.add(1.0)
    stat.add(3.0)  # fills the window: logged at once, and the handler closes the stat
    assert recorder.stat_data == [{"s.max": 3.0}]
    with pytest.raises(ValueError, match="closed"):
        stat.add(1.0)

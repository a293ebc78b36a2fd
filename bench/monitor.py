"""tallyboard.monitor against torch.monitor: nanoseconds per call, and the ratio ours/torch per row.

Rows: ``Stat.add`` (of a float) with one and with all six aggregations, an add dropped by
``max_samples``, an add of an int, and ``log_event`` with 0, 1 and 2 no-op handlers. Each row times
ours and torch's alternately (ours, torch, ours, torch, ...) in this one process and keeps the best
repeat of each, so load from other users of a shared machine hits both alike. The timing loop's own
cost (an empty statement) is subtracted. Target: every ratio <= 1.0. Without torch, its column
reads "absent".

    python bench/monitor.py [--calls 200000] [--repeats 9]
"""

from __future__ import annotations

import argparse
import timeit
from datetime import datetime, timedelta
from types import ModuleType

from tallyboard import monitor as ours

ROWS = [
    "Stat.add, 1 aggregation",
    "Stat.add, 6 aggregations",
    "Stat.add dropped (max_samples)",
    "Stat.add of an int, 1 aggregation",
    "log_event, 0 handlers",
    "log_event, 1 no-op handler",
    "log_event, 2 no-op handlers",
]


def _noop(event: object) -> None:
    pass


def _timers(monitor: ModuleType, calls: int) -> dict[str, timeit.Timer]:
    """One timer per row, built on ``monitor`` (ours or torch's); log_event timers register handlers
    only while they run, so each row sees exactly its own handlers."""
    aggs = monitor.Aggregation
    everything = [aggs.VALUE, aggs.MEAN, aggs.COUNT, aggs.SUM, aggs.MAX, aggs.MIN]
    window = timedelta(hours=1)  # no window closes while a row is timed
    one = monitor.Stat("bench.one", [aggs.MEAN], window)
    six = monitor.Stat("bench.six", everything, window)
    full = monitor.Stat("bench.full", [aggs.MEAN], window, 1)
    full.add(0.0)  # the window is full: every later add in it is dropped
    event = monitor.Event("bench", datetime.now(), {"loss": 0.5})
    timers = {
        ROWS[0]: timeit.Timer("stat.add(1.5)", globals={"stat": one}),
        ROWS[1]: timeit.Timer("stat.add(1.5)", globals={"stat": six}),
        ROWS[2]: timeit.Timer("stat.add(1.5)", globals={"stat": full}),
        ROWS[3]: timeit.Timer("stat.add(3)", globals={"stat": one}),
    }
    for handlers, row in enumerate(ROWS[4:]):
        timers[row] = _HandlerTimer(monitor, event, handlers)
    return timers


class _HandlerTimer:
    """Times ``log_event(event)`` with ``handlers`` no-op handlers registered for the duration."""

    def __init__(self, monitor: ModuleType, event: object, handlers: int) -> None:
        self._monitor = monitor
        self._handlers = handlers
        self._timer = timeit.Timer(
            "log_event(event)", globals={"log_event": monitor.log_event, "event": event}
        )

    def timeit(self, number: int) -> float:
        handles = [self._monitor.register_event_handler(_noop) for _ in range(self._handlers)]
        try:
            return self._timer.timeit(number)
        finally:
            for handle in handles:
                self._monitor.unregister_event_handler(handle)


def _torch_monitor() -> ModuleType | None:
    try:
        import torch.monitor
    except ImportError:
        return None
    return torch.monitor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000, help="calls per timed repeat")
    parser.add_argument("--repeats", type=int, default=9, help="repeats per row and implementation")
    args = parser.parse_args()

    torch_monitor = _torch_monitor()
    contenders = {"ours": _timers(ours, args.calls)}
    if torch_monitor is not None:
        contenders["torch"] = _timers(torch_monitor, args.calls)
    empty = timeit.Timer("pass")

    best: dict[tuple[str, str], float] = {}
    for _ in range(args.repeats):
        loop_ns = empty.timeit(args.calls) / args.calls * 1e9
        for row in ROWS:
            for name, timers in contenders.items():
                ns = timers[row].timeit(args.calls) / args.calls * 1e9 - loop_ns
                best[name, row] = min(best.get((name, row), ns), ns)

    print(f"{'call':34} {'ours ns':>8} {'torch ns':>9} {'ours/torch':>10}")
    for row in ROWS:
        mine = best["ours", row]
        if torch_monitor is None:
            print(f"{row:34} {mine:8.0f} {'absent':>9} {'-':>10}")
        else:
            theirs = best["torch", row]
            print(f"{row:34} {mine:8.0f} {theirs:9.0f} {mine / theirs:10.2f}")


if __name__ == "__main__":
    main()

"""The same scenarios on the real torch.monitor (2.13.0) and on ours, compared.

Where torch's binding is wrong we differ on purpose, and the comparison says so: torch never
reports VALUE (we do), and turns bool event data into floats (we keep bools).
"""

from datetime import datetime, timedelta
from types import ModuleType

import pytest

from tallyboard import monitor as ours

HOUR = timedelta(hours=1)  # no window boundary passes while a scenario runs


def without_value(data: dict) -> dict:
    return {key: value for key, value in data.items() if not str(key).endswith(("value", "VALUE"))}


def record(monitor: ModuleType, scenario) -> list:
    """Runs ``scenario`` with a handler that records (name, data) of every event, then unregisters it."""
    events: list = []
    handle = monitor.register_event_handler(lambda event: events.append((event.name, event.data)))
    try:
        result = scenario(monitor)
    finally:
        monitor.unregister_event_handler(handle)
    return [result, events]


def both(torch_monitor: ModuleType, scenario) -> tuple[list, list]:
    return record(torch_monitor, scenario), record(ours, scenario)


def test_public_names_match(torch_monitor):
    torch_names = {name for name in dir(torch_monitor) if not name.startswith("_")} - {"TYPE_CHECKING"}
    assert torch_names <= set(dir(ours))
    assert ours.STAT_EVENT == torch_monitor.STAT_EVENT
    assert [(a.name, int(a.value)) for a in ours.Aggregation] == [
        (name, int(member.value)) for name, member in torch_monitor.Aggregation.__members__.items()
    ]


def capped_windows(monitor: ModuleType) -> list:
    aggs = monitor.Aggregation
    stat = monitor.Stat("s", [aggs.MEAN, aggs.COUNT, aggs.SUM, aggs.MAX, aggs.MIN], HOUR, 3)
    before = {a.name: v for a, v in stat.get().items()}
    for value in (4.0, -2.0, 7.0, 100.0, 200.0):
        stat.add(value)
    after = {a.name: v for a, v in stat.get().items()}
    return [stat.name, before, after, stat.count]


def test_a_capped_window_is_logged_at_once_and_later_adds_dropped(torch_monitor):
    theirs, mine = both(torch_monitor, capped_windows)
    assert mine == theirs
    assert mine[1] == [
        ("torch.monitor.Stat", {"s.mean": 3.0, "s.count": 3.0, "s.sum": 9.0, "s.max": 7.0, "s.min": -2.0})
    ]


def destroyed_stat(monitor: ModuleType) -> list:
    aggs = monitor.Aggregation
    stat = monitor.Stat("d", [aggs.VALUE, aggs.MEAN, aggs.MAX], HOUR)
    stat.add(1)
    stat.add(2.5)
    count = stat.count
    del stat
    return [count]


def test_destroying_a_stat_logs_its_open_window(torch_monitor):
    theirs, mine = both(torch_monitor, destroyed_stat)
    assert mine[0] == theirs[0] == [2]
    assert [(name, without_value(data)) for name, data in mine[1]] == theirs[1]
    assert mine[1][0][1]["d.value"] == 2.5  # torch's binding drops VALUE


def test_get_before_the_first_window_is_zeros(torch_monitor):
    def fresh(monitor):
        aggs = monitor.Aggregation
        stat = monitor.Stat("z", list(aggs.__members__.values()), HOUR)
        return {a.name: v for a, v in stat.get().items()}

    theirs, mine = both(torch_monitor, fresh)
    assert without_value(mine[0]) == theirs[0]
    assert mine[0]["VALUE"] == 0.0


def test_events_and_dispatch_behave_alike(torch_monitor):
    when = datetime(2024, 5, 1, 12, 30, 15, 250000)

    def dispatch(monitor):
        calls = []
        handles = [monitor.register_event_handler(lambda e, tag=tag: calls.append(tag)) for tag in "aba"]
        event = monitor.Event("custom", when, {"i": 3, "f": 0.5, "s": "text"})
        monitor.log_event(event)
        monitor.unregister_event_handler(handles[1])
        monitor.log_event(event)

        def failing(event):
            raise RuntimeError("boom")

        handles.append(monitor.register_event_handler(failing))
        with pytest.raises(RuntimeError, match="boom"):
            monitor.log_event(event)
        for handle in handles[::2] + handles[3:]:
            monitor.unregister_event_handler(handle)
        same = monitor.Event("custom", when, {"i": 3, "f": 0.5, "s": "text"})
        return [calls, event.name, event.timestamp, event.data, event == event, event == same]

    theirs, mine = both(torch_monitor, dispatch)
    assert mine == theirs
    assert mine[0][0] == ["a", "b", "a", "a", "a", "a", "a"]


def test_bool_event_data_stays_bool_where_torch_makes_it_float(torch_monitor):
    when = datetime(2024, 5, 1)
    assert torch_monitor.Event("b", when, {"flag": True}).data == {"flag": 1.0}
    assert type(ours.Event("b", when, {"flag": True}).data["flag"]) is bool


def test_tensorboard_handlers_write_the_same_scalars(torch_monitor):
    class ScalarLog:
        def __init__(self):
            self.calls = []

        def add_scalar(self, tag, value, walltime=None):
            self.calls.append((tag, value, walltime))

    when = datetime(2024, 5, 1, 8, 0, 0)
    logs = []
    for monitor in (torch_monitor, ours):
        log = ScalarLog()
        handler = monitor.TensorboardEventHandler(log)
        handler(monitor.Event(monitor.STAT_EVENT, when, {"a.mean": 1.5, "a.max": 2.0}))
        handler(monitor.Event("other", when, {"x": 1.0}))
        logs.append(sorted(log.calls))  # torch's event data has no stable order
    assert logs[0] == logs[1] == [("a.max", 2.0, when.timestamp()), ("a.mean", 1.5, when.timestamp())]

"""The same scenarios on the real torch.monitor (2.13.0) and on ours, compared.

Where torch's binding is wrong we differ on purpose, and the comparison says so (docs/monitor.md,
"Deliberate differences", lists each one): torch never reports VALUE (we do), turns bool event data
into floats (we keep bools), and so on below.
"""

import enum
import math
import operator
import time
from datetime import date, datetime, timedelta, timezone
from types import ModuleType

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tallyboard import monitor as ours
from tallyboard.monitor.window import FOLD_INTERVAL_MS

pytestmark = pytest.mark.torch

HOUR = timedelta(hours=1)  # no window boundary passes while a scenario runs
NS_PER_MS = 1_000_000
WHEN = datetime(2024, 5, 1, 12, 30, 15, 250000)


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


def test_aggregations_are_indexes_alike(torch_monitor):
    for theirs, mine in zip(torch_monitor.Aggregation.__members__.values(), ours.Aggregation, strict=True):
        assert (operator.index(mine), int(mine), float(mine)) == (
            operator.index(theirs),
            int(theirs),
            float(theirs),
        )
        assert list(range(7))[mine] == list(range(7))[theirs]


AGGREGATED = ["MEAN", "COUNT", "SUM", "MAX", "MIN"]


def torch_window(torch_monitor: ModuleType, values: list[float]) -> dict[str, str]:
    """torch's aggregates of one window of ``values`` (an hour long, ended by deleting the Stat)."""
    aggregations = [torch_monitor.Aggregation.__members__[name] for name in AGGREGATED]

    def one_window(monitor):
        stat = monitor.Stat("w", aggregations, HOUR)
        for value in values:
            stat.add(value)
        del stat

    return window_data(record(torch_monitor, one_window))


def our_window(batches: list[list[float]]) -> dict[str, str]:
    """Our aggregates of one window of ``batches``, the buffer folded between consecutive batches."""
    now = [0]
    aggregations = [ours.Aggregation[name] for name in AGGREGATED]

    def one_window(monitor):
        stat = monitor.Stat("w", aggregations, HOUR, clock=lambda: now[0])
        for index, batch in enumerate(batches):
            now[0] = index * FOLD_INTERVAL_MS * NS_PER_MS
            for value in batch:
                stat.add(value)
        stat.close()

    return window_data(record(ours, one_window))


def window_data(recorded: list) -> dict[str, str]:
    """The data of the one event ``recorded``, its floats as reprs (NaN equals NaN, -0.0 is not 0.0)."""
    _, events = recorded
    ((_, data),) = events
    return {key: repr(value) for key, value in sorted(data.items())}


@pytest.mark.parametrize(
    "batches",
    [
        [[2.0], [math.nan, -1.0, 5.0], [0.0]],  # the fold after 2.0 once gave MIN 0 and MAX 2
        [[math.nan], [2.0, -1.0]],  # and a leading NaN MIN=+inf, MAX=-inf
        [[1e16], [1.0, 1.0], [-1e16]],  # 1e16 + 1.0 rounds back to 1e16
        [[0.1] * 3, [0.1] * 7],
        [[-0.0], [0.0], [math.inf, -math.inf]],
    ],
)
def test_a_window_aggregates_alike_wherever_our_folds_fall(torch_monitor, batches):
    assert our_window(batches) == torch_window(torch_monitor, [v for batch in batches for v in batch])


samples = st.one_of(
    st.integers(-50, 50).map(float),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.1, 1e16]),
    st.floats(),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(samples, min_size=1, max_size=6), min_size=1, max_size=6))
def test_random_windows_aggregate_alike_wherever_our_folds_fall(torch_monitor, batches):
    assert our_window(batches) == torch_window(torch_monitor, [v for batch in batches for v in batch])


class Level(enum.IntEnum):
    HIGH = 3


class Ratio(float):
    pass


CONVERTED_ALIKE = {
    "np.float32": np.float32(0.5),
    "np.float64": np.float64(0.25),
    "np.float16": np.float16(1.5),
    "np.longdouble": np.longdouble(2.5),
    "np.int64": np.int64(-7),
    "np.uint8": np.uint8(200),
    "np.str_": np.str_("s"),
    "np.bytes_": np.bytes_(b"b"),
    "IntEnum": Level.HIGH,
    "float subclass": Ratio(0.75),
    "bytes": b"text",
    "int64 min": -(2**63),
    "nan": math.nan,
}


@pytest.mark.parametrize("value", CONVERTED_ALIKE.values(), ids=CONVERTED_ALIKE.keys())
def test_event_data_is_converted_alike(torch_monitor, value):
    theirs = torch_monitor.Event("x", WHEN, {"v": value}).data["v"]
    mine = ours.Event("x", WHEN, {"v": value}).data["v"]
    assert (type(mine), repr(mine)) == (type(theirs), repr(theirs))


REFUSED_ALIKE = {
    "beyond int64": (2**63, ValueError),
    "np.uint64 max": (np.uint64(2**64 - 1), ValueError),
    "bytearray": (bytearray(b"x"), TypeError),
    "None": (None, TypeError),
    "1-element array": (np.array([1.0]), TypeError),
    "np.datetime64": (np.datetime64("2024-01-01"), TypeError),
    "complex": (1j, TypeError),
}


@pytest.mark.parametrize(("value", "error"), REFUSED_ALIKE.values(), ids=REFUSED_ALIKE.keys())
def test_event_data_is_refused_alike(torch_monitor, value, error):
    for monitor in (torch_monitor, ours):
        with pytest.raises(error):
            monitor.Event("x", WHEN, {"v": value})


def test_a_tensor_is_no_event_data_in_either(torch_monitor):
    import torch

    for monitor in (torch_monitor, ours):
        with pytest.raises(TypeError):
            monitor.Event("x", WHEN, {"v": torch.tensor(0.5)})


def test_bytes_names_and_keys_and_a_date_are_taken_alike(torch_monitor):
    def scenario(monitor):
        event = monitor.Event(b"eval", date(2024, 5, 1), {b"acc": 1})
        event.timestamp = date(2024, 5, 2)
        stat = monitor.Stat(b"s", [monitor.Aggregation.COUNT], HOUR)
        return [event.name, type(event.name), event.timestamp, event.data, stat.name, type(stat.name)]

    theirs, mine = both(torch_monitor, scenario)
    assert mine == theirs
    assert mine[0][:4] == ["eval", str, datetime(2024, 5, 2), {"acc": 1}]


def test_a_lone_surrogate_is_refused_by_both_as_a_name_or_key(torch_monitor):
    for monitor in (torch_monitor, ours):
        with pytest.raises(TypeError):
            monitor.Event("\udcff", WHEN, {})
        with pytest.raises(TypeError):
            monitor.Event("x", WHEN, {"\udcff": 1})


def test_a_lone_surrogate_as_a_data_value_is_a_type_error_where_torch_says_runtime_error(torch_monitor):
    with pytest.raises(RuntimeError, match="utf-8"):
        torch_monitor.Event("x", WHEN, {"v": "\udcff"})
    with pytest.raises(TypeError, match="UTF-8"):
        ours.Event("x", WHEN, {"v": "\udcff"})


# Deliberate differences: each test pins what torch does and what we do instead.


def test_numpy_bool_stays_bool_where_torch_makes_it_float(torch_monitor):
    assert torch_monitor.Event("b", WHEN, {"flag": np.bool_(True)}).data == {"flag": 1.0}
    assert type(ours.Event("b", WHEN, {"flag": np.bool_(True)}).data["flag"]) is bool


def test_a_0d_array_is_event_data_where_torch_refuses_it(torch_monitor):
    with pytest.raises(TypeError):
        torch_monitor.Event("x", WHEN, {"v": np.array(0.5, dtype=np.float32)})
    assert ours.Event("x", WHEN, {"v": np.array(0.5, dtype=np.float32)}).data == {"v": 0.5}


def test_a_numpy_complex_is_refused_where_torch_keeps_its_real_part(torch_monitor):
    with pytest.warns(np.exceptions.ComplexWarning):
        assert torch_monitor.Event("x", WHEN, {"v": np.complex128(1 + 2j)}).data == {"v": 1.0}
    with pytest.raises(TypeError, match="'v'"):
        ours.Event("x", WHEN, {"v": np.complex128(1 + 2j)})


def test_bytes_that_are_not_utf8_are_refused_at_once_where_torch_fails_on_every_read(torch_monitor):
    event = torch_monitor.Event("x", WHEN, {"v": b"\xff"})
    with pytest.raises(TypeError):
        event.data  # noqa: B018
    with pytest.raises(TypeError, match="UTF-8"):
        ours.Event("x", WHEN, {"v": b"\xff"})


def test_an_aware_timestamp_keeps_its_zone_where_torch_reads_it_as_local_time(torch_monitor):
    aware = datetime(2024, 5, 1, 12, tzinfo=timezone(timedelta(hours=5)))
    assert torch_monitor.Event("x", aware, {}).timestamp == datetime(2024, 5, 1, 12)
    assert ours.Event("x", aware, {}).timestamp == aware
    assert ours.Event("x", aware, {}).timestamp.tzinfo is aware.tzinfo


def test_a_timestamp_far_from_now_is_kept_where_torch_wraps_it_around(torch_monitor):
    far = datetime(1, 1, 1)  # torch holds nanoseconds in 64 bits: about 1678 to 2262
    assert torch_monitor.Event("x", far, {}).timestamp != far
    assert ours.Event("x", far, {}).timestamp == far


def test_a_time_of_day_is_no_timestamp_where_torch_puts_it_on_1_january_1970(torch_monitor):
    from datetime import time as time_of_day

    assert torch_monitor.Event("x", time_of_day(13, 30), {}).timestamp == datetime(1970, 1, 1, 13, 30)
    with pytest.raises(TypeError, match="timestamp"):
        ours.Event("x", time_of_day(13, 30), {})  # type: ignore[arg-type]


def test_an_int_window_size_is_seconds_where_torch_refuses_it(torch_monitor):
    with pytest.raises(TypeError):
        torch_monitor.Stat("s", [torch_monitor.Aggregation.SUM], 1)
    now = [0]
    stat = ours.Stat("s", [ours.Aggregation.COUNT], 1, clock=lambda: now[0])
    _, events = record(ours, lambda monitor: [stat.add(1.0), now.__setitem__(0, 10**9), stat.add(1.0)])
    assert [data for _, data in events] == [{"s.count": 1.0}]
    stat.close()


def test_a_negative_window_size_is_refused_where_torch_takes_it(torch_monitor):
    torch_monitor.Stat("s", [torch_monitor.Aggregation.SUM], timedelta(seconds=-1))
    with pytest.raises(ValueError, match="1 millisecond"):
        ours.Stat("s", [ours.Aggregation.SUM], timedelta(seconds=-1))


def test_an_int_too_big_for_a_float_is_an_overflow_error_where_torch_says_type_error(torch_monitor):
    with pytest.raises(TypeError):
        torch_monitor.Stat("s", [torch_monitor.Aggregation.SUM], HOUR).add(10**400)
    with pytest.raises(OverflowError):
        ours.Stat("s", [ours.Aggregation.SUM], HOUR).add(10**400)


def full_torch_window(torch_monitor: ModuleType, window_ms: int):
    """A torch Stat (max_samples=2) whose window was filled by 1.0 and 2.0, 3.0 dropped: retried
    until the three adds fall in one window of torch's clock (steady_clock, our monotonic clock)."""
    while True:
        window = time.monotonic_ns() // NS_PER_MS // window_ms
        stat = torch_monitor.Stat("s", [torch_monitor.Aggregation.SUM], timedelta(milliseconds=window_ms), 2)
        for value in (1.0, 2.0, 3.0):
            stat.add(value)
        if time.monotonic_ns() // NS_PER_MS // window_ms == window:
            return stat, window


def test_get_keeps_a_full_window_where_torch_forgets_it_at_the_next_windows_first_add(torch_monitor):
    stat, window = full_torch_window(torch_monitor, 1)
    assert stat.get() == {torch_monitor.Aggregation.SUM: 3.0}
    while time.monotonic_ns() // NS_PER_MS == window:  # spins (no sleep) into the next window
        pass
    stat.add(5.0)
    assert stat.get() == {torch_monitor.Aggregation.SUM: 0.0}

    now = [0]
    mine = ours.Stat("s", [ours.Aggregation.SUM], timedelta(milliseconds=1), 2, clock=lambda: now[0])
    for value in (1.0, 2.0, 3.0):
        mine.add(value)
    now[0] = NS_PER_MS
    mine.add(5.0)
    assert mine.get() == {ours.Aggregation.SUM: 3.0}

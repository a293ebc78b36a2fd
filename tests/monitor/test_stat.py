import math
import time
from datetime import datetime, timedelta

import pytest

from tallyboard import monitor
from tallyboard.monitor import Aggregation, Stat
from tallyboard.monitor.window import FOLD_INTERVAL_MS

NS_PER_MS = 1_000_000

ALL = list(Aggregation)
SECOND = timedelta(seconds=1)
HOUR = timedelta(hours=1)
NAN = math.nan


def test_window_size_is_truncated_to_whole_milliseconds(clock, recorder):
    stat = Stat("s", [Aggregation.COUNT], timedelta(microseconds=1999), clock=clock)  # 1 ms
    stat.add(1.0)
    clock.set(ms=1)
    stat.add(1.0)
    assert recorder.stat_data == [{"s.count": 1.0}]


def test_a_float_window_size_is_seconds(clock, recorder):
    stat = Stat("s", [Aggregation.COUNT], 0.25, clock=clock)
    stat.add(1.0)
    clock.set(ms=249)
    stat.add(1.0)
    assert recorder.events == []
    clock.set(ms=250)
    stat.add(1.0)
    assert recorder.stat_data == [{"s.count": 2.0}]


@pytest.mark.parametrize("window", [timedelta(microseconds=999), timedelta(0), timedelta(seconds=-1), 0.0005])
def test_window_under_one_millisecond_is_a_value_error(window):
    with pytest.raises(ValueError, match="1 millisecond"):
        Stat("s", [Aggregation.MEAN], window)


@pytest.mark.parametrize("window", ["1s", None, True])
def test_window_of_another_type_is_a_type_error(window):
    with pytest.raises(TypeError, match="window_size"):
        Stat("s", [Aggregation.MEAN], window)


def test_constructor_rejects_bad_name_aggregations_clock_and_max_samples():
    with pytest.raises(TypeError, match="name"):
        Stat(None, [Aggregation.MEAN], SECOND)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Aggregation"):
        Stat("s", ["mean"], SECOND)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="clock"):
        Stat("s", [Aggregation.MEAN], SECOND, clock=123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Stat("s", [Aggregation.MEAN], SECOND, 2.5)  # type: ignore[arg-type]


def test_name_may_be_bytes_as_in_torch_but_must_be_utf8(clock, recorder):
    stat = Stat(b"step_time", [Aggregation.COUNT], SECOND, clock=clock)
    assert (type(stat.name), stat.name) == (str, "step_time")
    stat.add(1.0)
    stat.close()
    assert recorder.stat_data == [{"step_time.count": 1.0}]
    with pytest.raises(TypeError, match="UTF-8"):
        Stat(b"\xff", [Aggregation.COUNT], SECOND)


def test_name_is_read_only():
    stat = Stat("step_time", [Aggregation.MEAN], SECOND)
    assert stat.name == "step_time"
    with pytest.raises(AttributeError):
        stat.name = "other"  # type: ignore[misc]


def test_get_is_all_zeros_before_the_first_window(clock):
    stat = Stat("s", ALL, SECOND, clock=clock)
    assert stat.get() == dict.fromkeys(ALL, 0.0)
    stat.add(5.0)
    assert stat.get() == dict.fromkeys(ALL, 0.0)  # the window is still open
    assert stat.count == 1


def test_window_event_has_every_aggregation_as_a_float_including_value(clock, recorder):
    stat = Stat("loss", ALL, SECOND, clock=clock)
    for value in (3.0, 1.0, 4.0, 2):
        stat.add(value)
    clock.set(s=1)
    stat.add(100.0)
    (event,) = recorder.events
    assert event.name == monitor.STAT_EVENT == "torch.monitor.Stat"
    assert event.data == {
        "loss.value": 2.0,
        "loss.mean": 2.5,
        "loss.count": 4.0,
        "loss.sum": 10.0,
        "loss.max": 4.0,
        "loss.min": 1.0,
    }
    assert all(type(v) is float for v in event.data.values())
    assert stat.get() == {
        Aggregation.VALUE: 2.0,
        Aggregation.MEAN: 2.5,
        Aggregation.COUNT: 4.0,
        Aggregation.SUM: 10.0,
        Aggregation.MAX: 4.0,
        Aggregation.MIN: 1.0,
    }
    assert stat.count == 1  # the add that closed the window counts in the new one


def test_only_the_configured_aggregations_are_reported(clock, recorder):
    stat = Stat("s", [Aggregation.MAX, Aggregation.MEAN, Aggregation.MAX], SECOND, clock=clock)
    stat.add(-1.0)
    stat.add(-3.0)
    stat.close()
    assert recorder.stat_data == [{"s.mean": -2.0, "s.max": -1.0}]
    assert stat.get() == {Aggregation.MEAN: -2.0, Aggregation.MAX: -1.0}


def test_event_timestamp_is_the_local_wall_clock_when_logged(clock, recorder):
    stat = Stat("s", [Aggregation.COUNT], SECOND, clock=clock)
    stat.add(1.0)
    before = datetime.now()
    stat.close()
    after = datetime.now()
    (event,) = recorder.events
    assert event.timestamp.tzinfo is None
    assert before <= event.timestamp <= after


def test_windows_are_aligned_to_multiples_of_the_window_not_to_construction(make_clock, recorder):
    clock = make_clock(start_ns=1_700 * NS_PER_MS)  # constructed (and first add) at 1.7 s
    stat = Stat("s", [Aggregation.COUNT], SECOND, clock=clock)
    stat.add(1.0)
    clock.set(ms=1_999)
    stat.add(1.0)
    assert recorder.events == []
    clock.set(ms=2_000)  # a new window starts at 2 s, not at 2.7 s
    stat.add(1.0)
    assert recorder.stat_data == [{"s.count": 2.0}]
    clock.set(ms=2_999)
    stat.add(1.0)
    clock.set(ms=3_000)
    stat.add(1.0)
    assert recorder.stat_data == [{"s.count": 2.0}, {"s.count": 2.0}]


def test_the_window_is_checked_only_by_add(clock, recorder):
    stat = Stat("s", [Aggregation.COUNT], SECOND, clock=clock)
    stat.add(1.0)
    clock.set(s=5)
    assert recorder.events == []
    assert stat.count == 1
    assert stat.get() == {Aggregation.COUNT: 0.0}


def test_after_a_long_gap_exactly_one_event_is_logged(clock, recorder):
    stat = Stat("s", [Aggregation.SUM], SECOND, clock=clock)
    stat.add(2.0)
    clock.set(s=3600)
    stat.add(1.0)
    assert recorder.stat_data == [{"s.sum": 2.0}]


def test_empty_windows_log_nothing(clock, recorder):
    stat = Stat("s", [Aggregation.SUM], SECOND, clock=clock)
    for second in range(5):
        clock.set(s=second)
        assert stat.count == 0
    stat.close()
    assert recorder.events == []


def test_max_samples_logs_the_window_at_once_and_drops_later_adds(clock, recorder):
    stat = Stat("s", [Aggregation.COUNT, Aggregation.SUM, Aggregation.VALUE], SECOND, 3, clock=clock)
    for value in (1, 2.0):
        stat.add(value)
    assert recorder.events == []
    stat.add(3.0)
    assert recorder.stat_data == [{"s.value": 3.0, "s.count": 3.0, "s.sum": 6.0}]
    for value in (10.0, 20.0, 7):
        stat.add(value)  # dropped: not counted
    with pytest.raises(TypeError, match="number"):
        stat.add("4")  # checked even when it would be dropped
    assert stat.count == 0
    assert stat.get()[Aggregation.SUM] == 6.0
    clock.set(s=1)
    stat.add(5.0)
    assert stat.count == 1
    stat.close()
    assert recorder.stat_data[1] == {"s.value": 5.0, "s.count": 1.0, "s.sum": 5.0}


@pytest.mark.parametrize("max_samples", [1, 0, -5])
def test_max_samples_of_one_or_less_means_one_sample_per_window(clock, recorder, max_samples):
    stat = Stat("s", [Aggregation.VALUE], SECOND, max_samples, clock=clock)
    stat.add(1.0)
    stat.add(2.0)
    clock.set(s=1)
    stat.add(3.0)
    stat.add(4.0)
    assert recorder.stat_data == [{"s.value": 1.0}, {"s.value": 3.0}]


def test_max_samples_above_the_buffer_bound_is_exact_across_folds(make_clock, recorder):
    clock = make_clock(step_ns=NS_PER_MS // 10)  # folds every FOLD_INTERVAL_MS of readings
    cap = 70_000
    stat = Stat("s", [Aggregation.COUNT, Aggregation.SUM], timedelta(hours=1), cap, clock=clock)
    for _ in range(cap + 5):
        stat.add(1.0)
    assert recorder.stat_data == [{"s.count": float(cap), "s.sum": float(cap)}]


def test_folding_the_buffer_keeps_every_aggregate_exact(make_clock, recorder):
    clock = make_clock(step_ns=NS_PER_MS // 4)  # a fold every 4 * FOLD_INTERVAL_MS adds
    stat = Stat("s", ALL, timedelta(hours=1), clock=clock)
    values = [float((i * 7919) % 1000) - 500.0 for i in range(20 * FOLD_INTERVAL_MS * 4 + 3)]
    for value in values:
        stat.add(value)
    stat.close()
    assert recorder.stat_data == [
        {
            "s.value": values[-1],
            "s.mean": sum(values) / len(values),
            "s.count": float(len(values)),
            "s.sum": float(sum(values)),
            "s.max": max(values),
            "s.min": min(values),
        }
    ]


def test_add_takes_any_real_number_and_rejects_the_rest_without_losing_data(clock, recorder, torch_monitor):
    import numpy as np
    import torch

    stat = Stat("s", [Aggregation.SUM, Aggregation.COUNT], SECOND, clock=clock)
    for value in (1, True, 0.5, np.float32(0.25), np.int64(2), torch.tensor(0.25)):
        stat.add(value)
    for bad in ("1.5", None, [1.0], b"2"):
        with pytest.raises(TypeError, match="number"):
            stat.add(bad)
    with pytest.raises(OverflowError):
        stat.add(10**400)
    assert stat.count == 6
    stat.close()
    assert recorder.stat_data == [{"s.count": 6.0, "s.sum": 5.0}]


def test_close_logs_the_open_window_and_later_adds_raise(clock, recorder):
    stat = Stat("s", [Aggregation.COUNT], SECOND, clock=clock)
    stat.add(1.0)
    stat.close()
    stat.close()
    assert recorder.stat_data == [{"s.count": 1.0}]
    with pytest.raises(ValueError, match="closed"):
        stat.add(1.0)


def test_closing_an_empty_window_logs_nothing(clock, recorder):
    Stat("s", [Aggregation.COUNT], SECOND, clock=clock).close()
    assert recorder.events == []


def test_context_manager_closes(clock, recorder):
    with Stat("s", [Aggregation.MAX], SECOND, clock=clock) as stat:
        stat.add(4.0)
        assert recorder.events == []
    assert recorder.stat_data == [{"s.max": 4.0}]


def test_destroying_the_stat_logs_its_open_window(clock, recorder):
    stat = Stat("s", [Aggregation.COUNT], SECOND, clock=clock)
    stat.add(1.0)
    del stat  # no gc.collect(): nothing refers back to the stat
    assert recorder.stat_data == [{"s.count": 1.0}]


def test_a_kept_add_outlives_its_stat_and_logs_when_released(clock, recorder):
    add = Stat("s", [Aggregation.COUNT], SECOND, clock=clock).add
    add(1.0)
    add(2.0)
    assert recorder.events == []
    del add
    assert recorder.stat_data == [{"s.count": 2.0}]


def test_a_failing_handler_on_the_final_log_is_a_warning(clock, registered):
    def failing(event):
        raise RuntimeError("disk full")

    registered.append(monitor.register_event_handler(failing))
    stat = Stat("s", [Aggregation.COUNT], SECOND, clock=clock)
    stat.add(1.0)
    with pytest.warns(RuntimeWarning, match="disk full"):
        stat.close()
    other = Stat("t", [Aggregation.COUNT], SECOND, clock=clock)
    other.add(1.0)
    with pytest.warns(RuntimeWarning, match="disk full"):
        del other


def test_a_failing_handler_propagates_from_add_and_the_sample_still_counts(clock, registered):
    def failing(event):
        raise RuntimeError("handler broke")

    stat = Stat("s", [Aggregation.COUNT], SECOND, clock=clock)
    stat.add(1.0)
    registered.append(monitor.register_event_handler(failing))
    clock.set(s=1)
    with pytest.raises(RuntimeError, match="handler broke"):
        stat.add(1.0)
    assert stat.get() == {Aggregation.COUNT: 1.0}
    assert stat.count == 1
    with pytest.warns(RuntimeWarning, match="handler broke"):
        stat.close()


def test_default_clock_is_monotonic_with_aligned_windows(monkeypatch, recorder):
    now = [100.9995]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    stat = Stat("s", [Aggregation.COUNT], timedelta(milliseconds=500))
    stat.add(1.0)
    now[0] = 101.0004
    stat.add(1.0)
    now[0] = 101.4999
    stat.add(1.0)
    now[0] = 101.5001
    stat.add(1.0)
    assert recorder.stat_data == [{"s.count": 1.0}, {"s.count": 2.0}]


def test_repr_names_the_stat():
    assert repr(Stat("s", [Aggregation.MIN, Aggregation.MEAN], SECOND)) == "Stat('s', [MEAN, MIN])"


def test_log_open_windows_logs_what_each_stat_holds_and_keeps_it_open():
    events = []
    handle = monitor.register_event_handler(events.append)
    now = [0]
    stat = Stat("s", [Aggregation.SUM], timedelta(seconds=10), clock=lambda: now[0])
    empty = Stat("empty", [Aggregation.SUM], timedelta(seconds=10), clock=lambda: now[0])
    try:
        stat.add(1.0)
        stat.add(2.0)
        monitor.log_open_windows()
        assert [event.data for event in events] == [{"s.sum": 3.0}]  # nothing for the empty Stat
        stat.add(4.0)  # the same 10 s window, still open: logged as another event when it ends
        now[0] = 10_000_000_000
        stat.add(8.0)
        assert [event.data for event in events] == [{"s.sum": 3.0}, {"s.sum": 4.0}]
    finally:
        stat.close()
        empty.close()
        monitor.unregister_event_handler(handle)


def one_window(clock, recorder, batches: list[list[float]]) -> dict[str, str]:
    """Adds ``batches`` to one window, the buffer folded between consecutive batches (the clock moves
    FOLD_INTERVAL_MS on), and returns the logged aggregates as reprs (so NaN equals NaN)."""
    stat = Stat("s", [Aggregation.MEAN, Aggregation.SUM, Aggregation.MAX, Aggregation.MIN], HOUR, clock=clock)
    for index, batch in enumerate(batches):
        clock.set(ms=index * FOLD_INTERVAL_MS)
        for value in batch:
            stat.add(value)
    stat.close()
    (data,) = recorder.stat_data
    return {key.partition(".")[2]: repr(value) for key, value in data.items()}


@pytest.mark.parametrize(
    "batches",
    [
        [[2.0, NAN, -1.0, 5.0, 0.0]],
        [[2.0], [NAN, -1.0, 5.0, 0.0]],
        [[2.0], [NAN, -1.0, 5.0], [0.0]],  # folded so, the old fold gave MIN 0 and MAX 2
        [[2.0, NAN], [-1.0, 5.0, 0.0]],
    ],
)
def test_min_and_max_pass_over_a_later_nan_wherever_the_folds_fall(clock, recorder, batches):
    """As torch's Stat: a sample replaces MIN (MAX) only when it compares lower (higher)."""
    assert one_window(clock, recorder, batches) == {"mean": "nan", "sum": "nan", "max": "5.0", "min": "-1.0"}


@pytest.mark.parametrize("batches", [[[NAN, 2.0, -1.0]], [[NAN], [2.0, -1.0]], [[NAN, 2.0], [-1.0]]])
def test_a_nan_first_in_its_window_is_its_min_and_max(clock, recorder, batches):
    assert one_window(clock, recorder, batches) == {"mean": "nan", "sum": "nan", "max": "nan", "min": "nan"}


@pytest.mark.parametrize(
    ("batches", "total"),
    [
        ([[1e16, 1.0, 1.0, -1e16]], 0.0),  # 1e16 + 1.0 rounds back to 1e16, twice
        ([[1e16], [1.0, 1.0], [-1e16]], 0.0),
        ([[0.1] * 10], 0.9999999999999999),
        ([[0.1] * 3, [0.1] * 7], 0.9999999999999999),
    ],
)
def test_sum_and_mean_add_in_order_rounding_each_step_wherever_the_folds_fall(
    clock, recorder, batches, total
):
    """A plain sum of doubles, as torch's Stat keeps it; Python 3.12's sum() would give 2.0 and 1.0."""
    count = sum(len(batch) for batch in batches)
    data = one_window(clock, recorder, batches)
    assert (data["sum"], data["mean"]) == (repr(total), repr(total / count))

import enum
import threading
from datetime import date, datetime, time, timedelta, timezone

import numpy as np
import pytest

from tallyboard import monitor
from tallyboard.monitor import Event

NOW = datetime(2024, 5, 1, 12, 0, 0)


def test_event_keeps_name_timestamp_and_typed_data():
    event = Event("loss", NOW, {"s": "text", "f": 1.5, "i": 3, "b": True})
    assert event.name == "loss"
    assert event.timestamp == NOW
    assert event.data == {"s": "text", "f": 1.5, "i": 3, "b": True}
    assert [type(v) for v in event.data.values()] == [str, float, int, bool]  # bool stays bool


def test_event_requires_all_three_arguments():
    with pytest.raises(TypeError):
        Event("loss", NOW)  # type: ignore[call-arg]


@pytest.mark.parametrize("bad", [None, [1], {"a": 1}, bytearray(b"x"), 1j])
def test_event_rejects_other_value_types_naming_the_key(bad):
    with pytest.raises(TypeError, match="'weird'"):
        Event("x", NOW, {"ok": 1, "weird": bad})


class Level(enum.IntEnum):
    HIGH = 3


class Colour(str, enum.Enum):  # str() of a member is "Colour.RED", its characters are "red"
    RED = "red"


class Ratio(float):
    pass


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        (np.float32(0.5), 0.5),
        (np.float32([0.5, 1.5]).mean(), 1.0),  # the common case: loss=array.mean()
        (np.float64(0.25), 0.25),
        (np.float16(1.5), 1.5),
        (np.longdouble(2.5), 2.5),
        (np.int64(-7), -7),
        (np.uint8(200), 200),
        (np.bool_(True), True),
        (np.str_("s"), "s"),
        (np.bytes_(b"b"), "b"),
        (np.array(0.5, dtype=np.float32), 0.5),
        (np.array(3), 3),
        (Level.HIGH, 3),
        (Colour.RED, "red"),
        (Ratio(0.75), 0.75),
        (b"text", "text"),
        (-(2**63), -(2**63)),
    ],
)
def test_event_data_becomes_plain_str_int_float_or_bool_as_in_torch(value, plain):
    event = Event("x", NOW, {"v": value})
    assert [(type(v), v) for v in event.data.values()] == [(type(plain), plain)]
    event.data = {"w": value}
    assert [(type(v), v) for v in event.data.values()] == [(type(plain), plain)]


@pytest.mark.parametrize(
    "bad", [np.array([1.0]), np.complex128(1 + 2j), np.datetime64("2024-01-01"), np.array(None)]
)
def test_event_refuses_numpy_values_that_are_no_single_number_or_text(bad):
    with pytest.raises(TypeError, match="'v'"):
        Event("x", NOW, {"v": bad})


@pytest.mark.parametrize("big", [2**63, -(2**63) - 1, np.uint64(2**64 - 1)])
def test_event_int_data_must_fit_in_64_bits_as_in_torch(big):
    with pytest.raises(ValueError, match="64 bits"):
        Event("x", NOW, {"v": big})


def test_event_name_and_keys_may_be_bytes_and_become_str():
    event = Event(b"loss", NOW, {b"k": 1, np.str_("n"): 2})
    assert (event.name, event.data) == ("loss", {"k": 1, "n": 2})
    assert type(event.name) is str
    assert [type(key) for key in event.data] == [str, str]


@pytest.mark.parametrize("bad", [b"\xff", "\udcff"])
def test_event_text_that_is_not_utf8_is_refused(bad):
    with pytest.raises(TypeError, match="UTF-8"):
        Event(bad, NOW, {})
    with pytest.raises(TypeError, match="UTF-8"):
        Event("x", NOW, {bad: 1})
    with pytest.raises(TypeError, match="UTF-8"):
        Event("x", NOW, {"v": bad})


def test_event_timestamp_of_a_date_is_its_midnight_and_a_subclass_a_plain_datetime():
    class Stamp(datetime):
        pass

    assert Event("x", date(2024, 5, 1), {}).timestamp == datetime(2024, 5, 1)
    plain = Event("x", Stamp(2024, 5, 1, 12, 30, 15, 250000, fold=1), {}).timestamp
    assert (type(plain), plain, plain.fold) == (datetime, datetime(2024, 5, 1, 12, 30, 15, 250000), 1)
    event = Event("x", NOW, {})
    event.timestamp = date(2023, 1, 2)
    assert (type(event.timestamp), event.timestamp) == (datetime, datetime(2023, 1, 2))


def test_event_timestamp_keeps_its_timezone():
    aware = datetime(2024, 5, 1, 12, tzinfo=timezone(timedelta(hours=5)))
    assert Event("x", aware, {}).timestamp == aware
    assert Event("x", aware, {}).timestamp.utcoffset() == timedelta(hours=5)


def test_event_rejects_bad_name_timestamp_keys_and_data():
    with pytest.raises(TypeError, match="name"):
        Event(1, NOW, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timestamp"):
        Event("x", "2024-05-01", {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timestamp"):
        Event("x", time(13, 30), {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys"):
        Event("x", NOW, {1: 2})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="mapping"):
        Event("x", NOW, [("a", 1)])  # type: ignore[arg-type]


def test_event_setters_validate_like_the_constructor():
    event = Event("x", NOW, {"a": 1})
    event.name = "y"
    event.data = {"b": 2.0}
    assert (event.name, event.data) == ("y", {"b": 2.0})
    with pytest.raises(TypeError, match="'c'"):
        event.data = {"c": object()}
    assert event.data == {"b": 2.0}


def test_event_data_is_a_copy_that_handlers_cannot_change():
    event = Event("x", NOW, {"a": 1})
    event.data["a"] = 2
    assert event.data == {"a": 1}


def test_event_equality_is_identity():
    first = Event("x", NOW, {"a": 1})
    same_contents = Event("x", NOW, {"a": 1})
    assert first == first
    assert first != same_contents
    assert len({first, same_contents}) == 2


def test_event_repr_shows_its_contents():
    assert repr(Event("x", NOW, {"a": 1})) == f"Event(name='x', timestamp={NOW!r}, data={{'a': 1}})"


def test_data_value_t_covers_the_allowed_types():
    assert all(isinstance(v, monitor.data_value_t) for v in ("s", 1.0, 1, True))
    assert not isinstance(None, monitor.data_value_t)


def test_handlers_run_in_registration_order_and_twice_when_registered_twice(registered):
    calls = []

    def first(event):
        calls.append(("first", event))

    def second(event):
        calls.append(("second", event))

    registered += [monitor.register_event_handler(h) for h in (first, second, first)]
    event = Event("x", NOW, {})
    monitor.log_event(event)
    assert calls == [("first", event), ("second", event), ("first", event)]


def test_first_handler_exception_propagates_and_stops_delivery(registered):
    calls = []

    def failing(event):
        raise RuntimeError("handler broke")

    registered += [monitor.register_event_handler(h) for h in (calls.append, failing, calls.append)]
    with pytest.raises(RuntimeError, match="handler broke"):
        monitor.log_event(Event("x", NOW, {}))
    assert len(calls) == 1


def test_log_event_rejects_non_events():
    with pytest.raises(TypeError, match="Event"):
        monitor.log_event({"name": "x"})  # type: ignore[arg-type]


def test_unregister_twice_is_a_noop_and_never_removes_another_registration(registered):
    calls = []
    first = monitor.register_event_handler(calls.append)
    registered.append(monitor.register_event_handler(calls.append))
    assert isinstance(first, monitor.EventHandlerHandle)
    monitor.unregister_event_handler(first)
    monitor.unregister_event_handler(first)
    monitor.log_event(Event("x", NOW, {}))
    assert len(calls) == 1  # the second registration of the same callable is still there


@pytest.mark.parametrize("bad", [None, 5, "handler"])
def test_register_rejects_none_and_non_callables(bad):
    with pytest.raises(TypeError, match="callable"):
        monitor.register_event_handler(bad)


def test_unregister_rejects_what_is_not_a_handle():
    with pytest.raises(TypeError, match="EventHandlerHandle"):
        monitor.unregister_event_handler(print)  # type: ignore[arg-type]


@pytest.mark.timeout(10)
def test_handlers_may_log_register_and_unregister_from_any_thread(registered):
    seen = []

    def reentrant(event):
        seen.append(event.name)
        if event.name != "outer":
            return
        monitor.log_event(Event("inner", NOW, {}))  # same thread
        handle = monitor.register_event_handler(lambda e: seen.append("late " + e.name))
        worker = threading.Thread(target=monitor.log_event, args=(Event("from thread", NOW, {}),))
        worker.start()
        worker.join(5)
        assert not worker.is_alive(), "log_event from another thread deadlocked"
        monitor.unregister_event_handler(handle)
        monitor.unregister_event_handler(handle)

    registered.append(monitor.register_event_handler(reentrant))
    monitor.log_event(Event("outer", NOW, {}))
    assert seen == ["outer", "inner", "from thread", "late from thread"]

import threading
from datetime import datetime

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


@pytest.mark.parametrize("bad", [None, [1], {"a": 1}, b"x", 1j])
def test_event_rejects_other_value_types_naming_the_key(bad):
    with pytest.raises(TypeError, match="'weird'"):
        Event("x", NOW, {"ok": 1, "weird": bad})


def test_event_rejects_bad_name_timestamp_keys_and_data():
    with pytest.raises(TypeError, match="name"):
        Event(1, NOW, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timestamp"):
        Event("x", "2024-05-01", {})  # type: ignore[arg-type]
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

"""Events and the process-wide registry of handlers that receive them.

Handlers run synchronously, in the thread that logs, in registration order. The registry is an
immutable tuple that is replaced (under a lock) on every change, so ``log_event`` reads it without
locking: a handler may log, register or unregister from any thread without deadlocking, and an
event is delivered to the handlers registered when its delivery began.
"""

import threading
from collections.abc import Callable, Mapping
from datetime import date, datetime

from tallyboard.monitor.conversion import data_value, data_value_t, text, timestamp


class Event:
    """A named, timestamped record of key/value data, delivered to every registered handler.

    Arguments are converted as torch's binding converts them (see ``conversion``): bytes become
    str, numpy scalars and subclasses become plain ``int``/``float``/``str``, a ``date`` becomes
    its midnight. Equality is identity, as in torch: two events with the same contents are still
    two events.
    """

    __slots__ = ("_data", "_name", "_timestamp")

    def __init__(self, name: str | bytes, timestamp: date, data: Mapping[str, object]) -> None:
        self.name = name
        self.timestamp = timestamp
        self.data = data

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, name: str | bytes) -> None:
        self._name = text(name, "Event name")

    @property
    def timestamp(self) -> datetime:
        return self._timestamp

    @timestamp.setter
    def timestamp(self, value: date) -> None:
        self._timestamp = timestamp(value)

    @property
    def data(self) -> dict[str, data_value_t]:
        """A copy, as in torch: a handler that edits it cannot change what the next handler sees."""
        return dict(self._data)

    @data.setter
    def data(self, data: Mapping[str, object]) -> None:
        if not isinstance(data, Mapping):
            raise TypeError(f"Event data must be a mapping, not {type(data).__name__}")
        converted: dict[str, data_value_t] = {}
        for key, value in data.items():
            name = text(key, "Event data keys")
            converted[name] = data_value(value, name)
        self._data = converted

    def __repr__(self) -> str:
        return f"Event(name={self._name!r}, timestamp={self._timestamp!r}, data={self._data!r})"


def _trusted_event(name: str, timestamp: datetime, data: dict[str, data_value_t]) -> Event:
    """Builds an Event from values already known to be valid (a Stat's window), skipping the checks."""
    event = Event.__new__(Event)
    event._name = name
    event._timestamp = timestamp
    event._data = data
    return event


class EventHandlerHandle:
    """The receipt of one ``register_event_handler`` call; pass it to ``unregister_event_handler``."""

    __slots__ = ("_handler",)

    def __init__(self, handler: Callable[[Event], None]) -> None:
        self._handler = handler

    def __repr__(self) -> str:
        return f"<EventHandlerHandle for {self._handler!r}>"


_registry_lock = threading.Lock()
_handles: tuple[EventHandlerHandle, ...] = ()
_handlers: tuple[Callable[[Event], None], ...] = ()  # the handlers of _handles, read by log_event


def log_event(event: Event) -> None:
    """Calls every registered handler with ``event``; the first exception propagates to the caller."""
    if not isinstance(event, Event):
        raise TypeError(f"log_event() takes an Event, not {type(event).__name__}")
    for handler in _handlers:
        handler(event)


def register_event_handler(handler: Callable[[Event], None]) -> EventHandlerHandle:
    """Adds ``handler`` to the handlers called by ``log_event``; registering it twice calls it twice."""
    global _handles, _handlers
    if not callable(handler):
        raise TypeError(f"event handler must be callable, not {type(handler).__name__}")
    handle = EventHandlerHandle(handler)
    with _registry_lock:
        _handles = (*_handles, handle)
        _handlers = tuple(h._handler for h in _handles)
    return handle


def unregister_event_handler(handle: EventHandlerHandle) -> None:
    """Removes the registration behind ``handle``; a handle that is not registered is ignored."""
    global _handles, _handlers
    if not isinstance(handle, EventHandlerHandle):
        raise TypeError(f"expected an EventHandlerHandle, not {type(handle).__name__}")
    with _registry_lock:
        if handle in _handles:
            _handles = tuple(h for h in _handles if h is not handle)
            _handlers = tuple(h._handler for h in _handles)

"""A dependency-free port of ``torch.monitor``: windowed Stats that log Events to handlers.

Same names, signatures, conversions and results as torch's, with its binding's bugs fixed (VALUE
is reported, a double unregister is harmless, a handler may log without deadlocking; docs/monitor.md
lists every difference), plus ``Stat(..., clock=)``, ``Stat.close()`` and ``log_open_windows()``.
Importing it imports only the standard library.
"""

from tallyboard.monitor.aggregation import COUNT, MAX, MEAN, MIN, SUM, VALUE, Aggregation
from tallyboard.monitor.conversion import data_value_t
from tallyboard.monitor.events import (
    Event,
    EventHandlerHandle,
    log_event,
    register_event_handler,
    unregister_event_handler,
)
from tallyboard.monitor.stat import STAT_EVENT, Stat
from tallyboard.monitor.tensorboard import TensorboardEventHandler
from tallyboard.monitor.window import log_open_windows

__all__ = [
    "COUNT",
    "MAX",
    "MEAN",
    "MIN",
    "STAT_EVENT",
    "SUM",
    "VALUE",
    "Aggregation",
    "Event",
    "EventHandlerHandle",
    "Stat",
    "TensorboardEventHandler",
    "data_value_t",
    "log_event",
    "log_open_windows",
    "register_event_handler",
    "unregister_event_handler",
]

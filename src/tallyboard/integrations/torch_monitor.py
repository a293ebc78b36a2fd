"""Bridge from the real ``torch.monitor`` to ``tallyboard.monitor``.

Code written for torch (``torch.monitor.log_event``, ``torch.monitor.Stat``) keeps working unchanged:
after ``bridge()``, every event torch emits is re-logged through ``tallyboard.monitor.log_event``, so
the handlers registered with tallyboard (e.g. ``ResultTableEventHandler``) receive it.

What torch's own binding loses is lost before the bridge sees it: a torch ``Stat`` never reports its
``VALUE`` aggregation, and torch turns ``bool`` event values into ``float`` (``True`` -> ``1.0``).
Use ``tallyboard.monitor.Stat`` directly to keep both.
"""

from __future__ import annotations

import threading
from typing import Any

from tallyboard import monitor
from tallyboard.integrations import require


class BridgeHandle:
    """Returned by ``bridge()``; ``remove()`` (or leaving a ``with`` block) stops forwarding."""

    def __init__(self, torch_monitor: Any, torch_handle: Any) -> None:
        self._torch_monitor = torch_monitor
        self._torch_handle = torch_handle
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self._torch_handle is not None

    def remove(self) -> None:
        """Stop forwarding; calling it again is a no-op (torch itself crashes on a double unregister)."""
        with self._lock:
            handle, self._torch_handle = self._torch_handle, None
        if handle is not None:
            self._torch_monitor.unregister_event_handler(handle)

    def __enter__(self) -> BridgeHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


def bridge() -> BridgeHandle:
    """Forward every event logged through ``torch.monitor`` to ``tallyboard.monitor``'s handlers.

    Each call registers one forwarder (two bridges deliver every event twice); the events arrive
    synchronously, in the thread that logged them, with their name, timestamp and data unchanged.
    """
    torch_monitor = require("torch.monitor", "the torch.monitor bridge")

    def forward(event: Any) -> None:
        monitor.log_event(monitor.Event(event.name, event.timestamp, dict(event.data)))

    return BridgeHandle(torch_monitor, torch_monitor.register_event_handler(forward))


def unbridge(handle: BridgeHandle) -> None:
    """Undo ``bridge()``: the same as ``handle.remove()``."""
    handle.remove()

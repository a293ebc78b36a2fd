"""Alert handlers: callables that receive every alert of this process (`register_alert_handler`),
called in a background thread of their own, so a slow webhook never blocks training or the
evaluator, and one that raises is logged and skipped, never propagated.

A handler gets an `Alert` (store/alert_content.py: run_id, title, text, level, step, time, rule,
stop, rep). Alerts still waiting when the process exits are delivered for up to `EXIT_WAIT`
seconds first.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from collections.abc import Callable

from tallyboard.store.alert_content import Alert

log = logging.getLogger(__name__)

Handler = Callable[[Alert], object]
EXIT_WAIT = 5.0

_handlers: list[Handler] = []
_pending: queue.Queue[Alert] = queue.Queue()
_started = threading.Lock()
_thread: threading.Thread | None = None


def register_alert_handler(handler: Handler) -> Handler:
    """Call `handler(alert)` for every alert recorded in this process from now on (in a
    background thread); returns it, so it can decorate a function."""
    if not callable(handler):
        raise TypeError(f"an alert handler must be callable, got {handler!r}")
    _handlers.append(handler)
    return handler


def unregister_alert_handler(handler: Handler) -> None:
    """Stop calling `handler`; one never registered is ignored."""
    if handler in _handlers:
        _handlers.remove(handler)


def deliver(alert: Alert) -> None:
    """Hand `alert` to the handlers, in the delivery thread (started by the first alert)."""
    global _thread
    if not _handlers:
        return
    with _started:
        if _thread is None or not _thread.is_alive():  # a forked child has no delivery thread
            _thread = threading.Thread(target=_deliver_forever, name="tallyboard-alerts", daemon=True)
            _thread.start()
    _pending.put(alert)


def wait_for_delivery(timeout: float | None = None) -> bool:
    """Wait until every alert handed over so far has reached the handlers; False on timeout."""
    done = threading.Event()

    def wait() -> None:
        _pending.join()
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done.wait(timeout)


def _deliver_forever() -> None:
    while True:
        alert = _pending.get()
        try:
            for handler in list(_handlers):
                try:
                    handler(alert)
                except Exception:  # a handler's failure is its own: report it, deliver the rest
                    log.warning("tallyboard: alert handler %r failed", handler, exc_info=True)
        finally:
            _pending.task_done()


atexit.register(wait_for_delivery, EXIT_WAIT)

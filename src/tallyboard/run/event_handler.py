"""From monitor events to a run: each Stat window becomes scalars, every other event a text record.

The handler runs inside ``Stat.add`` (or ``log_event``), in the caller's thread, possibly in the
innermost training loop. It therefore does nothing but hand values to the LogWriter, whose ``add_*``
methods only validate and enqueue: the caller never waits on the database.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tallyboard import monitor

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.run.writer import LogWriter

# The handler that owns the events logged by the current thread, if one does (see `exclusive_events`).
_owner = threading.local()


class ResultTableEventHandler:
    """A ``tallyboard.monitor`` event handler that logs to a LogWriter.

    - A Stat event (``monitor.STAT_EVENT``) gives one scalar per data item: the tag is the data key
      (``"train/step_time.mean"``), the step is the index of the window for that key (0, 1, 2, ...), or
      ``step()`` when a callable is given (e.g. ``lambda: trainer.global_step``).
    - Any other event gives a text record tagged with the event's name, holding its timestamp and
      data as JSON; its step counts the events of that name (or is ``step()``).

    When the run ends (``write_result``, ``close``, leaving its ``with`` block, the process ending),
    the open windows of the Stats are logged first (``monitor.log_open_windows``), so the last
    window of each lands in the run instead of reaching a run that no longer takes records. A Stat
    used after that still reaches the handler: like any monitor handler, an error it raises (the
    run is read-only) reaches the caller of ``Stat.add``/``log_event``; unregister the handler.
    """

    def __init__(self, writer: LogWriter, step: Callable[[], int] | None = None) -> None:
        writer.before_end(monitor.log_open_windows)
        self._writer = writer
        self._step = step
        self._counts: dict[tuple[bool, str], int] = {}
        self._lock = threading.Lock()

    def __call__(self, event: monitor.Event) -> None:
        owner = getattr(_owner, "handler", None)
        if owner is not None and owner is not self:
            return
        if event.name == monitor.STAT_EVENT:
            for key, value in event.data.items():
                self._writer.add_scalar(key, value, step=self._next_step(True, key))
        else:
            record = {"timestamp": event.timestamp.isoformat(), "data": event.data}
            text = json.dumps(record, ensure_ascii=False)
            self._writer.add_text(text, tag=event.name, step=self._next_step(False, event.name))

    def _next_step(self, is_scalar: bool, key: str) -> int:
        if self._step is not None:
            return self._step()
        with self._lock:  # Stats in several threads may close windows at the same time
            index = self._counts.get((is_scalar, key), 0)
            self._counts[(is_scalar, key)] = index + 1
        return index


@contextmanager
def exclusive_events(handler: ResultTableEventHandler) -> Iterator[None]:
    """Within this block, events logged by the current thread reach ``handler`` and no other
    ResultTableEventHandler (other kinds of handlers still see them).

    The system-metrics sampler uses it so that its ``sys/...`` windows land in its own run exactly once,
    even when the user has registered a ResultTableEventHandler for the same run, or for another run.
    """
    previous = getattr(_owner, "handler", None)
    _owner.handler = handler
    try:
        yield
    finally:
        _owner.handler = previous

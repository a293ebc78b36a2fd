"""From monitor events to a run: each Stat window becomes scalars, every other event a text record.

The handler runs inside ``Stat.add`` (or ``log_event``), in the caller's thread, possibly in the
innermost training loop. It therefore does nothing but hand values to the LogWriter, whose ``add_*``
methods only validate and enqueue: the caller never waits on the database.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tallyboard import monitor

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.run.writer import LogWriter

# The handler that owns the events logged by the current thread, if one does (see `exclusive_events`).
_owner = threading.local()
# The Stat keys every handler of a writer logged: not training scalars, whoever logged them.
_window_keys: weakref.WeakKeyDictionary[LogWriter, set[str]] = weakref.WeakKeyDictionary()
# Those of them whose last window landed at its index (the run knew no training step): the
# writer's `window_tags`. Shared by the handlers of a writer, under one lock.
_counted_keys: weakref.WeakKeyDictionary[LogWriter, set[str]] = weakref.WeakKeyDictionary()
_counted_lock = threading.Lock()


class ResultTableEventHandler:
    """A ``tallyboard.monitor`` event handler that logs to a LogWriter.

    - A Stat event (``monitor.STAT_EVENT``) gives one scalar per data item: the tag is the data key
      (``"train/step_time.mean"``). Its step is ``step()`` when a callable is given (e.g.
      ``lambda: trainer.global_step``); else the training step when the run knows one (the furthest
      auto step of its other scalars, `LogWriter.auto_step`), so the window's chart shares the step
      axis of the run's other charts; each window of a key lands after the one before (a window
      closing while training stands still takes the next step rather than overwriting). Before any
      other scalar is logged, the step is the index of the window for that key (0, 1, 2, ...), and
      the run lists the key in its `window_tags` (`LogWriter.set_window_tags`), so that its chart
      says "window" under it; a later window that lands at the training step takes it off again.
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
        self._counts: dict[str, int] = {}  # event name -> events of it so far
        self._windows: dict[str, int] = {}  # Stat key -> the step its last window landed at
        self._lock = threading.Lock()

    def __call__(self, event: monitor.Event) -> None:
        owner = getattr(_owner, "handler", None)
        if owner is not None and owner is not self:
            return
        if event.name == monitor.STAT_EVENT:
            for key, value in event.data.items():
                self._writer.add_scalar(key, value, step=self._window_step(key))
        else:
            record = {"timestamp": event.timestamp.isoformat(), "data": event.data}
            text = json.dumps(record, ensure_ascii=False)
            self._writer.add_text(text, tag=event.name, step=self._next_step(event.name))

    def _window_step(self, key: str) -> int:
        if self._step is not None:
            return self._step()
        with self._lock:  # Stats in several threads may close windows at the same time
            last = self._windows.get(key)
            step = 0 if last is None else last + 1
            windows = _window_keys.setdefault(self._writer, set())
            windows.add(key)
            training = self._writer.auto_step(windows)
            if training is not None:
                step = max(step, training)
            self._windows[key] = step
        self._count_windows(key, training is None)
        return step

    def _count_windows(self, key: str, counted: bool) -> None:
        """Keep the run's `window_tags` to the keys whose steps count windows; written only when
        that changes (once per key, in a run that never has a training step)."""
        with _counted_lock:
            keys = _counted_keys.setdefault(self._writer, set())
            if counted == (key in keys):
                return
            if counted:
                keys.add(key)
            else:
                keys.discard(key)
            self._writer.set_window_tags(keys)

    def _next_step(self, name: str) -> int:
        """An event's step: `step()`, else the count of the events of its name so far."""
        if self._step is not None:
            return self._step()
        with self._lock:
            index = self._counts.get(name, 0)
            self._counts[name] = index + 1
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

"""The calls of a peer's API that a skin accepts but the store cannot hold (a model graph, audio,
a sweep): each is a harmless no-op, warned about once and counted, so a script written for the peer
runs to its end instead of failing with an AttributeError in the middle of training.

The counts are kept with the run: when it ends, one console line (stream 'log') says what was not
stored and how often, so the run page tells what the dashboard lacks.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tallyboard.run.writer import LogWriter


class NotStoredWarning(UserWarning):
    """A peer's call that tallyboard accepts but does not store (said once per kind of call)."""


class NotStored:
    """What one run (or, before any run, one skin) did not store, by call."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.counts: Counter[str] = Counter()

    def skip(self, call: str, why: str = "", stacklevel: int = 3) -> None:
        """Count a call of `call`; the first one warns at the user's line (`stacklevel` frames up)."""
        if not self.counts[call]:
            reason = f" ({why})" if why else ""
            warnings.warn(
                f"tallyboard.{self.peer}: {call} is not stored{reason}; later calls are counted and "
                "listed in the run's console when it ends",
                NotStoredWarning,
                stacklevel=stacklevel,
            )
        self.counts[call] += 1

    def no_op(self, call: str, why: str = "", returns: Any = None) -> Callable[..., Any]:
        """A function that takes any arguments, counts itself as `call` and returns `returns`."""

        def skipped(*args: Any, **kwargs: Any) -> Any:
            self.skip(call, why, stacklevel=3)
            return returns

        return _named(skipped, call, self.peer)

    def line(self) -> str | None:
        """The console line of what was not stored, None when everything was."""
        if not self.counts:
            return None
        listed = ", ".join(f"{call} x{count}" for call, count in sorted(self.counts.items()))
        return f"tallyboard.{self.peer}: not stored in this run: {listed}"

    def report_to(self, writer: LogWriter) -> None:
        """Write `line()` into the run's console (before it ends: see `LogWriter.before_end`)."""
        line = self.line()
        if line is not None:
            writer.add_console_line(line, stream="log")


def not_stored_method(peer: str, call: str, why: str = "") -> Callable[..., None]:
    """A method of a skin's class that takes any arguments and counts itself as `call` in the
    instance's `_not_stored` (a `NotStored`)."""

    def skipped(self: Any, *args: Any, **kwargs: Any) -> None:
        self._not_stored.skip(call, why, stacklevel=3)

    return _named(skipped, call, peer)


def _named(function: Callable[..., Any], call: str, peer: str) -> Callable[..., Any]:
    function.__name__ = function.__qualname__ = call.rsplit(".", 1)[-1]
    function.__doc__ = f"Not stored by tallyboard.{peer} ({call}): counted, warned about once."
    return function

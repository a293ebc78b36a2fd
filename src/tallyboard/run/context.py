"""What a new run records about where it runs: its environment at the start, its console while open.

Kept apart from `table` so that starting a run stays one readable function, and so that the
capture modules (`environment`, `console`) know nothing of runs: they hand dicts and lines to the
writer's public methods.
"""

from __future__ import annotations

import logging

from tallyboard.run import environment as machine
from tallyboard.run.console import ConsoleCapture, require_free
from tallyboard.run.writer import LogWriter

log = logging.getLogger(__name__)


def check(capture_console: bool) -> None:
    """Refuse, before the run is created, what `attach` could not do."""
    if capture_console:
        require_free()


def attach(writer: LogWriter, capture_console: bool, environment: bool) -> None:
    """Record `writer`'s environment (if `environment`) and tee the console into it until it ends
    (if `capture_console`; raises RuntimeError when another run of this process captures it)."""
    if environment:  # not in a thread: a fork while it imports would deadlock the child (tests/crash)
        _record(writer)
    if capture_console:
        capture = ConsoleCapture(lambda stream, line: writer.add_console_line(line, stream)).start()
        writer.before_end(capture.stop)


def _record(writer: LogWriter) -> None:
    try:
        writer.record_environment(machine.capture())
    except Exception:  # a run must not fail because its machine could not be described
        log.warning("tallyboard: could not record the environment of run %s", writer.run_id, exc_info=True)

"""How a run failed, as the text of its `error` column: an exception, a non-zero exit, a signal.

Why by default, and not only with `capture_console=True`: a failed run that does not say why sends
its user to the scheduler's log files, when the question is nearly always "which exception, where".
The exit paths (exit_paths.py) and a `with` block leaving on an exception describe the failure
here; the store keeps it as the JSON object {"type", "message", "traceback"} (schema v13), which
the run page shows and `RunView.error` reads back.
"""

from __future__ import annotations

import json
import signal
import traceback
from typing import Any

# A traceback beyond this many characters keeps its end (the frame that raised, the message): a
# RecursionError's is collapsed by `traceback` already, but a chain of long messages is not.
MAX_TRACEBACK = 100_000


def _text(kind: str, message: str, trace: str = "") -> str:
    if len(trace) > MAX_TRACEBACK:
        trace = "...\n" + trace[-MAX_TRACEBACK:]
    # ensure_ascii: a NUL or a lone surrogate in a message is escaped, never refused by the store
    return json.dumps({"type": kind, "message": message, "traceback": trace})


def from_exception(error: BaseException) -> str:
    """An exception that ended the run (uncaught, or leaving the run's `with` block)."""
    kind = type(error).__qualname__
    module = type(error).__module__
    if module not in ("builtins", "__main__"):
        kind = f"{module}.{kind}"
    return _text(kind, str(error), "".join(traceback.format_exception(error)))


def exit_status(code: Any) -> int:
    """The process's exit status for `sys.exit(code)`, as the interpreter computes it: None is 0,
    an integer itself, anything else (a message) 1."""
    if code is None:
        return 0
    return int(code) if isinstance(code, int) else 1


def from_exit(code: Any) -> str:
    """A process that called `sys.exit(code)` with a code other than 0."""
    message = f"exit status {exit_status(code)}" + ("" if isinstance(code, int) else f": {code}")
    return _text("SystemExit", message)


def from_signal(signum: int) -> str:
    """A process ended by a signal (SIGTERM; SIGINT arrives as a KeyboardInterrupt)."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return _text(name, f"the process received {name}")


def read(stored: str | None) -> dict[str, str] | None:
    """The stored failure as {"type", "message", "traceback"}, None when the run has none."""
    if stored is None:
        return None
    described: dict[str, str] = json.loads(stored)
    return described

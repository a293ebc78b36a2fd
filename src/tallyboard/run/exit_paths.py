"""How a process's open runs end when the process or a thread ends: atexit, SIGTERM/SIGINT,
uncaught exceptions, a non-zero exit, a fork.

Why it is its own stage: the commit pipeline (sink.py) only moves records to the database; which
runs end, with what status, and how long the end may wait, is decided here, once per process.
- `atexit`, SIGTERM and uncaught exceptions (main thread or any thread) end the open runs they
  concern (see `end_runs`) and drain the queue; the hooks are installed while at least one run is
  open and restored when the last one closes. A second SIGTERM/SIGINT during a drain gives up
  draining (`_abandon_runs`): impatient users and schedulers get a quick exit, and the runs are
  marked failed on a connection of their own.
- Which way a process ends decides how its open runs end, as every tracker does it: a normal exit
  (the script's end, `sys.exit(0)`) finishes them, unless their user set another end status; an
  uncaught exception, `sys.exit` with another code, or a signal fails them, and the run keeps how
  (failure.py: the exception's type, message and traceback, the exit status, the signal). The
  interpreter tells atexit hooks nothing of its exit code, so `sys.exit` is wrapped while runs are
  open (`_sys_exit`): a `raise SystemExit(3)` of one's own is not seen, and exits as a normal end.
- A forked child (a DataLoader worker, `os.fork()`) inherits copies of the parent's runs and hooks.
  The parent's runs are the parent's to end: the exit paths compare `os.getpid()` with the process
  that opened the run, so a child leaving a `with` block or running its atexit hooks neither marks
  them failed nor drains the parent's sink (whose thread the child does not have).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from tallyboard.errors import DatabaseUnwritable, NotDurableError
from tallyboard.run import failure
from tallyboard.run.sink import Sink, all_sinks
from tallyboard.store import open_store
from tallyboard.store.records import RunUpdate

log = logging.getLogger(__name__)

# How long close() / write_result() / the exit of the process wait for an unreachable database.
OUTAGE_WAIT = 30.0


def _drain_at_exit() -> None:
    """Records still queued when the interpreter exits (a close() that timed out in an outage):
    give the database `OUTAGE_WAIT` seconds more, then say what is lost."""
    for sink in all_sinks():
        if sink.pid != os.getpid() or not sink._thread.is_alive() or not sink.pending():
            continue
        try:
            sink.flush(wait=OUTAGE_WAIT)
        except RuntimeError as error:
            log.error("%s; they are lost now that the process exits", error)


atexit.register(_drain_at_exit)


# ---- ending runs when the process or a thread ends ------------------------------------------------
class OpenRun(Protocol):
    """What the exit hooks need of a LogWriter."""

    owner: int  # ident of the thread that created the run
    pid: int  # the process that created it

    @property
    def run_id(self) -> int: ...

    def _end(self, status: str, error: str | None = None) -> None: ...


_open_runs: dict[int, tuple[OpenRun, Sink]] = {}  # id(writer) -> (writer, its sink)
_hooks_lock = threading.RLock()
_previous: dict[str, Any] = {}
_draining = 0  # drains in progress (ends of runs): a signal now is the user's second
_abandoned = False  # a second signal gave up draining: nothing waits for the queue any more
_ending = ""  # "" / "draining" / "done": the thread ending the runs after a SIGTERM (see _on_signal)
_failing = False  # an uncaught exception is ending the runs (`_excepthook`): a signal now is a second one


def opened(run: OpenRun, sink: Sink) -> None:
    """Register an open run; the first one installs the exit hooks."""
    with _hooks_lock:
        if not _open_runs:
            _install_hooks()
        _open_runs[id(run)] = (run, sink)
    _end_with_worker_process()


_finalized_pid = 0  # the multiprocessing child whose exit ends its runs already


def _end_with_worker_process() -> None:
    """A `multiprocessing` child (a Pool worker, a Process) ends through `os._exit`, which runs no
    atexit hook: its open runs would stay `running`, their queue lost. It runs multiprocessing's
    finalizers first, so one of them ends the runs as the interpreter's exit would (`_at_exit`).
    Registered at the child's first run: multiprocessing clears the finalizers of a new child."""
    global _finalized_pid
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is None or _finalized_pid == os.getpid() or multiprocessing.parent_process() is None:
        return
    from multiprocessing.util import Finalize

    _finalized_pid = os.getpid()
    Finalize(None, _at_exit, exitpriority=10)


def closed(run: OpenRun) -> None:
    """Unregister a run; the last one restores the hooks that were there before."""
    with _hooks_lock:
        if _open_runs.pop(id(run), None) is not None and not _open_runs:
            _uninstall_hooks()


def end_run(sink: Sink, run_id: int, status: str | None, error: str | None = None) -> None:
    """Record the end of a run (status None: only let go of it, see `writer.let_go`), with how it
    failed if it did (`error`, failure.py), and drain the queue (a second signal meanwhile gives
    up draining, see `_on_signal`); an unreachable database is waited for `OUTAGE_WAIT` seconds,
    then reported with `NotDurableError` while the records stay queued."""
    global _draining
    if _abandoned:
        return
    if status is not None:
        end = {"status": status, "end_time": time.time(), **({} if error is None else {"error": error})}
        sink.put("run_updates", RunUpdate(run_id, end), wait=False)
    with _hooks_lock:  # threads may drain at once: a lost update would make a first signal a second
        _draining += 1
    try:
        sink.flush(wait=OUTAGE_WAIT)
    finally:
        with _hooks_lock:
            _draining -= 1
        sink.release(run_id)


def end_runs(status: str, thread_ident: int | None = None, error: str | None = None) -> None:
    """End this process's open runs (those created by `thread_ident`, or all) with `status` (and
    how they failed, `error`), durably."""
    pid = os.getpid()
    with _hooks_lock:
        runs = [
            run
            for run, _ in _open_runs.values()
            if run.pid == pid and (thread_ident is None or run.owner == thread_ident)
        ]
    for run in runs:
        try:
            run._end(status, error)
        except (NotDurableError, DatabaseUnwritable) as error:  # the text says it all, no traceback
            log.error("tallyboard: could not record that run %s ended (%s): %s", run.run_id, status, error)
        except Exception:  # an exit path must not hide the original error
            log.exception("tallyboard: could not record the end of a run")


def _abandon_runs(signum: int) -> None:
    """Give up draining: mark this process's open runs failed, each in a transaction of its own
    on a connection of its own (the writer thread may be mid-commit), and leave the queue. What is
    committed stays; the commit in flight lands whole or not at all."""
    global _abandoned
    _abandoned = True
    pid = os.getpid()
    with _hooks_lock:
        entries = [(run.run_id, sink.store.url) for run, sink in _open_runs.values() if run.pid == pid]
    for url in dict.fromkeys(url for _, url in entries):
        try:
            store = open_store(url)
            store.retry_for = 0.0
            try:
                for run_id in (run_id for run_id, at in entries if at == url):
                    store.update_run(
                        run_id, status="failed", end_time=time.time(), error=failure.from_signal(signum)
                    )
            finally:
                store.close()
        except Exception as error:  # the process is going down; say why the status is stale
            log.error("tallyboard: could not mark the runs in %s failed: %s", url, error)


# Each hook reads the hook it chains to first: ending the last open run uninstalls ours.
def _excepthook(exc_type: type[BaseException], value: BaseException, tb: Any) -> None:
    global _failing
    _failing = True  # a Ctrl-C again while the traceback is read would end the hook unrecorded
    try:
        previous = _previous.get("excepthook", sys.__excepthook__)
        end_runs("failed", threading.main_thread().ident, failure.from_exception(value))
        previous(exc_type, value, tb)
    finally:
        _failing = False  # an interactive interpreter goes on after the hook


def _threading_excepthook(args: Any) -> None:
    previous = _previous.get("threading_excepthook", threading.__excepthook__)
    if args.thread is not None:
        error = None if args.exc_value is None else failure.from_exception(args.exc_value)
        end_runs("failed", args.thread.ident, error)
    previous(args)


def _on_signal(signum: int, frame: Any, key: str) -> None:
    """SIGTERM ends every open run of the process (any thread's) as failed, draining the queue;
    SIGINT is left to the KeyboardInterrupt, which ends the runs on its way out. A second signal
    while a drain is in progress, or while an uncaught exception ends the runs (`_excepthook`
    reading its traceback), gives up draining and marks them failed (`_abandon_runs`). Then whatever was there
    before runs: the user's handler, or the default action (dying of the signal).

    The drain never runs in the interrupted frame: the main thread may have been stopped inside a
    store write holding the store's lock, which the drain's commit needs. The handler hands the
    drain to a thread of its own (`_end_then_signal_again`) and returns, so the interrupted code
    lets go of its locks; that thread sends the signal again once the runs are ended, and this
    handler then passes it on."""
    global _ending
    previous = _previous.get(key, signal.SIG_DFL)
    if _ending == "done":  # the runs are ended: pass the signal on
        _ending = ""
    elif _draining or _abandoned or _ending or _failing:
        _abandon_runs(signum)
        if previous is signal.default_int_handler:  # Ctrl-C twice: die of it, not mid-drain
            previous = signal.SIG_DFL
    elif signum == signal.SIGTERM and _open_runs:
        _ending = "draining"
        threading.Thread(target=_end_then_signal_again, args=(signum,), name="tallyboard-exit").start()
        return
    if callable(previous):
        previous(signum, frame)
    else:  # default action: die of the signal, as if we had not been here
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def await_the_signal() -> None:
    """A logging call on a run that a SIGTERM's drain has ended: the process is about to die of
    that signal (`_end_then_signal_again` sends it again), so wait for it instead of raising a
    read-only error into the training loop, which would end the process with another code."""
    deadline = time.monotonic() + OUTAGE_WAIT + 5.0
    while _ending and threading.current_thread() is threading.main_thread() and time.monotonic() < deadline:
        time.sleep(0.01)  # the handler runs here, between two sleeps


def _end_then_signal_again(signum: int) -> None:
    """End the open runs as failed (draining, bounded by `OUTAGE_WAIT`), then send `signum` to the
    process again, for `_on_signal` to pass on."""
    global _ending
    try:
        end_runs("failed", error=failure.from_signal(signum))
    finally:
        _ending = "done"
        os.kill(os.getpid(), signum)


def _sigterm(signum: int, frame: Any) -> None:
    _on_signal(signum, frame, "sigterm")


def _sigint(signum: int, frame: Any) -> None:
    _on_signal(signum, frame, "sigint")


_SIGNALS = (("sigterm", signal.SIGTERM, _sigterm), ("sigint", signal.SIGINT, _sigint))


def arm_signals() -> None:
    """Install the signal handlers now if this is the main thread (the only one that may), so that
    runs opened later in other threads are ended on SIGTERM too. `ResultTable(...)` calls it."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _hooks_lock:
        for key, signum, ours in _SIGNALS:
            current = signal.getsignal(signum)
            if current is not ours and current is not signal.SIG_IGN and current is not None:
                _previous[key] = current
                signal.signal(signum, ours)


# The status `_at_exit` ends runs with after a normal exit: the end status the run's user chose
# (`set_status`), else 'finished' (see `LogWriter._end`).
AT_EXIT = "at-exit"
_exit_code: list[Any] = []  # the code of the main thread's last `sys.exit` call (see `_sys_exit`)
_interpreters_exit = sys.exit


def _sys_exit(code: Any = None) -> None:
    """`sys.exit` while runs are open: remember the code, for `_at_exit`, then exit as asked. Only
    the main thread's call ends the process (another thread's ends that thread)."""
    if threading.current_thread() is threading.main_thread():
        _exit_code[:] = [code]
    _previous.get("exit", _interpreters_exit)(code)


def _at_exit() -> None:
    """Runs still open when the interpreter exits never closed. After a normal exit they end with
    the end status their user set (an adapter that saw training fail), else finished; after
    `sys.exit` with another code than 0 they fail. A multiprocessing child runs this as a
    finalizer while the exception of its target, if any, is passing (`sys.exc_info`): then they
    fail with it."""
    passing = sys.exc_info()[1]
    clean = isinstance(passing, SystemExit) and not failure.exit_status(passing.code)
    if passing is not None and not clean:
        error = failure.from_exception(passing)
    elif _exit_code and failure.exit_status(_exit_code[0]):
        error = failure.from_exit(_exit_code[0])
    else:
        return end_runs(AT_EXIT)
    return end_runs("failed", error=error)


def _forget_parent() -> None:
    """In a forked child (e.g. a DataLoader worker) the parent's runs are not ours to end: start
    from none, with fresh locks in case one was held at the fork, and the hooks that were there
    before ours, so the child's first run installs them afresh (the sinks forget theirs in sink.py)."""
    global _hooks_lock, _draining, _abandoned, _ending, _failing
    _hooks_lock = threading.RLock()
    _draining, _abandoned, _ending, _failing = 0, False, "", False
    _exit_code.clear()
    if _open_runs:  # our hooks are installed while runs are open
        _open_runs.clear()
        _uninstall_hooks()


os.register_at_fork(after_in_child=_forget_parent)


def _install_hooks() -> None:
    _previous["excepthook"] = sys.excepthook
    _previous["threading_excepthook"] = threading.excepthook
    sys.excepthook = _excepthook
    threading.excepthook = _threading_excepthook
    _previous["exit"] = sys.exit
    _exit_code.clear()
    setattr(sys, "exit", _sys_exit)  # noqa: B010 (typeshed's sys.exit never returns; ours calls it)
    atexit.register(_at_exit)
    arm_signals()


def _uninstall_hooks() -> None:
    _restore(sys, "excepthook", _excepthook, "excepthook")
    _restore(threading, "excepthook", _threading_excepthook, "threading_excepthook")
    _restore(sys, "exit", _sys_exit, "exit")
    atexit.unregister(_at_exit)
    if threading.current_thread() is threading.main_thread():
        for key, signum, ours in _SIGNALS:
            with contextlib.suppress(ValueError):
                if key in _previous and signal.getsignal(signum) is ours:
                    signal.signal(signum, _previous.pop(key))


def _restore(module: Any, attribute: str, ours: Callable[..., Any], key: str) -> None:
    """Put back the previous hook, unless someone installed another over ours meanwhile."""
    previous = _previous.pop(key)
    if getattr(module, attribute) is ours:
        setattr(module, attribute, previous)

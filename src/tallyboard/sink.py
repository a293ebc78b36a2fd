"""The background writer: records logged in the training thread become rows committed by another.

Why it is built this way:
- The training thread must never wait on the database. `LogWriter.add_scalar` appends a plain tuple
  to a list owned by its series; appending is atomic under the GIL, so no lock is taken per call.
  The writer thread takes what is there with `rows[:n]` and `del rows[:n]` (each also atomic), so
  a row appended meanwhile is simply left for the next commit: nothing is ever lost or doubled.
- One commit per `commit_interval` (0.5 s by default), one transaction per commit: SQLite's cost is
  per transaction, so batching is where the speed comes from, and after a SIGKILL at most the rows
  of the last interval and the commit in flight are missing.
- One sink (one thread, one connection) per database per process, shared by every run logging
  there, so a start of a run costs no thread and no connection after the first.
- `flush()` counts: it asks for a commit and waits until a commit that started after the request
  is done. A commit that fails for another reason than a busy database keeps its rows for the
  next attempt and makes `flush()` raise, so an error is loud and nothing logged is dropped.
  The failed batch is sent again alone and unchanged, before what was logged meanwhile: a store
  that could not tell whether it landed (PostgreSQL, see store/postgres.py) knows it by identity.
- A commit the database refuses for the records' data (`Store.is_record_error`) would fail again
  forever; the batch is split until the refused records are alone, and those are quarantined
  (store/quarantine.py), so one bad record never holds back the others or another run.
- Exit paths: `atexit`, SIGTERM and uncaught exceptions (main thread or any thread) end the open
  runs they concern (see `end_runs`) and drain the queue; the hooks are installed while at least
  one run is open and restored when the last one closes.
- A forked child (a DataLoader worker, `os.fork()`) inherits copies of the parent's runs, sinks and
  hooks. The parent's runs are the parent's to end: the exit paths compare `os.getpid()` with the
  process that opened the run, so a child leaving a `with` block or running its atexit hooks
  neither marks them failed nor drains the parent's sink (whose thread the child does not have).
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

from tallyboard.store import Batch, Store, open_store
from tallyboard.store.quarantine import describe, halves

log = logging.getLogger(__name__)

DEFAULT_COMMIT_INTERVAL = 0.5
# Rows a series may hold before add_scalar waits for the writer thread (about 100 MB per series).
MAX_PENDING_ROWS = 500_000
# After a commit this large, the writer starts the next one at once instead of sleeping.
BUSY_BATCH = 20_000
# A shared sink whose runs have all ended stops after this long idle (its thread and connection go).
IDLE_STOP = 5.0


class Sink:
    """Commits the records of every run logging to one database from this process."""

    def __init__(
        self, store: Store, commit_interval: float = DEFAULT_COMMIT_INTERVAL, idle_stop: float | None = None
    ) -> None:
        self.store = store
        self.commit_interval = commit_interval
        self.idle_stop = idle_stop  # None: runs until stop(); else see `_idle_exit`
        self.users = 0  # runs using this sink (guarded by _sinks_lock)
        self.key: str | None = None  # its key in the registry of shared sinks
        self.identity: tuple[int, int] | None = None  # the SQLite file it writes (see sink_for)
        self._idle_since = time.monotonic()
        self._series: list[tuple[int, str, list]] = []  # (run_id, tag, rows appended by writers)
        self._records: list[tuple[str, tuple]] = []  # (Batch field name, row), in logging order
        # Batches sent before anything new, head first: one whose commit failed (sent again as it
        # was), or the parts of one the database rejected records of (see `_set_aside`).
        self._resend: list[Batch] = []
        self._warned: set[tuple[int | None, str, str | None]] = set()  # quarantined (run, kind, tag)
        self._failing = False  # the last commit failed (its error was logged; see `_failed`)
        self._cond = threading.Condition(threading.RLock())
        self._requested = 0  # flush requests so far
        self._committed = 0  # the requests covered by finished commits
        self._error: BaseException | None = None  # the last failed commit's error
        self._failures = 0  # failed commits so far
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="tallyboard-sink", daemon=True)
        self._thread.start()

    # ---- the training thread's side -------------------------------------------------------------
    def series(self, run_id: int, tag: str) -> list:
        """A new list that rows of one series are appended to; the sink drains it from now on."""
        rows: list = []
        with self._cond:  # not racing `release`, which rebuilds the list of series
            self._series.append((run_id, tag, rows))
        return rows

    def put(self, kind: str, row: tuple) -> None:
        """Queue one record for the `Batch` list `kind` ('media', 'texts', 'hparams', 'run_updates', ...)."""
        self._records.append((kind, row))

    def flush(self) -> None:
        """Return once everything queued before the call is committed; raise if the commit failed."""
        with self._cond:
            self._requested += 1
            target, failures = self._requested, self._failures
            self._cond.notify_all()
            while self._committed < target:
                if self._failures > failures:  # a commit failed while we waited: say so
                    error = self._error
                    raise RuntimeError(f"tallyboard could not write to {self.store.url}: {error}") from error
                if not self._thread.is_alive():
                    raise RuntimeError("the tallyboard writer thread has stopped")
                self._cond.wait()

    def wait_for_room(self) -> None:
        """Back-pressure for a series that outgrew `MAX_PENDING_ROWS`: commit before logging on."""
        self.flush()

    def release(self, run_id: int) -> None:
        """A run has ended (after its last flush): stop draining its series, one user fewer."""
        with self._cond:
            self._series = [entry for entry in self._series if entry[0] != run_id]
        with _sinks_lock:
            self.users -= 1
            self._idle_since = time.monotonic()

    # ---- the writer thread ----------------------------------------------------------------------
    def _take(self) -> Batch:
        batch = Batch()
        for run_id, tag, rows in self._series[:]:
            count = len(rows)
            if count:
                chunk = rows[:count]
                del rows[:count]
                batch.scalars.append((run_id, tag, chunk))
        count = len(self._records)
        records = self._records[:count]
        del self._records[:count]
        for kind, row in records:
            getattr(batch, kind).append(row)
        return batch

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._committed == self._requested and not self._stopping:
                    self._cond.wait(self.commit_interval)
                request, stopping = self._requested, self._stopping
            size = self._commit()
            with self._cond:
                if size is not None:
                    self._committed = max(self._committed, request)
                self._cond.notify_all()
            if (stopping and size is not None) or (size == 0 and self._idle_exit()):
                if not stopping:
                    self.store.close()
                return
            if size is not None and size >= BUSY_BATCH:
                continue

    def _idle_exit(self) -> bool:
        """Whether a shared sink with no runs left should end; decided under the registry's lock,
        so `sink_for` never hands out a sink that is about to stop."""
        if self.idle_stop is None or self.users > 0:
            return False
        with _sinks_lock:
            idle = time.monotonic() - self._idle_since >= self.idle_stop
            if self.users > 0 or not idle or self._records or any(rows for _, _, rows in self._series):
                return False
            if _sinks.get(self.key) is self:
                del _sinks[self.key]
            return True

    def _commit(self) -> int | None:
        """Write what is queued; the rows written, or None after a failure (the batch is kept).

        Batches waiting to be sent again go first, as they were (see the module's notes), then what
        was logged meanwhile, which a waiting flush() asked for too."""
        written = 0
        while True:
            resent = bool(self._resend)
            batch = self._resend[0] if resent else self._take()
            if not len(batch):
                return written
            if not resent:
                self._resend.append(batch)
            try:
                self.store.write_batch(batch)
            except Exception as error:
                try:
                    if self._set_aside(batch, error):
                        continue
                except Exception as quarantine_error:  # the quarantine could not be written either
                    error = quarantine_error
                self._failed(error)
                return None
            self._resend.pop(0)
            written += len(batch)
            self._recovered()
            if not resent:
                return written

    # ---- the failed-commit path -------------------------------------------------------------------
    def _set_aside(self, batch: Batch, error: Exception) -> bool:
        """Whether the database rejected records of `batch` (the head of `_resend`) for their data.

        Then the same data would fail the same way forever, and hold back every run of this
        process: `batch` is replaced by its halves (store/quarantine.py), and a batch of one record
        is written to the quarantine table instead, with a warning the first time a (run, kind,
        tag) is set aside. Each half is written on its own, so ~2 log2(n) commits find a bad record
        among n. A failure of the database itself is not ours: False, the caller keeps `batch`."""
        if not self.store.is_record_error(error):
            return False
        parts = halves(batch)
        if parts is not None:
            self._resend[0:1] = parts
            return True
        record = describe(batch, error)
        self.store.quarantine(record)
        self._resend.pop(0)
        seen = (record.run_id, record.kind, record.tag)
        if seen not in self._warned:
            self._warned.add(seen)
            log.warning(
                "tallyboard: the database rejected a %s record of run %s, tag or name %r: %s. It is kept "
                "in the quarantine table (ResultTable.quarantined(%s)); logging goes on, and further records "
                "of this tag rejected alike are set aside without a warning",
                record.kind, record.run_id, record.tag, record.error.splitlines()[0], record.run_id,
            )  # fmt: skip
        return True

    def _failed(self, error: Exception) -> None:
        """A commit failed for a reason of the database (gone, full, read-only): the batch stays at
        the head of `_resend`, flush() reports the error, and the log says so once, not at every
        retry (every commit interval), until a commit succeeds again."""
        if not self._failing:
            self._failing = True
            log.warning("tallyboard: commit to %s failed (%s); retrying every %s s", self.store.url,
                        error, self.commit_interval, exc_info=log.isEnabledFor(logging.DEBUG))  # fmt: skip
        with self._cond:
            self._error = error
            self._failures += 1
            self._cond.notify_all()
            self._cond.wait(self.commit_interval)  # a flush() wakes it to try again at once

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.warning("tallyboard: commits to %s succeed again", self.store.url)

    def stop(self) -> None:
        """Commit what is left and end the writer thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()
        self.store.close()


# ---- one sink per database per process ---------------------------------------------------------
_sinks: dict[str, Sink] = {}
_sinks_lock = threading.RLock()


def _file_identity(url: str) -> tuple[int, int] | None:
    """(device, inode) of a SQLite file: a file deleted and created again is another database."""
    if "://" in url:
        return None
    with contextlib.suppress(OSError):
        stat = os.stat(url)
        return stat.st_dev, stat.st_ino
    return None


def sink_for(url: str, commit_interval: float = DEFAULT_COMMIT_INTERVAL) -> Sink:
    """The process's sink for the database at `url`, with one more user (a run, which must call
    `release` when it ends). Started on first use; it stops once idle without users."""
    key = url if "://" in url else os.path.realpath(url)
    with _sinks_lock:
        sink = _sinks.get(key)
        if sink is None or not sink._thread.is_alive() or sink.identity != _file_identity(url):
            sink = _sinks[key] = Sink(open_store(url), commit_interval, idle_stop=IDLE_STOP)
            sink.key, sink.identity = key, _file_identity(url)
        sink.users += 1
        return sink


# ---- ending runs when the process or a thread ends ------------------------------------------------
class OpenRun(Protocol):
    """What the exit hooks need of a LogWriter."""

    owner: int  # ident of the thread that created the run
    pid: int  # the process that created it

    def _end(self, status: str) -> None: ...


_open_runs: dict[int, OpenRun] = {}  # id(writer) -> writer
_hooks_lock = threading.RLock()
_previous: dict[str, Any] = {}


def opened(run: OpenRun) -> None:
    """Register an open run; the first one installs the exit hooks."""
    with _hooks_lock:
        if not _open_runs:
            _install_hooks()
        _open_runs[id(run)] = run


def closed(run: OpenRun) -> None:
    """Unregister a run; the last one restores the hooks that were there before."""
    with _hooks_lock:
        if _open_runs.pop(id(run), None) is not None and not _open_runs:
            _uninstall_hooks()


def end_runs(status: str, thread_ident: int | None = None) -> None:
    """End this process's open runs (those created by `thread_ident`, or all) with `status`, durably."""
    pid = os.getpid()
    with _hooks_lock:
        runs = [
            r
            for r in _open_runs.values()
            if r.pid == pid and (thread_ident is None or r.owner == thread_ident)
        ]
    for run in runs:
        try:
            run._end(status)
        except Exception:  # an exit path must not hide the original error
            log.exception("tallyboard: could not record the end of a run")


# Each hook reads the hook it chains to first: ending the last open run uninstalls ours.
def _excepthook(exc_type: type[BaseException], value: BaseException, tb: Any) -> None:
    previous = _previous.get("excepthook", sys.__excepthook__)
    end_runs("failed", threading.main_thread().ident)
    previous(exc_type, value, tb)


def _threading_excepthook(args: Any) -> None:
    previous = _previous.get("threading_excepthook", threading.__excepthook__)
    if args.thread is not None:
        end_runs("failed", args.thread.ident)
    previous(args)


def _sigterm(signum: int, frame: Any) -> None:
    previous = _previous.get("sigterm", signal.SIG_DFL)
    end_runs("failed")
    if callable(previous):
        previous(signum, frame)
    else:  # default action: die of SIGTERM, as if we had not been here
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


# The status `_at_exit` ends runs with: the end status the run's user chose (`set_status`), else
# 'failed' (see `LogWriter._end`).
AT_EXIT = "at-exit"


def _at_exit() -> None:
    """Runs still open when the interpreter exits never closed: they end with the end status
    their user set (an adapter that saw training succeed), else as failed."""
    end_runs(AT_EXIT)


def _forget_parent() -> None:
    """In a forked child (e.g. a DataLoader worker) the parent's sinks have no thread and its runs
    are not ours to end: start from nothing, with fresh locks in case one was held at the fork, and
    the hooks that were there before ours, so the child's first run installs them afresh."""
    global _sinks_lock, _hooks_lock
    _sinks_lock, _hooks_lock = threading.RLock(), threading.RLock()
    _sinks.clear()
    if _open_runs:  # our hooks are installed while runs are open
        _open_runs.clear()
        _uninstall_hooks()


os.register_at_fork(after_in_child=_forget_parent)


def _install_hooks() -> None:
    _previous["excepthook"] = sys.excepthook
    _previous["threading_excepthook"] = threading.excepthook
    sys.excepthook = _excepthook
    threading.excepthook = _threading_excepthook
    atexit.register(_at_exit)
    if threading.current_thread() is threading.main_thread():
        current = signal.getsignal(signal.SIGTERM)
        if current is not signal.SIG_IGN and current is not None:
            _previous["sigterm"] = current
            signal.signal(signal.SIGTERM, _sigterm)


def _uninstall_hooks() -> None:
    _restore(sys, "excepthook", _excepthook, "excepthook")
    _restore(threading, "excepthook", _threading_excepthook, "threading_excepthook")
    atexit.unregister(_at_exit)
    if "sigterm" in _previous and threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError):
            if signal.getsignal(signal.SIGTERM) is _sigterm:
                signal.signal(signal.SIGTERM, _previous.pop("sigterm"))


def _restore(module: Any, attribute: str, ours: Callable[..., Any], key: str) -> None:
    """Put back the previous hook, unless someone installed another over ours meanwhile."""
    previous = _previous.pop(key)
    if getattr(module, attribute) is ours:
        setattr(module, attribute, previous)

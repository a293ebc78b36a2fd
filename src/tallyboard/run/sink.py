"""The background writer: records logged in the training thread become rows committed by another.

Why it is built this way:
- The training thread must never wait on the database. `LogWriter.add_scalar` appends the point's
  step, walltime and value to its series' `array` columns (store/records.py `ScalarColumns`, the
  value last) and compares the values' length with the series' `limit`; each append is atomic
  under the GIL, so no lock is taken per call. The writer thread counts the values, then takes
  `column[:n]` and `del column[:n]` of each column (each also atomic), so a point appended
  meanwhile is simply left for the next commit: nothing is ever lost or doubled. The store gets
  whole columns (`tobytes`, deltas), never a point taken apart in Python.
- One commit every `commit_interval` (0.5 s by default), one transaction per commit: SQLite's cost
  is per transaction, so batching is where the speed comes from.
- The queue is bounded in time and in bytes, so that the loss window is a number that holds at any
  logging rate: the series' limits are room granted from a budget of rows that commit in
  `COMMIT_BUDGET` seconds at the measured commit rate (and fit in their share of
  `MAX_QUEUE_BYTES`); other records (images, texts, run updates) have a byte budget. A series asks
  for room when it reaches its limit and gets it at once while the budget has some; a producer that
  finds the budget spent waits until the writer takes the queue, i.e. the end of the commit in
  flight: back-pressure slows training to the database's pace instead of growing the queue.
  SIGKILL then loses at most the interval plus two commits (< 1 s).
- Nothing the sink does grows with the number of series: a take visits only the series that asked
  for room since the one before (and leaves them without a limit, so that their next row asks
  again), and a new series costs one such request. A model that logs per-parameter statistics has
  100,000 tags, most of them idle at any commit (bench/tags.py).
- One sink (one thread, one connection) per database per process, shared by every run logging
  there, so a start of a run costs no thread and no connection after the first.
- `flush()` counts: it asks for a commit and waits until a commit that started after the request
  is done. A commit that fails for another reason than a busy database (an outage, a full disk)
  keeps its rows for the next attempt; the writer backs off, warns (no traceback) every
  `REPORT_EVERY` seconds, and `flush()` raises `NotDurableError` instead of waiting for the database.
  The failed batch is sent again alone and unchanged, before what was logged meanwhile: a store
  that could not tell whether it landed (PostgreSQL, see store/postgres.py) knows it by identity.
- A commit the database refuses for the records' data (`Store.is_record_error`) would fail again
  forever; the batch is split until the refused records are alone, and those are quarantined
  (store/quarantine.py), so one bad record never holds back the others or another run.
- The ends of runs (atexit, signals, uncaught exceptions, forks) are exit_paths.py's: this module
  only moves records. A forked child that logs to a copy of its parent's run is told so at its first
  call (`_forget_parent_sinks`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from tallyboard.errors import DatabaseUnwritable, NotDurableError
from tallyboard.store import Batch, Store, open_store
from tallyboard.store.location import Location, LocationLike
from tallyboard.store.quarantine import describe, halves
from tallyboard.store.records import QueuedRecord, ScalarColumns
from tallyboard.store.tables import BATCH_RECORDS

log = logging.getLogger(__name__)

DEFAULT_COMMIT_INTERVAL = 0.5
# What the queue of one sink may hold, scalars and other records together (see `SeriesQueue.limit`).
MAX_QUEUE_BYTES = 64 * 2**20
# How the bound is shared: the scalars' queue and the batch being committed get SCALAR_SHARE each,
# the other records' queue and batch RECORD_SHARE each (2 x (3/8 + 1/8) = all of it).
SCALAR_SHARE, RECORD_SHARE = 3 / 8, 1 / 8
# Memory of one queued scalar point: three 8-byte columns (four with epochs), arrays' over-allocation
# of up to an eighth, the batch's slices of them, plus margin.
ROW_BYTES = 48
# Bytes one queued record costs besides its strings and bytes (the tuple, ints, the list slot).
RECORD_BYTES = 400
# Seconds of commit work the queue may hold when producers outrun the database: with commits
# started every `commit_interval`, what SIGKILL can lose stays within the interval plus two commits.
COMMIT_BUDGET = 0.1
FIRST_RATE = 25_000  # rows per second assumed before the first measured commit (a slow disk's)
RATE_STEP = 1.25  # the most the estimated rate rises per commit: one fast commit is not a trend
MIN_BUDGET_ROWS = 2048  # never make batches smaller than this, however slow commits look
UNLIMITED = sys.maxsize  # the limit of a series that `Sink.series` hands out: taken at every commit
# How long one write of the sink's store waits for a lost database before the sink takes over
# (keeping the batch, backing off, reporting); and its longest back-off between two tries.
STORE_RETRY_FOR = 1.0
MAX_BACKOFF = 2.0
REPORT_EVERY = 10.0  # seconds between two warnings while the database stays unreachable
# How long failed writes may find the database unwritable for good (`Store.unwritable`: a file
# system turned read-only, say) before the sink gives up and logging calls raise: an admin's quick
# remount is ridden out, a training loop is never held for good (docs/result-table.md, Durability).
GIVE_UP_AFTER = 5.0
# A shared sink whose runs have all ended stops after this long idle (its thread and connection go).
IDLE_STOP = 5.0


class SeriesQueue(ScalarColumns):
    """The points of one series (run, tag, rep) waiting for the writer thread.

    The training thread appends to the columns and compares `len(values)` with `limit`, nothing more:
    `limit` is the room the sink granted this series from the queue's budget, so the hot path never
    adds up the queue. At the limit it calls `Sink.wait_for_room`, which grants more or waits. A
    limit of 0 means the sink does not look at the series (new, or idle at the last take): its next
    row asks for room, and so joins the next take. `pace` is how many rows the last take found,
    the room the series is granted first after it."""

    __slots__ = ("limit", "pace", "run_id", "tag")

    def __init__(self, run_id: int, tag: str, rep: int = 0) -> None:
        super().__init__(rep)
        self.run_id = run_id
        self.tag = tag
        self.limit = 0
        self.pace = 1


def record_bytes(row: tuple[Any, ...]) -> int:
    """Memory of one queued record, counting its text and binary payloads."""
    size = RECORD_BYTES
    for item in row:
        if isinstance(item, (str, bytes)):
            size += sys.getsizeof(item)
        elif isinstance(item, dict):
            size += sum(sys.getsizeof(value) for value in item.values())
    return size


class Sink:
    """Commits the records of every run logging to one database from this process."""

    def __init__(
        self,
        store: Store,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL,
        idle_stop: float | None = None,
        max_queue_bytes: int = MAX_QUEUE_BYTES,
        clock: Callable[[], float] = time.monotonic,
        start: bool = True,
    ) -> None:
        """`clock` is what every rule of the sink reads time from (monotonic seconds), as `Stat`
        takes one: with `start=False` and a clock of their own, tests drive the writer one `turn()`
        at a time and move time themselves, so each timing rule is checked without waiting."""
        self._clock = clock
        self.store = store
        self.commit_interval = commit_interval
        self.idle_stop = idle_stop  # None: runs until stop(); else see `_idle_exit`
        self.max_queue_bytes = max_queue_bytes
        self.users = 0  # runs using this sink (guarded by _sinks_lock)
        self.key: Location | None = None  # its key in the registry of shared sinks
        self.identity: tuple[int, int] | None = None  # the SQLite file it writes (see sink_for)
        self.pid = os.getpid()
        self._idle_since = clock()
        # The series that asked for room since the last take (limit > 0), in the order they asked:
        # the only ones the next take visits.
        self._active: list[SeriesQueue] = []
        self._granted = 0  # the limits of `_active` added up (guarded by _cond; UNLIMITED ones aside)
        self._records: list[tuple[str, tuple[Any, ...]]] = []  # (Batch field name, row), in logging order
        # Batches sent before anything new, head first: one whose commit failed (sent again as it
        # was), or the parts of one the database rejected records of (see `_set_aside`).
        self._resend: list[Batch] = []
        self._warned: set[tuple[int | None, str, str | None]] = set()  # quarantined (run, kind, tag)
        self._queued_bytes = 0  # of `_records` (guarded by _cond)
        self._cond = threading.Condition(threading.RLock())
        self._requested = 0  # flush requests so far
        self._committed = 0  # the requests covered by finished commits
        self._taken = 0  # batches taken from the queue so far (room made for the producers)
        self._waiting = 0  # producers waiting for room
        self._rate = float(FIRST_RATE)  # rows per second the store commits (measured)
        self._error: BaseException | None = None  # the last failed commit's error
        self._failures = 0  # failed commits so far
        self._streak = 0  # failed commits since the last success (the back-off grows with it)
        self._down_since: float | None = None  # monotonic time of the first failure of an outage
        self._reported = 0.0  # when the outage was last reported
        self._unwritable_since: float | None = None  # first failed write that found it unwritable
        self._gave_up: DatabaseUnwritable | None = None  # raised by every call once set
        self._stopping = False
        _all_sinks.add(self)
        self._thread = threading.Thread(target=self._run, name="tallyboard-sink", daemon=True)
        if start:
            self._thread.start()

    # ---- the training thread's side -------------------------------------------------------------
    def track(self, queue: SeriesQueue) -> SeriesQueue:
        """Drain `queue` from now on. It starts without room (limit 0): its first row asks for some
        (`wait_for_room`), so registering a series costs the same however many there are."""
        self._check_process()
        return queue

    def series(self, run_id: int, tag: str) -> SeriesQueue:
        """New columns that rows of one series are appended to without a limit: every take visits
        them, so rows need no call to `wait_for_room` (for appenders that bound themselves)."""
        self._check_process()
        queue = SeriesQueue(run_id, tag)
        queue.limit = UNLIMITED
        with self._cond:
            self._active.append(queue)
        return queue

    def add_epochs(self, queue: SeriesQueue) -> None:
        """Give `queue` its epoch column (its first point with an epoch), under the lock a take
        holds, so that the column starts as long as the others and a take never sees it half made."""
        with self._cond:
            queue.start_epochs()

    def realign(self, queue: SeriesQueue) -> None:
        """A point half appended to `queue` (see `ScalarColumns.realign`), dropped under the take's lock."""
        with self._cond:
            queue.realign()

    def put(self, kind: str, row: QueuedRecord, wait: bool = True) -> None:
        """Queue one record for the `Batch` list `kind` ('media', 'texts', 'hparams', 'run_updates', ...).
        When the records' share of the queue is full, wait for room first; not for the records that
        end a run (`wait=False`, and results: `write_result` waits `OUTAGE_WAIT` at most, in its flush)."""
        self._check_process()
        self._raise_if_gave_up()
        size = record_bytes(row)
        wait = wait and kind != "results"
        with self._cond:
            while (
                wait
                and self._queued_bytes
                and self._queued_bytes + size > self.max_queue_bytes * RECORD_SHARE
            ):
                self._wait_for_take()
            self._records.append((kind, row))
            self._queued_bytes += size

    def wait_for_room(self, queue: SeriesQueue | None = None) -> None:
        """A series reached its limit: grant it more room while the budget has some. Otherwise
        (back-pressure) wait until the writer thread has taken the queue (the end of the commit in
        flight), or, while the database is unreachable, until it is back; never raises for that,
        never drops a row; raises `DatabaseUnwritable` once the sink gave up."""
        self._check_process()
        self._raise_if_gave_up()
        with self._cond:
            while queue is None or len(queue.values) >= queue.limit:
                if queue is not None and self._grant(queue):
                    return
                self._wait_for_take()
                if queue is None:
                    return

    def _grant(self, queue: SeriesQueue) -> bool:
        """Raise `queue`'s limit above the rows it holds, within what the budget has left since the
        last take; whether it could. A series without a limit joins the next take here, granted
        its `pace`; one at its limit gets as much again, so it asks a few times per take, not per
        row. The rows it holds are counted in the budget whether or not more room is left."""
        held, base = len(queue.values), queue.limit
        wanted = max(held + 1, 2 * base if base else held + queue.pace)
        limit = max(held, min(wanted, base + self._budget_rows() - self._granted))
        if limit and not base:
            self._active.append(queue)
        self._granted += limit - base
        queue.limit = limit
        return limit > held

    def _wait_for_take(self) -> None:
        taken = self._taken
        self._waiting += 1
        self._cond.notify_all()
        try:
            while self._taken == taken:
                self._raise_if_gave_up()
                self._raise_if_writer_stopped()
                self._cond.wait(1.0)
        finally:
            self._waiting -= 1

    def _raise_if_gave_up(self) -> None:
        if self._gave_up is not None:
            raise self._gave_up

    def _raise_if_writer_stopped(self) -> None:
        """A writer thread that ended (not one never started: `turn()` drives that sink)."""
        if self._thread.ident is not None and not self._thread.is_alive():
            raise RuntimeError("the tallyboard writer thread has stopped")

    def _check_process(self) -> None:
        if self.pid != os.getpid():
            raise RuntimeError(
                f"this run belongs to process {self.pid}: a forked child (a DataLoader worker, say) "
                "cannot log to its parent's run. Open a run of its own in the child "
                "(ResultTable(...).new_run), or log from the parent."
            )

    def flush(self, wait: float = 0.0) -> None:
        """Return once everything queued before the call is committed. If a commit fails meanwhile
        (or the database is already unreachable), keep trying for `wait` seconds, then raise
        `NotDurableError`: the records stay queued and are written once the database is back."""
        self._check_process()
        deadline = self._clock() + wait
        with self._cond:
            self._requested += 1
            target, failures = self._requested, self._failures
            self._cond.notify_all()
            while self._committed < target:
                self._raise_if_gave_up()
                if self._failures > failures and self._clock() >= deadline:
                    raise NotDurableError(self._outage_text())
                self._raise_if_writer_stopped()
                self._cond.wait(max(0.05, min(1.0, deadline - self._clock())))

    def _outage_text(self) -> str:
        down = 0.0 if self._down_since is None else self._clock() - self._down_since
        text = (
            f"tallyboard could not write to {self.store.url} for {down:.0f} s ({self._error}); "
            f"{self.pending():,} records wait in memory, not yet durable: they are written when the "
            "database accepts them again, as long as this process lives"
        )
        if self._waiting:  # the queue is at its bound: say that the training itself is held up
            text += "; the queue is full, so logging calls (and the training that makes them) wait until then"
        return text

    def unreachable(self) -> bool:
        """Whether the database is failing this sink's commits now (an outage, a full disk): what
        is written meanwhile must queue behind them, in order (see `LogWriter._change_row`)."""
        return self._down_since is not None

    def pending(self) -> int:
        """Records queued or in failed batches (an estimate, read without stopping the producers)."""
        resend = self._resend[:]
        return sum(len(q.values) for q in self._active[:]) + len(self._records) + sum(map(len, resend))

    def queued_bytes(self) -> int:
        """Memory of what waits, by the estimates the budget uses: the queue and a failed batch."""
        rows = sum(len(q.values) for q in self._active[:])
        records = self._queued_bytes
        for batch in self._resend[:]:
            rows += sum(len(chunk) for _, _, chunk in batch.scalars)
            records += sum(record_bytes(row) for kind in BATCH_RECORDS for row in getattr(batch, kind))
        return rows * ROW_BYTES + records

    def release(self, run_id: int) -> None:
        """A run has ended: one user fewer. Its series need no forgetting: the sink holds a series
        only from its request for room to the next take."""
        with _sinks_lock:
            self.users -= 1
            self._idle_since = self._clock()

    # ---- the budget --------------------------------------------------------------------------------
    def _budget_rows(self) -> int:
        """Scalar rows the queue may hold (the limits granted since the last take add up to no
        more): what commits in `COMMIT_BUDGET` seconds at the measured rate, and what fits in
        `SCALAR_SHARE` of `max_queue_bytes`. The batch being committed is taken from the queue, so
        it is no larger; the records' queue and batch have the rest."""
        by_bytes = int(self.max_queue_bytes * SCALAR_SHARE / ROW_BYTES)
        return max(1, min(by_bytes, max(MIN_BUDGET_ROWS, int(self._rate * COMMIT_BUDGET))))

    # ---- the writer thread ----------------------------------------------------------------------
    def _take(self) -> Batch:
        """Everything queued, as one batch. Visits only the series granted room since the last take,
        and leaves them without a limit, the budget whole again: a series' next row asks for room."""
        batch = Batch()
        with self._cond:
            active, self._active, self._granted = self._active, [], 0
            for queue in active:
                if queue.limit == UNLIMITED:
                    self._active.append(queue)
                else:  # before its rows are read: a row appended after that read asks for room
                    queue.limit = 0
                if queue.values:
                    chunk = queue.take()
                    batch.scalars.append((queue.run_id, queue.tag, chunk))
                    queue.pace = len(chunk)
            records, self._records, self._queued_bytes = self._records, [], 0  # put() appends under the lock
            self._taken += 1
            self._cond.notify_all()
        for kind, row in records:
            getattr(batch, kind).append(row)
        return batch

    def _run(self) -> None:
        last_start = 0.0
        while True:
            with self._cond:
                due = last_start + self.commit_interval
                while (
                    self._committed == self._requested
                    and not self._stopping
                    and not self._waiting
                    and self._clock() < due
                ):
                    self._cond.wait(due - self._clock())
                request, stopping = self._requested, self._stopping
            last_start = self._clock()
            size = self.turn(request)
            if self._gave_up is not None:
                return
            if size is None:  # a flush() or a producer waiting for room wakes it to try again
                with self._cond:
                    self._cond.wait(self.backoff())
            elif (stopping and size is not None) or (size == 0 and self._idle_exit()):
                if not stopping:
                    self.store.close()
                return

    def turn(self, request: int | None = None) -> int | None:
        """One commit of the writer thread: what is queued (after any batch to send again), then
        the flush requests up to `request` (all made so far by default) count as done. The rows
        written, or None when the commit failed. The thread calls it on its schedule; a test calls
        it on a sink made with `start=False`."""
        if request is None:
            with self._cond:
                request = self._requested
        size = self._commit()
        with self._cond:
            if size is not None:
                self._committed = max(self._committed, request)
            self._cond.notify_all()
        return size

    def backoff(self) -> float:
        """Seconds the writer waits after a failed commit: the interval doubled per failure in a
        row (`_streak`, 0 again after a success), never more than `MAX_BACKOFF`."""
        return min(MAX_BACKOFF, self.commit_interval * 2.0 ** min(self._streak, 6))

    def _idle_exit(self) -> bool:
        """Whether a shared sink with no runs left should end; decided under the registry's lock,
        so `sink_for` never hands out a sink that is about to stop."""
        if self.idle_stop is None or self.users > 0:
            return False
        with _sinks_lock:
            idle = self._clock() - self._idle_since >= self.idle_stop
            if self.users > 0 or not idle or self._records or any(q.values for q in self._active):
                return False
            if self.key is not None and _sinks.get(self.key) is self:
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
            start = self._clock()
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
            self._succeeded(len(batch), self._clock() - start)
            reason = self.store.unwritable(failed=False)  # a deleted file takes writes: only a look tells
            if reason is not None:
                self._give_up(reason)
                return None
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

    def _succeeded(self, size: int, seconds: float) -> None:
        """Learn the commit rate from batches large enough to measure it; end an outage."""
        self._streak = 0
        if size >= 1000 and seconds > 0:  # slower at once (the loss window), faster by steps
            self._rate = min(size / seconds, self._rate * RATE_STEP)
        if self._down_since is not None:
            down = self._clock() - self._down_since
            log.warning("tallyboard: %s accepts writes again after %.0f s", self.store.url, down)
            self._down_since = None

    def _failed(self, error: Exception) -> None:
        """The database did not take the batch at the head of `_resend` (unreachable, disk full,
        ...): it stays there to be sent again unchanged; say so without a traceback every time (now,
        then every `REPORT_EVERY` seconds); the writer then waits `backoff()`, or less if a flush()
        wakes it to try again."""
        now = self._clock()
        reason = self.store.unwritable(failed=True)
        if reason is None:
            self._unwritable_since = None
        elif self._unwritable_since is None:
            self._unwritable_since = now
        elif now - self._unwritable_since >= GIVE_UP_AFTER:
            self._give_up(f"{reason} ({error})")
            return
        with self._cond:
            self._error = error
            self._failures += 1
            self._streak += 1
            if self._down_since is None:
                self._down_since, self._reported = now, 0.0
            if now - self._reported >= REPORT_EVERY:
                self._reported = now
                log.warning("%s", self._outage_text())
            self._cond.notify_all()

    def _give_up(self, reason: str) -> None:
        """The database will not take writes again: stop the writer, and make every logging call,
        flush and close raise instead of waiting for room that never comes."""
        with self._cond:
            self._gave_up = DatabaseUnwritable(
                f"tallyboard cannot write to {self.store.url} any more: {reason}. What was "
                f"committed before stays; {self.pending():,} records logged since are lost"
            )
            self._cond.notify_all()
        log.error("%s", self._gave_up)

    def stop(self) -> None:
        """Commit what is left and end the writer thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.ident is None:  # driven by turn(): the last one is the caller's
            self.turn()
        else:
            self._thread.join()
        self.store.close()


# ---- one sink per database per process ---------------------------------------------------------
_sinks: dict[Location, Sink] = {}
_sinks_lock = threading.RLock()
_all_sinks: weakref.WeakSet[Sink] = weakref.WeakSet()  # every sink of the process, shared or not


def _file_identity(location: Location) -> tuple[int, int] | None:
    """(device, inode) of a SQLite file: a file deleted and created again is another database."""
    if location.sqlite_path is None:
        return None
    with contextlib.suppress(OSError):
        stat = os.stat(location.sqlite_path)
        return stat.st_dev, stat.st_ino
    return None


class NullSink:
    """The sink of a disabled run (`new_run(disable=True)`): it takes every record and keeps none,
    so a disabled `LogWriter` is an ordinary one that holds a sink, not one that checks for None."""

    key = None

    def track(self, queue: SeriesQueue) -> SeriesQueue:
        return queue

    def put(self, kind: str, row: QueuedRecord, wait: bool = True) -> None:
        """Drop the record."""

    def wait_for_room(self, queue: SeriesQueue | None = None) -> None:
        if queue is not None:
            queue.take()

    def add_epochs(self, queue: SeriesQueue) -> None:
        queue.start_epochs()

    def realign(self, queue: SeriesQueue) -> None:
        queue.realign()

    def flush(self, wait: float = 0.0) -> None:
        """Nothing was kept: nothing to wait for."""

    def unreachable(self) -> bool:
        return False


def all_sinks() -> list[Sink]:
    """Every sink of this process, shared or not (the exit paths drain them)."""
    return list(_all_sinks)


def sink_for(url: LocationLike, commit_interval: float = DEFAULT_COMMIT_INTERVAL) -> Sink:
    """The process's sink for the database at `url`, with one more user (a run, which must call
    `release` when it ends). Started on first use; it stops once idle without users."""
    location = Location.of(url)
    key = location if location.sqlite_path is None else Location(os.path.realpath(location.sqlite_path))
    with _sinks_lock:
        sink = _sinks.get(key)
        if sink is None or not sink._thread.is_alive() or sink.identity != _file_identity(location):
            store = open_store(location)
            store.retry_for = min(store.retry_for, STORE_RETRY_FOR)  # the sink takes over after that
            sink = _sinks[key] = Sink(store, commit_interval, idle_stop=IDLE_STOP)
            sink.key, sink.identity = key, _file_identity(location)
        sink.users += 1
        return sink


def _forget_parent_sinks() -> None:
    """In a forked child (e.g. a DataLoader worker) the parent's sinks have no thread: start from
    none, with a fresh lock in case one was held at the fork. A copy of a parent's run that the
    child logs to fails at its first call (every limit is 0, so the first `add_scalar` asks the
    sink for room, and the sink refuses another process)."""
    global _sinks_lock
    _sinks_lock = threading.RLock()
    _sinks.clear()
    for sink in list(_all_sinks):
        for queue in sink._active:  # the others have no limit already
            queue.limit = 0


os.register_at_fork(after_in_child=_forget_parent_sinks)

"""LogWriter: the per-run API. It validates in the caller's thread and hands records to the sink.

`add_scalar` is the hot path (called every training step), so it does the least that keeps the
data right: one dict lookup for the series, a type check of the value and the step, a clock read,
and an append to each of the series' `array` columns (see sink.py for why that needs no lock).
Everything else -- tag ids, SQL, transactions -- happens in the sink's thread, except changes to
the run's own row (status, tag, note, colour, hparams, results): those are rare, and written at
once so that this process sees them at once (see `_row_store`). A bad value raises `TypeError` before
anything is appended, so a failed call leaves no half-written record.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Container
from typing import TYPE_CHECKING, Any

from tallyboard.run.alerting import AlertCalls
from tallyboard.run.exit_paths import AT_EXIT, closed, end_run, opened
from tallyboard.run.sink import NullSink, SeriesQueue, Sink
from tallyboard.store import Location, Store
from tallyboard.store.records import (
    NO_EPOCH,
    QueuedRecord,
    QueuedRepetition,
    QueuedValue,
    ResumePoint,
    RunUpdate,
    ScalarRow,
)
from tallyboard.store.run_fields import window_tags_text
from tallyboard.values import (
    INT64_MAX,
    INT64_MIN,
    check_key,
    json_value,
    to_float,
    to_int,
    to_walltime,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    pass

_clock = time.perf_counter


# The open writer of each run in this process, by (sink key, run id): see `let_go`.
_writing: dict[tuple[Location | None, int], LogWriter] = {}


def let_go(sink: Sink, run_id: int) -> None:
    """Drain and make read-only the writer of `run_id` still open in this process, if any (a
    trainer that resumes the run it is logging, a notebook cell run again), without ending the run:
    two writers must never count the steps of one series."""
    previous = _writing.get((sink.key, run_id))
    if previous is not None and previous.pid == os.getpid():
        previous._end(None)


class _Series(SeriesQueue):
    """The state of one tag in the current repetition; its columns are drained by the sink. A new
    repetition starts new series (`new_repetition`): columns hold the points of one repetition."""

    __slots__ = ("calls", "watch")

    def __init__(self, run_id: int, tag: str, rep: int) -> None:
        super().__init__(run_id, tag, rep)
        self.calls = 0
        self.watch: list[ScalarRow] | None = None  # run/alerting.py: the rows rules have yet to see


class LogWriter(AlertCalls):
    """Everything logged for one run. Obtained from `ResultTable.new_run` or `new_debug_run`
    (`load_run` gives a `RunView`, to read). A context manager: leaving the block closes the run,
    as failed if an exception is passing through.

    A disabled run (`new_run(disable=True)`) writes to a `NullSink` and ignores every call, bad
    values included: switching logging off must not make a script fail."""

    def __init__(
        self,
        store: Store,
        sink: Sink | NullSink,
        run_id: int,
        keep_each: int = 1,
        auto_log_plt: bool = False,
        disable: bool = False,
        resume: ResumePoint | None = None,
        artifacts: str | None = None,
    ) -> None:
        if keep_each < 1:
            raise ValueError(f"keep_each must be 1 or more, got {keep_each}")
        super().__init__(store, run_id)
        self._sink = sink
        self._keep_each = keep_each
        self._disabled = disable
        self._read_only = disable
        self._series: dict[str, _Series] = {}
        self._rep = 0
        self._rep_start = _clock()
        self.owner = threading.get_ident()
        self.pid = os.getpid()
        self._stoppers: list[Callable[[], None]] = []
        self._tracker: Any = None  # media.FigureTracker, shared by the plt.show hook and manual calls
        self._artifact_location = artifacts  # where log_artifact copies files (None: not configured)
        self._uploader: Any = None  # artifacts.Uploader, started by the first log_artifact
        if not self._read_only:
            _writing[(sink.key, run_id)] = self
            opened(self, self._live_sink)
            if resume is not None:
                self._continue(resume)
            if auto_log_plt:
                from tallyboard import media

                self._stoppers.append(media.install_show_hook(self._log_figures))

    def _continue(self, resume: ResumePoint) -> None:
        """Pick up a resumed run where it stopped: its last repetition, walltimes measured from
        that repetition's start, and each tag's auto step after its last logged one."""
        self._rep = resume.rep
        self._rep_start = _clock() - max(0.0, time.time() - resume.rep_start)
        for tag, step in resume.next_steps.items():
            self._new_series(tag).calls = step

    # ---- scalars: the hot path -------------------------------------------------------------------
    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        step: int | None = None,
        epoch: int | None = None,
        walltime: float | None = None,
        flush: bool = False,
    ) -> None:
        """Log a value of `tag` ('split/name'). `step` None counts calls of the tag in this repetition;
        `walltime` None is seconds since the repetition started. NaN and +-inf are kept."""
        if self._read_only:
            return self._refuse()
        try:  # a subscript costs less than .get(); a new tag is rare
            series = self._series[tag]
        except KeyError:
            series = None
        if series is None:  # outside the except: a refused tag's error is not chained to a KeyError
            series = self._new_series(tag)
        if type(scalar_value) is not float:
            scalar_value = to_float(tag, scalar_value)
        calls = series.calls
        if step is None:
            step = calls
        elif type(step) is not int:  # an int beyond int64 is refused by its column's append, below
            step = to_int(f"add_scalar({tag!r}) step", step)
        if epoch is not None:
            if type(epoch) is not int or not INT64_MIN <= epoch <= INT64_MAX:
                epoch = to_int(f"add_scalar({tag!r}) epoch", epoch)
            if series.epochs is None:  # the series' first epoch: its column from now on
                self._sink.add_epochs(series)
        walltime = _clock() - self._rep_start if walltime is None else to_walltime(tag, walltime)
        if self._keep_each != 1 and calls % self._keep_each:
            if not INT64_MIN <= step <= INT64_MAX:  # refused as a kept call's is
                to_int(f"add_scalar({tag!r}) step", step)
            series.calls = calls + 1
            return None
        values = series.values
        try:  # free unless raised; values last: the sink counts them (store/records.ScalarColumns)
            series.steps.append(step)
            series.walltimes.append(walltime)
            if (epochs := series.epochs) is not None:
                epochs.append(NO_EPOCH if epoch is None else epoch)
            values.append(scalar_value)
        except BaseException as error:  # a signal's exception between two appends: no half point stays
            self._sink.realign(series)
            if isinstance(error, OverflowError):  # the step's append, the first: nothing was appended
                to_int(f"add_scalar({tag!r}) step", step)
            raise
        series.calls = calls + 1
        if (watch := series.watch) is not None:  # rules watch the tag (run/alerting.py takes it there)
            watch.append((self._rep, step, epoch, walltime, scalar_value))
        if len(values) >= series.limit:  # room from the sink, or its back-pressure (see sink.SeriesQueue)
            self._sink.wait_for_room(series)
        if flush:  # after: a series the sink does not look at yet joins the take by asking for room
            self.flush()
        return None

    def auto_step(self, excluding: Container[str] = ()) -> int | None:
        """The furthest auto step of this repetition's scalars but those of `excluding` (the step
        the next `add_scalar` of the most-logged of them gets: the training step, in a loop that logs
        every step); None before any of them was logged. Not on the hot path: for monitor windows,
        which may close in another thread (the copy, made in one C call, never sees a tag added)."""
        series = tuple(self._series.items())
        return max((s.calls for tag, s in series if s.calls and tag not in excluding), default=None)

    def set_window_tags(self, tags: Collection[str]) -> None:
        """Say which of this run's tags have steps that count the windows of a monitor Stat
        (`runs.window_tags`), so that their charts say "window" under them. ResultTableEventHandler
        calls it. Queued behind what was logged before it, like a record: the caller, inside
        `Stat.add` in a training loop maybe, never waits on the database."""
        if not self._read_only:
            self._queue([("run_updates", RunUpdate(self._run_id, {"window_tags": window_tags_text(tags)}))])

    def _furthest_step(self) -> int:
        """The furthest scalar step of this repetition: where an image or text without a step lands."""
        return max((s.calls for s in self._series.values()), default=0)

    def _new_series(self, tag: str) -> _Series:
        """A tag seen for the first time by this writer: checked once here, never again per call."""
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"tag must be a non-empty string, got {tag!r}")
        check_key("add_scalar tag", tag)
        series = self._series[tag] = _Series(self._run_id, tag, self._rep)
        series.watch = self._watch_of(tag)
        self._sink.track(series)
        return series

    # ---- hparams, results, run fields -----------------------------------------------------------
    def _put_values(self, kind: str, values: dict[str, Any]) -> None:
        """Validate every value, then write them all at once (see `_row_store`)."""
        rows = []
        for name, value in values.items():  # validate all before queueing any
            if not isinstance(name, str) or not name:
                raise TypeError(f"{kind} names must be non-empty strings, got {name!r}")
            check_key(f"{kind} name", name)  # any name: one like a run column is `hparams.NAME`
            rows.append(QueuedValue(self._run_id, name, json_value(name, value)))
        if rows:
            self._change_row(lambda store: store.put_values(kind, rows), [(kind, row) for row in rows])

    def add_hparams(self, param_dict: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Record hyperparameters (columns of the result table); JSON scalars only. A name given both
        in `param_dict` and as a keyword keeps the dict's value, as DeepBoard's `kwargs.update(
        param_dict)` does: code written for DeepBoard logs the same hparams here."""
        if self._read_only:
            return self._refuse()
        self._put_values("hparams", {**kwargs, **(param_dict or {})})
        return None

    def write_result(self, **kwargs: Any) -> None:
        """Record the final results, mark the run finished and make this writer read-only (durably)."""
        if self._read_only:
            return self._refuse()
        self._put_values("results", kwargs)
        self._end("finished")
        return None

    def update_results(self, **kwargs: Any) -> None:
        """Record results now and keep the run going: a value kept up to date while training (the
        best accuracy so far, a peer's run summary) shows in the result table at once. A name given
        again replaces its value; `write_result` later adds the final ones and ends the run."""
        if self._read_only:
            return self._refuse()
        self._put_values("results", kwargs)
        return None

    def new_repetition(self) -> None:
        """Start repetition N+1: auto steps and walltime restart, records carry the new rep."""
        if self._read_only:
            return self._refuse()
        self._rep += 1
        self._rep_start = _clock()
        # New columns for the new repetition; the old ones asked the sink for room with their
        # first point, so its next take drains them.
        self._series = {}
        self._sink.put("repetitions", QueuedRepetition(self._run_id, self._rep, time.time()))
        return None

    def _row_store(self) -> Store:
        """Where changes to the run's row, hparams and results go: written at once, in their own
        small transaction, so this process sees them at once (its next `new_run`'s uniqueness
        check included), as DeepBoard did. They are rare, so the training thread can afford it.
        An open run writes through its sink's connection, in turn with the sink's batches; a
        loaded or ended one through its table's."""
        return self._store if self._read_only else self._live_sink.store

    @property
    def _live_sink(self) -> Sink:
        """The sink of a run being written: a disabled run holds a NullSink and is never written."""
        if isinstance(self._sink, NullSink):
            raise RuntimeError(f"run {self._run_id} is disabled: it writes nothing")
        return self._sink

    def _change_row(
        self, change: Callable[[Store], None], queued: list[tuple[str, QueuedRecord]] | None = None
    ) -> None:
        """Apply a change to the run's row now; should the database refuse the data itself (a
        constraint, a trigger), the caller gets a ValueError at this call and nothing else is held
        back (queued records are quarantined instead; see sink.py).

        An open run whose database cannot be written now (an outage: the sink is failing, or this
        write fails for a reason of the database) queues the same change as `queued` records
        instead, behind what waits already, so the training loop neither raises nor waits for the
        database (issue 12); it arrives with the rest, and `flush()`/`close()` report meanwhile."""
        if self._read_only or queued is None:
            return self._apply(self._row_store(), change)
        if self._sink.unreachable():
            return self._queue(queued)
        store = self._row_store()
        try:
            return self._apply(store, change)
        except ValueError:
            raise
        except Exception as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            log.warning("tallyboard: run %s: %s; the change waits for the database", self._run_id, first)
            return self._queue(queued)

    def _queue(self, records: list[tuple[str, QueuedRecord]]) -> None:
        for kind, row in records:
            self._sink.put(kind, row)

    def _set(self, **values: Any) -> None:
        if not self._disabled:  # editing a loaded (read-only) run's row is allowed
            self._change_row(
                lambda store: store.update_run(self._run_id, **values),
                [("run_updates", RunUpdate(self._run_id, values))],
            )

    # ---- durability and lifecycle --------------------------------------------------------------
    def before_end(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the run ends (close, write_result, an exit path), before it stops
        taking records: what still has something to log (a sampler thread, the open windows of
        Stats feeding a `ResultTableEventHandler`) logs it into the run. Once per callback."""
        if not self._read_only and callback not in self._stoppers:
            self._stoppers.append(callback)

    def flush(self) -> None:
        """Return once everything logged so far is committed to the database (artefacts copied)."""
        if not self._disabled:
            self._evaluate_alerts()
            self._wait_for_artifacts()
            self._sink.flush()

    def _end(self, status: str | None, error: str | None = None) -> None:
        """Final status + end time (+ how it failed: `error`, failure.py), drain, become read-only;
        a second end is a no-op. In a forked child the run is the parent's to end: the child's copy
        only becomes read-only. Status None drains and lets go without ending the run (a newer
        writer of the run takes over; `detach`)."""
        if self._read_only:
            return
        if self.pid != os.getpid():
            self._read_only = True
            return
        if status == AT_EXIT:
            status = self._chosen_end or "finished"
        for stop in self._stoppers:  # see before_end
            stop()
        self._evaluate_alerts(last=True)
        self._read_only = True
        if self._uploader is not None:
            self._uploader.close()  # waits for the copies first
        try:
            end_run(self._live_sink, self._run_id, status, error if status == "failed" else None)
        finally:
            closed(self)
            if _writing.get((self._sink.key, self._run_id)) is self:
                del _writing[(self._sink.key, self._run_id)]

    # ---- DeepBoard's attributes ------------------------------------------------------------------
    @property
    def run_rep(self) -> int:
        """The repetition being logged (0, then 1 after `new_repetition()`...)."""
        return self._rep

    @property
    def global_step(self) -> dict[str, int]:
        """{tag: the step its next `add_scalar` without `step` gets} for the tags logged in this
        repetition (a copy; empty after `new_repetition()`, as in DeepBoard)."""
        return {tag: series.calls for tag, series in self._series.items() if series.calls}

"""LogWriter: the per-run API. It validates in the caller's thread and hands records to the sink.

`add_scalar` is the hot path (called every training step), so it does the least that keeps the
data right: one dict lookup for the series, a type check of the value, a clock read, and an append
of a plain tuple to the series' list (see sink.py for why that needs no lock). Everything else --
tag ids, SQL, transactions -- happens in the sink's thread, except changes to the run's own row
(status, tag, note, colour, hparams, results): those are rare, and written at once so that this
process sees them at once (see `_row_store`). A bad value raises `TypeError` before
anything is appended, so a failed call leaves no half-written record.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tallyboard.media import open_png
from tallyboard.sink import AT_EXIT, SeriesQueue, Sink, closed, end_run, opened
from tallyboard.store import Store
from tallyboard.store.records import (
    ArtifactRow,
    ConsoleLine,
    MediaRow,
    QueuedEnvironment,
    QueuedLine,
    QueuedMedia,
    QueuedRepetition,
    QueuedText,
    QueuedValue,
    ResumePoint,
    RunUpdate,
)
from tallyboard.store.run_row import RUN_FIELDS
from tallyboard.values import (
    INT64_MAX,
    INT64_MIN,
    check_key,
    check_text,
    json_value,
    to_float,
    to_int,
    to_walltime,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from tallyboard.histogram import HistogramRecord

Status = Literal["running", "finished", "failed"]
STATUSES = ("running", "finished", "failed")
END_STATUSES = ("finished", "failed")
_clock = time.perf_counter


CONSOLE_STREAMS = ("stdout", "stderr", "log")


@dataclass(slots=True)
class Scalar:
    """One logged scalar, as DeepBoard's `get_scalar` returned it (plus the whole `tag`)."""

    run_id: int
    epoch: int | None
    step: int
    split: str
    label: str
    value: float
    wall_time: float
    run_rep: int
    tag: str


# get_scalar_arrays column -> store column (NULLs as text that numpy reads as a float).
_ARRAY_COLUMNS = {
    "rep": "rep",
    "step": "step",
    "epoch": "epoch_or_minus_one",
    "walltime": "walltime_ms",
    "value": "value_or_nan",
}


# The open writer of each run in this process, by (sink key, run id): see `let_go`.
_writing: dict[tuple[str | None, int], LogWriter] = {}


def let_go(sink: Sink, run_id: int) -> None:
    """Drain and make read-only the writer of `run_id` still open in this process, if any (a
    trainer that resumes the run it is logging, a notebook cell run again), without ending the run:
    two writers must never count the steps of one series."""
    previous = _writing.get((sink.key, run_id))
    if previous is not None and previous.pid == os.getpid():
        previous._end(None)


class _Series(SeriesQueue):
    """The state of one tag in the current repetition; `rows` is drained by the sink."""

    __slots__ = ("calls",)

    def __init__(self, run_id: int, tag: str) -> None:
        super().__init__(run_id, tag)
        self.calls = 0


def _checked_tags(tags: tuple[str, ...]) -> list[str]:
    """Run tags, each a key the store can hold (a mistake in the third leaves the first two unset)."""
    return list(dict.fromkeys(check_key("run tag", tag) for tag in tags))


def _record_tag(kind: str, tag: str | None) -> str:
    """The tag of an image, figure, text or fragment: None (no tag) is stored as ''."""
    if tag is None or (isinstance(tag, str) and not tag):
        return ""
    return check_key(f"{kind} tag", tag)


def split_label(tag: str) -> tuple[str, str]:
    """DeepBoard's (split, label) of a tag: 'train/loss' -> ('train', 'loss'), 'loss' -> ('', 'loss')."""
    split, sep, label = tag.partition("/")
    return (split, label) if sep else ("", tag)


def _record_reader(table: str, kind: str, doc: str) -> Callable[..., list[dict[str, Any]]]:
    """One of DeepBoard's four artefact getters; they differ only in what they read."""

    def read(
        self: LogWriter,
        id: int | None = None,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        repetition: int | None = None,
    ) -> list[dict[str, Any]]:
        return self._records(table, kind, id=id, step=step, tag=tag, epoch=epoch, repetition=repetition)

    read.__doc__ = doc + " Filters left None match anything."
    return read


class LogWriter:
    """Everything logged for one run. Obtained from `ResultTable.new_run`, `new_debug_run` or
    `load_run` (read-only). A context manager: leaving the block closes the run, as failed if an
    exception is passing through."""

    def __init__(
        self,
        store: Store,
        sink: Sink | None,
        run_id: int,
        keep_each: int = 1,
        auto_log_plt: bool = False,
        disable: bool = False,
        read_only: bool = False,
        resume: ResumePoint | None = None,
        artifacts: str | None = None,
    ) -> None:
        if keep_each < 1:
            raise ValueError(f"keep_each must be 1 or more, got {keep_each}")
        self._store = store
        self._sink = sink
        self._run_id = run_id
        self._keep_each = keep_each
        self._disabled = disable
        self._read_only = read_only or disable or sink is None
        self._series: dict[str, _Series] = {}
        self._rep = 0
        self._rep_start = _clock()
        self.owner = threading.get_ident()
        self.pid = os.getpid()
        self._stoppers: list[Callable[[], None]] = []
        self._tracker: Any = None  # media.FigureTracker, shared by the plt.show hook and manual calls
        self._chosen_end: str | None = None  # an end status the user set; close() keeps it
        self._artifact_location = artifacts  # where log_artifact copies files (None: not configured)
        self._uploader: Any = None  # artifacts.Uploader, started by the first log_artifact
        if not self._read_only:
            _writing[(sink.key, run_id)] = self
            opened(self, sink)
            if resume is not None:
                self._continue(resume)
            if auto_log_plt:
                from tallyboard import media

                self._stoppers.append(media.install_show_hook(self._log_figures))

    @property
    def run_id(self) -> int:
        return self._run_id

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
        series = self._series.get(tag)
        if series is None:
            series = self._new_series(tag)
        if type(scalar_value) is not float:
            scalar_value = to_float(tag, scalar_value)
        if step is None:
            step = series.calls
        elif type(step) is not int or not INT64_MIN <= step <= INT64_MAX:
            step = to_int(f"add_scalar({tag!r}) step", step)
        if epoch is not None and (type(epoch) is not int or not INT64_MIN <= epoch <= INT64_MAX):
            epoch = to_int(f"add_scalar({tag!r}) epoch", epoch)
        walltime = _clock() - self._rep_start if walltime is None else to_walltime(tag, walltime)
        calls = series.calls
        series.calls = calls + 1
        if self._keep_each != 1 and calls % self._keep_each:
            return None
        rows = series.rows
        rows.append(
            (self._rep, step, epoch, walltime, None if scalar_value != scalar_value else scalar_value)
        )
        if flush:
            self.flush()
        elif len(rows) >= series.limit:  # the sink's back-pressure (see sink.SeriesQueue)
            self._sink.wait_for_room(series)
        return None

    def _new_series(self, tag: str) -> _Series:
        """A tag seen for the first time by this writer: checked once here, never again per call."""
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"tag must be a non-empty string, got {tag!r}")
        check_key("add_scalar tag", tag)
        series = self._series[tag] = _Series(self._run_id, tag)
        self._sink.track(series)
        return series

    def _refuse(self) -> None:
        if not self._disabled:
            raise RuntimeError(
                f"run {self._run_id} is read-only: it was loaded with load_run, or its results were "
                "written, or it was closed"
            )

    # ---- artefacts -------------------------------------------------------------------------------
    def _position(self, step: int | None, epoch: int | None) -> tuple[int, int | None, float]:
        """Step (default: the furthest scalar step of this repetition), epoch and walltime of a record."""
        if step is None:
            step = max((s.calls for s in self._series.values()), default=0)
        step = to_int("step", step)
        return step, None if epoch is None else to_int("epoch", epoch), _clock() - self._rep_start

    def _put_media(self, kind: str, png: bytes, width: int, height: int, step, tag, epoch, flush) -> None:
        tag = _record_tag(kind, tag)
        step, epoch, walltime = self._position(step, epoch)
        row = QueuedMedia(self._run_id, tag, self._rep, step, epoch, walltime, kind, width, height, png)
        self._sink.put("media", row)
        if flush:
            self.flush()

    def add_image(
        self,
        image: Any,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
    ) -> None:
        """Log an image (PIL image, PNG/JPEG bytes, numpy HW/HWC array, torch CHW tensor) as PNG."""
        if self._read_only:
            return self._refuse()
        from tallyboard import media

        png, width, height = media.to_png(image)
        self._put_media("image", png, width, height, step, tag, epoch, flush)
        return None

    def detect_and_log_figures(
        self,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
        close_figs: bool = False,
    ) -> None:
        """Log the open pyplot figures that are new or changed since they were last logged."""
        if self._read_only:
            return self._refuse()
        for figure in self._log_figures(step, tag, epoch):
            if close_figs:
                import matplotlib.pyplot as plt

                plt.close(figure)
        if flush:
            self.flush()
        return None

    def _log_figures(self, step: int | None = None, tag: str | None = None, epoch: int | None = None) -> list:
        """Queue the changed figures (also the auto_log_plt hook, called just before plt.show())."""
        if self._read_only:
            return []
        if self._tracker is None:
            from tallyboard import media

            self._tracker = media.FigureTracker()
        changed = self._tracker.changed_figures()
        for _figure, png, width, height in changed:
            self._put_media("figure", png, width, height, step, tag, epoch, False)
        return [figure for figure, _, _, _ in changed]

    def _put_text(self, kind: str, content: Any, step, tag, epoch, flush, markdown: bool = False) -> None:
        if self._read_only:
            return self._refuse()
        check_text(f"{kind} content", content)
        if not isinstance(markdown, bool):
            raise TypeError(f"markdown must be True or False, got {markdown!r}")
        tag = _record_tag(kind, tag)
        step, epoch, walltime = self._position(step, epoch)
        row = QueuedText(self._run_id, tag, self._rep, step, epoch, walltime, kind, content, int(markdown))
        self._sink.put("texts", row)
        if flush:
            self.flush()
        return None

    def add_text(
        self,
        text: str,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
        markdown: bool = False,
    ) -> None:
        """Log text, stored verbatim: shown escaped, or with `markdown=True` rendered as Markdown
        and then sanitised (no raw HTML, no scripts, no `javascript:` links; docs/dashboard.md)."""
        return self._put_text("text", text, step, tag, epoch, flush, markdown)

    def add_fragment(
        self,
        content: str,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
    ) -> None:
        """Log an HTML fragment, stored verbatim (shown in a sandboxed frame)."""
        return self._put_text("fragment", content, step, tag, epoch, flush)

    def add_histogram(
        self,
        tag: str,
        values: Any,
        step: int | None = None,
        epoch: int | None = None,
        bins: int = 64,
        flush: bool = False,
    ) -> None:
        """Log the histogram of `values` (numpy array, torch tensor on any device, or a sequence of
        numbers): count, min, max, sum, sum of squares and `bins` equal buckets, computed here
        (on the tensor's device) so only the summary is queued. NaN/inf are counted apart and left
        out of the rest (`tallyboard/histogram.py`)."""
        if self._read_only:
            return self._refuse()
        from tallyboard.histogram import summarise
        from tallyboard.store.histograms import queued_row

        if not isinstance(tag, str) or not tag:
            raise TypeError(f"histogram tag must be a non-empty string, got {tag!r}")
        check_key("histogram tag", tag)
        histogram = summarise(values, bins)
        step, epoch, walltime = self._position(step, epoch)
        self._sink.put(
            "histograms", queued_row(self._run_id, tag, self._rep, step, epoch, walltime, histogram)
        )
        if flush:
            self.flush()

    # ---- console and environment ---------------------------------------------------------------
    def add_console_line(self, line: str, stream: str = "stdout") -> None:
        """Log one line of console output (what `capture_console=True` does for every line the
        process writes); `stream` is 'stdout', 'stderr' or 'log'."""
        if self._read_only:
            return self._refuse()
        check_text("console line", line)
        if stream not in CONSOLE_STREAMS:
            raise ValueError(f"stream must be one of {CONSOLE_STREAMS}, got {stream!r}")
        self._sink.put(
            "console", QueuedLine(self._run_id, self._rep, _clock() - self._rep_start, stream, line)
        )
        return None

    def record_environment(self, environment: dict[str, Any]) -> None:
        """Store `environment` (environment.capture()) with the run, replacing one stored before."""
        if self._read_only:
            return self._refuse()
        content = json.dumps(environment, sort_keys=True, default=str)
        self._sink.put("environments", QueuedEnvironment(self._run_id, check_text("environment", content)))
        return None

    # ---- hparams, results, run fields -----------------------------------------------------------
    def _put_values(self, kind: str, values: dict[str, Any]) -> None:
        """Validate every value, then write them all at once (see `_row_store`)."""
        rows = []
        for name, value in values.items():  # validate all before queueing any
            if not isinstance(name, str) or not name:
                raise TypeError(f"{kind} names must be non-empty strings, got {name!r}")
            check_key(f"{kind} name", name)
            if name in RUN_FIELDS:
                raise ValueError(f"{name!r} is a column of every run; choose another {kind} name")
            rows.append(QueuedValue(self._run_id, name, json_value(name, value)))
        if rows:
            self._change_row(lambda store: store.put_values(kind, rows), [(kind, row) for row in rows])

    def add_hparams(self, param_dict: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Record hyperparameters (columns of the result table); JSON scalars only."""
        if self._read_only:
            return self._refuse()
        self._put_values("hparams", {**(param_dict or {}), **kwargs})
        return None

    def write_result(self, **kwargs: Any) -> None:
        """Record the final results, mark the run finished and make this writer read-only (durably)."""
        if self._read_only:
            return self._refuse()
        self._put_values("results", kwargs)
        self._end("finished")
        return None

    def new_repetition(self) -> None:
        """Start repetition N+1: auto steps and walltime restart, records carry the new rep."""
        if self._read_only:
            return self._refuse()
        self._rep += 1
        self._rep_start = _clock()
        for series in self._series.values():
            series.calls = 0
        self._sink.put("repetitions", QueuedRepetition(self._run_id, self._rep, time.time()))
        return None

    def _row_store(self) -> Store:
        """Where changes to the run's row, hparams and results go: written at once, in their own
        small transaction, so this process sees them at once (its next `new_run`'s uniqueness
        check included), as DeepBoard did. They are rare, so the training thread can afford it.
        An open run writes through its sink's connection, in turn with the sink's batches; a
        loaded or ended one through its table's."""
        return self._store if self._read_only else self._sink.store

    def _change_row(
        self, change: Callable[[Store], None], queued: list[tuple[str, tuple]] | None = None
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

    def _apply(self, store: Store, change: Callable[[Store], None]) -> None:
        try:
            change(store)
        except Exception as error:
            if not store.is_record_error(error):
                raise
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ValueError(f"the database refused this change to run {self._run_id}: {first}") from error

    def _queue(self, records: list[tuple[str, tuple]]) -> None:
        for kind, row in records:
            self._sink.put(kind, row)

    def _set(self, **values: Any) -> None:
        if not self._disabled:  # editing a loaded (read-only) run's row is allowed
            self._change_row(
                lambda store: store.update_run(self._run_id, **values),
                [("run_updates", RunUpdate(self._run_id, values))],
            )

    def set_status(self, status: Status) -> None:
        """Set the run's status now. 'finished' or 'failed' is also what `close()` ends the run with:
        the user said how the run went, and closing it must not overrule them."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        self._chosen_end = status if status in END_STATUSES else None
        self._set(status=status)

    def set_note(self, note: str) -> None:
        self._set(note=check_text("note", str(note)))

    def set_tag(self, tag: str) -> None:
        self._set(tag=check_text("run tag", str(tag)))

    def add_tags(self, *tags: str) -> None:
        """Give the run these tags (several per run, unlike DeepBoard's single `tag`), written at
        once. Each is a non-empty key (`values.check_key`); all are checked before any is stored."""
        if not self._disabled:
            self._row_store().change_run_tags(self._run_id, add=_checked_tags(tags))

    def remove_tags(self, *tags: str) -> None:
        """Take these tags off the run (those it lacks are ignored), written at once."""
        if not self._disabled:
            self._row_store().change_run_tags(self._run_id, remove=_checked_tags(tags))

    def get_tags(self) -> list[str]:
        """The run's tags, sorted."""
        return self._store.run_tags(self._run_id).get(self._run_id, [])

    @property
    def tags(self) -> list[str]:
        return self.get_tags()

    def set_color(self, color: str | None = None) -> None:
        """Set the run's colour as RGB hex ('#ff0000' or 'ff0000'); None clears it."""
        if color is not None:
            hex_digits = color[1:] if color.startswith("#") else color
            if len(hex_digits) != 6 or any(c not in "0123456789abcdefABCDEF" for c in hex_digits):
                raise ValueError(f"color must be RGB hex like '#ff0000', got {color!r}")
            color = "#" + hex_digits.lower()
        self._set(color=color)

    # ---- files kept with the run (tallyboard/artifacts.py) ------------------------------------------
    def log_artifact(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        kind: str = "file",
        step: int | None = None,
    ) -> None:
        """Keep the file at `path` with the run, as `name` (default: its file name; a name logged
        again is replaced). The file is checked here and copied by a background thread, so a 2 GB
        checkpoint does not stall training: leave the file unchanged until `flush()` (or the end of
        the run) returns, which waits for the copies."""
        if self._read_only:
            return self._refuse()
        from tallyboard import artifacts

        upload = artifacts.check_upload(self._run_id, path, name, kind, step)
        if self._uploader is None:
            blobs = artifacts.open_blobs(artifacts.require_location(self._artifact_location))
            self._uploader = artifacts.Uploader(blobs, self._row_store().add_artifact)
        self._uploader.submit(upload)
        return None

    def log_artifacts(
        self, folder: str | os.PathLike[str], kind: str = "file", step: int | None = None
    ) -> None:
        """`log_artifact` for every file under `folder`, each named by its path relative to it
        ('sub/file.txt', with forward slashes)."""
        root = Path(folder)
        if not root.is_dir():
            raise NotADirectoryError(f"cannot log the artefacts of {os.fspath(folder)!r}: not a folder")
        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            self.log_artifact(file, file.relative_to(root).as_posix(), kind, step)

    def get_artifacts(self) -> list[ArtifactRow]:
        """The artefacts listed with this run so far (after `flush()`: all logged ones), by name."""
        return self._store.artifacts(self._run_id)

    def _wait_for_artifacts(self) -> None:
        if self._uploader is not None:
            self._uploader.wait()

    # ---- durability and lifecycle --------------------------------------------------------------
    def before_end(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the run ends (close, write_result, an exit path), before it stops
        taking records: what still has something to log (a sampler thread, the open windows of
        Stats feeding a `ResultTableEventHandler`) logs it into the run. Once per callback."""
        if not self._read_only and callback not in self._stoppers:
            self._stoppers.append(callback)

    def flush(self) -> None:
        """Return once everything logged so far is committed to the database (artefacts copied)."""
        if self._sink is not None and not self._disabled:
            self._wait_for_artifacts()
            self._sink.flush()

    def _end(self, status: str | None) -> None:
        """Final status + end time, drain, become read-only; a second end is a no-op. In a forked
        child the run is the parent's to end: the child's copy only becomes read-only. Status None
        drains and lets go without ending the run (a newer writer of the run takes over; `detach`)."""
        if self._read_only:
            return
        if self.pid != os.getpid():
            self._read_only = True
            return
        if status == AT_EXIT:
            status = self._chosen_end or "failed"
        for stop in self._stoppers:  # see before_end
            stop()
        self._read_only = True
        if self._uploader is not None:
            self._uploader.close()  # waits for the copies first
        try:
            end_run(self._sink, self._run_id, status)
        finally:
            closed(self)
            if _writing.get((self._sink.key, self._run_id)) is self:
                del _writing[(self._sink.key, self._run_id)]

    def close(self, status: Literal["finished", "failed"] | None = None) -> None:
        """End the run and make it durable; a second close (or one after `write_result`) is a no-op.

        It ends with `status` if given, else with the end status set by `set_status`, else finished.
        """
        if status is not None and status not in END_STATUSES:
            raise ValueError(f"a run ends with a status of {END_STATUSES}, got {status!r}")
        self._end(status or self._chosen_end or "finished")

    def detach(self) -> None:
        """Stop writing from this process without ending the run: drain what was logged and become
        read-only, leaving the run's status and end to the process that owns it (a spawned DDP
        worker logs into the run its launching process started, and that process ends it)."""
        self._end(None)

    # ---- DeepBoard's attributes ------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """False once the run has ended here (results written, closed, failed) or was loaded
        read-only; a disabled writer stays enabled, as in DeepBoard. Adapters ask before ending a
        run, because an exit path (an uncaught exception, SIGTERM) may have ended it already."""
        return self._disabled or not self._read_only

    @property
    def run_rep(self) -> int:
        """The repetition being logged (0, then 1 after `new_repetition()`...)."""
        return self._rep

    @property
    def global_step(self) -> dict[str, int]:
        """{tag: the step its next `add_scalar` without `step` gets} for the tags logged in this
        repetition (a copy; empty after `new_repetition()`, as in DeepBoard)."""
        return {tag: series.calls for tag, series in self._series.items() if series.calls}

    @property
    def db_path(self) -> str:
        """The table's location: a SQLite file path or a `postgresql://` URL."""
        return self._store.url

    @property
    def formatted_scalars(self) -> list[tuple[str, str]]:
        """(split, label) of every scalar tag of the run: 'train/loss' -> ('train', 'loss'), 'loss'
        -> ('', 'loss')."""
        return [split_label(tag) for tag in self.scalars]

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close("failed" if exc_type is not None else None)

    # ---- reading back ---------------------------------------------------------------------------
    def get_scalar(self, tag: str, repetition: int | None = None) -> list[Scalar]:
        """Every logged value of `tag`, ordered by (repetition, step)."""
        split, label = split_label(tag)
        run_id = self._run_id
        return [
            Scalar(
                run_id, epoch, step, split, label, math.nan if value is None else value, ms / 1000, rep, tag
            )
            for rep, step, epoch, ms, value in self._store.scalars(run_id, tag, repetition)
        ]

    def get_scalar_arrays(
        self, tag: str, repetition: int | None = None, columns: tuple[str, ...] = ("step", "value")
    ) -> dict[str, Any]:
        """The columnar fast path: {column: numpy array} of one series ordered by (repetition, step).

        `columns` are any of 'rep', 'step', 'epoch' (int64; -1 where none was given), 'walltime'
        (float64 seconds) and 'value' (float64, NaN where NaN was logged). Only what is asked for is
        read; pass `repetition` when the run has several, or ask for 'rep' too.
        """
        import itertools

        import numpy as np

        unknown = set(columns) - _ARRAY_COLUMNS.keys()
        if unknown:
            raise ValueError(f"unknown column(s) {sorted(unknown)}; choose from {sorted(_ARRAY_COLUMNS)}")
        rows = self._store.scalars(self._run_id, tag, repetition, tuple(_ARRAY_COLUMNS[c] for c in columns))
        width = len(columns)
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.float64, count=width * len(rows))
        table = flat.reshape(-1, width)
        out = {}
        for index, name in enumerate(columns):
            column = table[:, index]
            if name == "walltime":
                out[name] = column / 1000.0
            elif name == "value":
                out[name] = column.copy()
            else:
                out[name] = column.astype(np.int64)
        return out

    def _records(self, table: str, kind: str, **filters: Any) -> list[dict[str, Any]]:
        read = self._store.media if table == "media" else self._store.texts
        records = []
        markdown = self._store.markdown_text_ids(self._run_id) if table == "texts" else set()
        for row in read(self._run_id, kind, **filters):
            item_id = row.media_id if isinstance(row, MediaRow) else row.text_id
            record = {"id": item_id, "step": row.step, "epoch": row.epoch, "run_rep": row.rep}
            record.update(tag=row.tag or None, walltime=row.walltime_ms / 1000)
            if isinstance(row, MediaRow):
                record.update(width=row.width, height=row.height, png=row.png, image=open_png(row.png))
            else:
                record.update(fragment=row.content, markdown=row.text_id in markdown)
            records.append(record)
        return records

    get_images = _record_reader(
        "media",
        "image",
        "Images as dicts (id, step, epoch, run_rep, tag, walltime, width, height, png, image=PIL).",
    )
    get_figures = _record_reader("media", "figure", "Figures, in the shape of `get_images`.")
    get_text = _record_reader(
        "texts", "text", "Texts as dicts (id, step, epoch, run_rep, tag, walltime, fragment, markdown)."
    )
    get_fragment = _record_reader("texts", "fragment", "HTML fragments, in the shape of `get_text`.")

    def get_histograms(self, tag: str | None = None, repetition: int | None = None) -> list[HistogramRecord]:
        """The run's histograms (of one tag, one repetition, or all) as named records, ordered by
        tag, repetition and step."""
        return self._store.histograms(self._run_id, tag, repetition)

    def get_console(
        self, after: int = 0, limit: int | None = None, search: str | None = None
    ) -> list[ConsoleLine]:
        """The console lines captured with `capture_console=True`, oldest first: named records
        (console_id, rep, walltime_ms, stream, line); see `Store.console` for the arguments."""
        return self._store.console(self._run_id, after, limit, search)

    def get_environment(self) -> dict[str, Any] | None:
        """The environment recorded when the run started (environment.py), None if none was."""
        content = self._store.environment(self._run_id)
        return None if content is None else json.loads(content)

    def get_hparams(self) -> dict[str, Any]:
        return self._store.values("hparams", self._run_id).get(self._run_id, {})

    def get_repetitions(self) -> list[int]:
        return self._store.repetitions(self._run_id)

    def _field(self, name: str) -> Any:
        row = self._store.run(self._run_id)
        if row is None:
            raise RuntimeError(f"run {self._run_id} does not exist")
        return row[name]

    @property
    def status(self) -> str:
        return self._field("status")

    @property
    def tag(self) -> str:
        return self._field("tag")

    @property
    def color(self) -> str | None:
        return self._field("color")

    @property
    def scalars(self) -> list[str]:
        """The tags of the scalars logged in this run."""
        return self._store.tag_names(self._run_id)

    def __getitem__(self, tag: str) -> list[Scalar]:
        return self.get_scalar(tag)

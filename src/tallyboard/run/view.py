"""RunView: one run to read back, and whose row (note, tag, colour, tags, status) may be edited.

`ResultTable.load_run` returns one; a `LogWriter` is one too, plus the logging. Kept apart so
that a loaded run is not a writer in a read-only mode: it has nothing to end, drain or flush, and
its logging methods refuse at the call (`LOGGING_METHODS`), as they always did.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tallyboard.media import open_png
from tallyboard.run import failure
from tallyboard.run.exit_paths import await_the_signal
from tallyboard.store import Store
from tallyboard.store.records import ArtifactRow, ConsoleLine, MediaRow
from tallyboard.store.run_fields import RunRow
from tallyboard.values import check_key, check_text

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is new in Python 3.11; we support 3.10

    from tallyboard.histogram import HistogramRecord

Status = Literal["running", "finished", "failed"]
STATUSES = ("running", "finished", "failed")
END_STATUSES = ("finished", "failed")
# What only a run being written can do; a loaded run refuses each at the call (`RunView._refuse`).
LOGGING_METHODS = frozenset({
    "add_scalar", "add_image", "add_figure", "detect_and_log_figures", "add_text", "add_fragment",
    "add_table", "add_histogram", "add_console_line", "record_environment", "add_hparams",
    "update_results", "write_result", "new_repetition", "log_artifact", "log_artifacts", "add_rule",
    "alert",
})  # fmt: skip


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
_ARRAY_COLUMNS = {"rep": "rep", "step": "step", "epoch": "epoch", "walltime": "walltime_ms", "value": "value"}


def _checked_tags(tags: tuple[str, ...]) -> list[str]:
    """Run tags, each a key the store can hold (a mistake in the third leaves the first two unset)."""
    return list(dict.fromkeys(check_key("run tag", tag) for tag in tags))


def deepboard_color(stored: str | None) -> str | None:
    """A stored colour ('#ff0000') as DeepBoard's getters return it: DeepBoard stores the hex digits
    alone ('ff0000'), so code written for it (`f"#{run.color}"`) reads the same here. The table keeps
    the '#' form, which the dashboard, the filter language and exports use."""
    return stored[1:] if stored is not None and stored.startswith("#") else stored


def split_label(tag: str) -> tuple[str, str]:
    """DeepBoard's (split, label) of a tag: 'train/loss' -> ('train', 'loss'), 'loss' -> ('', 'loss')."""
    split, sep, label = tag.partition("/")
    return (split, label) if sep else ("", tag)


def _record_reader(table: str, kind: str, doc: str) -> Callable[..., list[dict[str, Any]]]:
    """One of DeepBoard's four artefact getters; they differ only in what they read."""

    def read(
        self: RunView,
        id: int | None = None,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        repetition: int | None = None,
    ) -> list[dict[str, Any]]:
        return self._records(table, kind, id=id, step=step, tag=tag, epoch=epoch, repetition=repetition)

    read.__doc__ = doc + " Filters left None match anything."
    return read


class RunView:
    """One run of a table, to read back; its row may be edited (written at once). A context
    manager, like a `LogWriter`, so code written for either works with both."""

    _disabled = False  # a disabled LogWriter ignores every call (see LogWriter)
    _read_only = True  # a LogWriter is read-only once its run has ended here

    def __init__(self, store: Store, run_id: int) -> None:
        self._store = store
        self._run_id = run_id
        self._chosen_end: str | None = None  # an end status the user set; a writer's close() keeps it

    @property
    def run_id(self) -> int:
        return self._run_id

    def _refuse(self) -> None:
        await_the_signal()
        if not self._disabled:
            raise RuntimeError(
                f"run {self._run_id} is read-only: it was loaded with load_run, or its results were "
                "written, or it was closed"
            )

    # ---- the run's row, written at once -----------------------------------------------------------
    def _row_store(self) -> Store:
        """Where changes to the run's row go (a writer sends them through its sink's connection)."""
        return self._store

    def _set(self, **values: Any) -> None:
        self._apply(self._row_store(), lambda store: store.update_run(self._run_id, **values))

    def _apply(self, store: Store, change: Callable[[Store], None]) -> None:
        try:
            change(store)
        except Exception as error:
            if not store.is_record_error(error):
                raise
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ValueError(f"the database refused this change to run {self._run_id}: {first}") from error

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
        """Set the run's colour as RGB hex ('#ff0000' or 'ff0000', its case kept, as DeepBoard keeps
        it); None clears it. Stored as '#rrggbb', the CSS the dashboard draws with; `color` reads
        it back as DeepBoard did (see `deepboard_color`)."""
        if color is not None:
            hex_digits = color[1:] if color.startswith("#") else color
            if len(hex_digits) != 6 or any(c not in "0123456789abcdefABCDEF" for c in hex_digits):
                raise ValueError(f"color must be RGB hex like '#ff0000', got {color!r}")
            color = "#" + hex_digits
        self._set(color=color)

    def get_artifacts(self) -> list[ArtifactRow]:
        """The artefacts listed with this run so far (after `flush()`: all logged ones), by name."""
        return self._store.artifacts(self._run_id)

    # ---- ending: nothing to end here; a LogWriter overrides `_end` -----------------------------------
    def _end(self, status: str | None, error: str | None = None) -> None:
        """A run that is not written here is never ended from here."""

    def flush(self) -> None:
        """Nothing is written through a loaded run: nothing to wait for."""

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
        return 0

    @property
    def global_step(self) -> dict[str, int]:
        """{tag: the step its next `add_scalar` without `step` gets}: none, nothing is logged here."""
        return {}

    @property
    def db_path(self) -> str:
        """The table's location, as `ResultTable.db_path` gives it: a SQLite file's path, or a
        `postgresql://` URL without its password."""
        return str(self._store.url)

    @property
    def formatted_scalars(self) -> list[tuple[str, str]]:
        """(split, label) of every scalar tag of the run: 'train/loss' -> ('train', 'loss'), 'loss'
        -> ('', 'loss')."""
        return [split_label(tag) for tag in self.scalars]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Leaving the block closes the run; an exception passing through fails it and is kept as
        how it failed (`error`)."""
        if exc is None:
            self.close()
        else:
            self._end("failed", failure.from_exception(exc))

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
        unknown = set(columns) - _ARRAY_COLUMNS.keys()
        if unknown:
            raise ValueError(f"unknown column(s) {sorted(unknown)}; choose from {sorted(_ARRAY_COLUMNS)}")
        found = self._store.scalar_arrays(
            self._run_id, tag, repetition, tuple(_ARRAY_COLUMNS[c] for c in columns)
        )
        out = {name: found[_ARRAY_COLUMNS[name]] for name in columns}
        if "walltime" in out:
            out["walltime"] = out["walltime"] / 1000.0
        return out

    def _records(self, table: str, kind: str, **filters: Any) -> list[dict[str, Any]]:
        read = self._store.media if table == "media" else self._store.texts
        records = []
        markdown = self._store.markdown_text_ids(self._run_id) if table == "texts" else set()
        for row in read(self._run_id, kind, **filters):
            item_id = row.media_id if isinstance(row, MediaRow) else row.text_id
            record: dict[str, Any] = {"id": item_id, "step": row.step, "epoch": row.epoch, "run_rep": row.rep}
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

    def _row(self) -> RunRow:
        row = self._store.run(self._run_id)
        if row is None:
            raise RuntimeError(f"run {self._run_id} does not exist")
        return row

    @property
    def status(self) -> str:
        return self._row().status

    @property
    def error(self) -> dict[str, str] | None:
        """How the run failed ({"type", "message", "traceback"}: an uncaught exception, a non-zero
        exit, a signal), None if it did not fail so (it runs, finished, or was set failed)."""
        return failure.read(self._row().error)

    @property
    def tag(self) -> str | None:
        """The run's tag; None when it has none (the table stores an empty tag as NULL)."""
        return self._row().tag

    @property
    def color(self) -> str | None:
        """The run's colour as DeepBoard gives it: hex digits without '#' ('ff0000'), None if unset."""
        return deepboard_color(self._row().color)

    @property
    def scalars(self) -> list[str]:
        """The tags of the scalars logged in this run."""
        return self._store.tag_names(self._run_id)

    def __getitem__(self, tag: str) -> list[Scalar]:
        return self.get_scalar(tag)


def _refusing(name: str) -> Callable[..., None]:
    def refuse(self: RunView, *args: Any, **kwargs: Any) -> None:
        self._refuse()

    refuse.__name__, refuse.__qualname__ = name, f"RunView.{name}"
    refuse.__doc__ = f"Refused: this run is read-only (`LogWriter.{name}` logs)."
    return refuse


# Real methods rather than a `__getattr__`: a class with one loses CPython's fast attribute lookups
# for every instance attribute, and `LogWriter.add_scalar` reads several per call.
for _name in LOGGING_METHODS:
    setattr(RunView, _name, _refusing(_name))

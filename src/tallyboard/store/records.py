"""The named records that cross the store's boundary, and its errors.

What a writer hands to the sink (`Batch`), what the store answers (`ConsoleLine`, `ResumePoint`,
`Column`, `ArtifactRow`, `Quarantined`) and the errors it raises live here, apart from the SQL
that reads and writes them, so that a caller (the writer, the dashboard, an importer) depends on
the shapes of rows and never on the modules that speak SQL.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, overload

# Rows a writer hands to the sink. `walltime` is in seconds; the store converts it to
# schema's `walltime_ms`. A scalar row is (rep, step, epoch, walltime, value) with value None for NaN.
# The sink's own series arrive as `ScalarColumns`, which read as such rows too.
ScalarRow = tuple[int, int, "int | None", float, "float | None"]
NO_EPOCH = -(2**63)  # an epoch column's slot for a point logged without one (as block_codec stores it)


class ScalarColumns(Sequence[ScalarRow]):
    """Points of one series in one repetition as columns: what `LogWriter.add_scalar` appends to
    (steps, walltimes in seconds, values with NaN as NaN) and the sink hands to the store whole, so
    that no one takes a point apart in Python. `epochs` is None until a point of the series has
    one; then it holds every point's (NO_EPOCH where none).

    Why `values` is appended last and counted first (`take`): another thread appends while the sink
    takes, and every column then holds at least as many points as `values`. Read as a sequence, it
    is the `ScalarRow`s of its points (for the quarantine, the spool, tests)."""

    __slots__ = ("epochs", "rep", "steps", "values", "walltimes")

    def __init__(
        self,
        rep: int = 0,
        steps: array[int] | None = None,
        walltimes: array[float] | None = None,
        values: array[float] | None = None,
        epochs: array[int] | None = None,
    ) -> None:
        self.rep = rep
        self.steps = array("q") if steps is None else steps
        self.walltimes = array("d") if walltimes is None else walltimes
        self.values = array("d") if values is None else values
        self.epochs = epochs

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> ScalarRow: ...
    @overload
    def __getitem__(self, index: slice) -> ScalarColumns: ...
    def __getitem__(self, index: int | slice) -> ScalarRow | ScalarColumns:
        if isinstance(index, slice):
            epochs = None if self.epochs is None else self.epochs[index]
            return ScalarColumns(
                self.rep, self.steps[index], self.walltimes[index], self.values[index], epochs
            )
        return self._row(index)

    def _row(self, at: int) -> ScalarRow:
        epoch = None if self.epochs is None else self.epochs[at]
        value = self.values[at]
        return (
            self.rep, self.steps[at], None if epoch == NO_EPOCH else epoch, self.walltimes[at],
            None if value != value else value,
        )  # fmt: skip

    def __iter__(self) -> Iterator[ScalarRow]:
        return map(self._row, range(len(self.values)))

    def epochs_or_none(self) -> list[int | None]:
        """The points' epochs as rows have them (None where a point has none)."""
        if self.epochs is None:
            return [None] * len(self.values)
        return [None if epoch == NO_EPOCH else epoch for epoch in self.epochs]

    def append(self, row: ScalarRow) -> None:
        """Append one point given as a row of this repetition (appenders other than `add_scalar`)."""
        rep, step, epoch, walltime, value = row
        if rep != self.rep:
            raise ValueError(f"a point of repetition {rep} in the columns of repetition {self.rep}")
        if epoch is not None and self.epochs is None:
            self.start_epochs()
        self.steps.append(step)
        self.walltimes.append(walltime)
        if self.epochs is not None:
            self.epochs.append(NO_EPOCH if epoch is None else epoch)
        self.values.append(float("nan") if value is None else value)

    def start_epochs(self) -> None:
        """The epoch column, from the series' first point with an epoch on: NO_EPOCH for the points
        before it."""
        self.epochs = array("q", [NO_EPOCH]) * len(self.values)

    def extend(self, rows: Iterable[ScalarRow]) -> None:
        for row in rows:
            self.append(row)

    def take(self) -> ScalarColumns:
        """The points held now, removed from these columns (each slice and `del` one atomic step,
        so points appended meanwhile stay for the next take)."""
        count = len(self.values)
        taken = self[:count]
        for column in (self.steps, self.walltimes, self.values, self.epochs):
            if column is not None:
                del column[:count]
        return taken

    def realign(self) -> None:
        """Drop a point half appended (an exception between two columns' appends, a signal's, say):
        every column as long as `values` again."""
        count = len(self.values)
        for column in (self.steps, self.walltimes, self.epochs):
            if column is not None:
                del column[count:]


class QueuedMedia(NamedTuple):
    """An image or figure waiting in a `Batch` (`kind` 'image' or 'figure')."""

    run_id: int
    tag: str
    rep: int
    step: int
    epoch: int | None
    walltime: float
    kind: str
    width: int
    height: int
    png: bytes


# The kinds of `texts` rows: text, an HTML fragment, a logged table (JSON, store/table_content.py),
# an alert (JSON, store/alert_content.py).
TEXT_KINDS = ("text", "fragment", "table", "alert")


class QueuedText(NamedTuple):
    """A text, HTML fragment or table waiting in a `Batch` (`kind` one of TEXT_KINDS; markdown 0 or 1)."""

    run_id: int
    tag: str
    rep: int
    step: int
    epoch: int | None
    walltime: float
    kind: str
    content: str
    markdown: int = 0


class QueuedLine(NamedTuple):
    """A captured console line waiting in a `Batch` (console.py); `stream` 'stdout', 'stderr' or 'log'."""

    run_id: int
    rep: int
    walltime: float
    stream: str
    line: str


class QueuedEnvironment(NamedTuple):
    """A run's environment (environment.py) as JSON text; a later one replaces it."""

    run_id: int
    content: str


class QueuedValue(NamedTuple):
    """An hparam or result: `value` is JSON text; a later value of a name overwrites."""

    run_id: int
    name: str
    value: str


class QueuedHistogram(NamedTuple):
    """A histogram waiting in a `Batch`, flat (`store/histograms.queued_row`): its edges and counts
    already packed, so the sink's bounded queue counts their bytes as it does an image's PNG."""

    run_id: int
    tag: str
    rep: int
    step: int
    epoch: int | None
    walltime: float
    finite: int  # the `count` column (a field named `count` would hide tuple.count)
    nonfinite: int
    minimum: float | None
    maximum: float | None
    total: float
    total_squares: float
    edges: bytes
    counts: bytes


class QueuedRepetition(NamedTuple):
    run_id: int
    rep: int
    start_time: float


class RunUpdate(NamedTuple):
    """Editable columns of a run (`run_row.EDITABLE_RUN_FIELDS`) set to new values."""

    run_id: int
    values: dict[str, Any]


# Any record `Sink.put` takes, for the `Batch` list of its kind.
QueuedRecord = (
    QueuedMedia
    | QueuedText
    | QueuedHistogram
    | QueuedLine
    | QueuedEnvironment
    | QueuedValue
    | QueuedRepetition
    | RunUpdate
)


class MediaRow(NamedTuple):
    """An image or figure as `Store.media` reads it back."""

    media_id: int
    step: int
    epoch: int | None
    rep: int
    tag: str
    walltime_ms: int
    width: int
    height: int
    png: bytes


class TextRow(NamedTuple):
    """A text, fragment or table as `Store.texts` reads it back."""

    text_id: int
    step: int
    epoch: int | None
    rep: int
    tag: str
    walltime_ms: int
    content: str


DEBUG_RUN_ID = -1  # the debug run's id: replaced by the next debug run, never a real run's


@dataclass
class Batch:
    """Everything the sink commits in one transaction, in the order it is applied.

    scalars: (run_id, tag, rows) with rows of `ScalarRow` (the sink's are `ScalarColumns`, of one
      repetition each); one entry per series so that the engine writes a series at once.
    histograms: `QueuedHistogram`s, edges and counts packed (`store/histograms.queued_row`).
    run_updates are applied last (e.g. status and end_time on close).
    """

    scalars: list[tuple[int, str, Sequence[ScalarRow]]] = field(default_factory=list)
    media: list[QueuedMedia] = field(default_factory=list)
    texts: list[QueuedText] = field(default_factory=list)
    histograms: list[QueuedHistogram] = field(default_factory=list)
    hparams: list[QueuedValue] = field(default_factory=list)
    results: list[QueuedValue] = field(default_factory=list)
    repetitions: list[QueuedRepetition] = field(default_factory=list)
    console: list[QueuedLine] = field(default_factory=list)
    environments: list[QueuedEnvironment] = field(default_factory=list)
    run_updates: list[RunUpdate] = field(default_factory=list)

    def __len__(self) -> int:
        """The records in the batch, a series' rows each one."""
        lists = (getattr(self, f.name) for f in fields(self) if f.name != "scalars")
        return sum(len(rows) for _, _, rows in self.scalars) + sum(map(len, lists))


class ConsoleLine(NamedTuple):
    """One captured console line (schema v8): `walltime_ms` since its repetition started."""

    console_id: int
    rep: int
    walltime_ms: int
    stream: str
    line: str


class ResumePoint(NamedTuple):
    """Where a run's logging stopped (`Store.reopen_run`): its last repetition, that repetition's
    start time (seconds since the epoch), and the next auto step of each tag logged in it."""

    rep: int
    rep_start: float
    next_steps: dict[str, int]


@dataclass(frozen=True)
class Column:
    """One column of the result table: `kind` is 'run', 'hparam' or 'result'; position None = hidden."""

    name: str
    kind: str
    alias: str
    position: int | None


class ArtifactRow(NamedTuple):
    """One row of `artifacts` (schema v9): a file kept with a run, its bytes named by `sha256`."""

    run_id: int
    name: str
    kind: str
    size: int
    sha256: str
    step: int | None
    logged_at: float


ARTIFACT_COLUMNS = ", ".join(ArtifactRow._fields)


@dataclass(frozen=True)
class Quarantined:
    """One record the database rejected: what it was (`kind`, `tag`), why (`error`), and the whole
    of it (`record`, as JSON text; see `record_json`)."""

    quarantine_id: int | None
    run_id: int | None
    kind: str
    tag: str | None
    error: str
    record: str
    quarantined_at: float

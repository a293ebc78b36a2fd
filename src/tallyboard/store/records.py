"""The named records that cross the store's boundary, and its errors.

What a writer hands to the sink (`Batch`), what the store answers (`ConsoleLine`, `ResumePoint`,
`Column`, `ArtifactRow`, `Quarantined`) and the errors it raises live here, apart from the SQL
that reads and writes them, so that a caller (the writer, the dashboard, an importer) depends on
the shapes of rows and never on the modules that speak SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

# Rows a writer hands to the sink. `walltime` is in seconds; the store converts it to
# schema's `walltime_ms`. A scalar row is (rep, step, epoch, walltime, value) with value None for NaN.
ScalarRow = tuple[int, int, "int | None", float, "float | None"]


DEBUG_RUN_ID = -1  # the debug run's id: replaced by the next debug run, never a real run's


class StoreError(Exception):
    """The database cannot be used as a result table (wrong version, bad unique columns, ...)."""


class DuplicateRunError(RuntimeError):
    """A visible, non-failed run with the same unique columns exists already."""

    def __init__(self, run_id: int) -> None:
        super().__init__(
            f"Configuration has already been run with run id {run_id}. Change a unique column "
            "(experiment, config, cli, comment, tag, ...), or hide that run, to run it again."
        )
        self.run_id = run_id


@dataclass
class Batch:
    """Everything the sink commits in one transaction, in the order it is applied.

    scalars: (run_id, tag, rows) with rows of `ScalarRow`; one entry per series so that the
      engine can insert a series with one prepared statement.
    media: (run_id, tag, rep, step, epoch, walltime, kind, width, height, png).
    texts: (run_id, tag, rep, step, epoch, walltime, kind, content).
    histograms: (run_id, tag, rep, step, epoch, walltime, count, nonfinite, minimum, maximum,
      total, total_squares, edges, counts) with edges/counts packed (`store/histograms.queued_row`).
    texts: (run_id, tag, rep, step, epoch, walltime, kind, content[, markdown]), markdown 0 (default) or 1.
    console: (run_id, rep, walltime, stream, line): captured console lines (console.py).
    environments: (run_id, json_text): a run's environment (environment.py); a later one replaces.
    hparams / results: (run_id, name, json_value); later values of a name overwrite.
    repetitions: (run_id, rep, start_time).
    run_updates: (run_id, {column: value}) applied last (e.g. status and end_time on close).
    """

    scalars: list[tuple[int, str, list[ScalarRow]]] = field(default_factory=list)
    media: list[tuple] = field(default_factory=list)
    texts: list[tuple] = field(default_factory=list)
    histograms: list[tuple] = field(default_factory=list)
    hparams: list[tuple[int, str, str]] = field(default_factory=list)
    results: list[tuple[int, str, str]] = field(default_factory=list)
    repetitions: list[tuple[int, int, float]] = field(default_factory=list)
    console: list[tuple[int, int, float, str, str]] = field(default_factory=list)
    environments: list[tuple[int, str]] = field(default_factory=list)
    run_updates: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def __len__(self) -> int:
        return (
            sum(len(rows) for _, _, rows in self.scalars)
            + len(self.media)
            + len(self.texts)
            + len(self.histograms)
            + len(self.hparams)
            + len(self.results)
            + len(self.repetitions)
            + len(self.console)
            + len(self.environments)
            + len(self.run_updates)
        )


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

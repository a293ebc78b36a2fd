"""What imports of foreign logs keep beyond the live writer's tables (schema v5).

A live `LogWriter` keeps one point per step (the last one logged); a TensorBoard log can hold
several points at one step (a step counter that was not advanced, or a run restarted from an
earlier step), and each of them is data. Rather than widen `scalars` (and slow every live write),
the series that do repeat a step get a second copy of ALL their points, in source order, in
`scalar_events`; `scalars` keeps serving charts by step as before. The same goes for the import's
bookkeeping (how far each file was read, and which imported runs are not complete yet) and for
summaries the table has no kind for yet: tables of their own, written only by imports, in the same
transaction as the records they describe.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from tallyboard.store import block_reads
from tallyboard.store.writes import BatchWrites

if TYPE_CHECKING:
    from tallyboard.store.records import Batch


# The `import_files.source` of the rows that mark a run whose import is not complete yet (no real
# source is named so: a TensorBoard source is an absolute path).
INCOMPLETE = "<incomplete import>"

# A point of `scalar_events`: (rep, seq, step, epoch, walltime seconds, value or None for NaN).
EventRow = tuple[int, int, int, "int | None", float, "float | None"]


# A series' points so far copied into `scalar_events` (walltimes already in milliseconds).
INSERT_EVENT = (
    "INSERT INTO scalar_events (run_id, tag_id, rep, seq, step, epoch, walltime_ms, value)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclass
class ImportRecords:
    """What an import commits next to a `Batch`, in the same transaction.

    scalar_events: (run_id, tag, rows of `EventRow`).
    raw: (run_id, tag, rep, step, walltime seconds, kind, format, data bytes).
    files: (source directory, file name, run_id, read_to, last_wall, plugins JSON): how far each
      file has now been read, the wall time of its last event read, the tags' plugins known.
    """

    scalar_events: list[tuple[int, str, list[EventRow]]] = field(default_factory=list)
    raw: list[tuple[Any, ...]] = field(default_factory=list)
    files: list[tuple[str, str, int, int, float | None, str]] = field(default_factory=list)


class SeriesTail(NamedTuple):
    """Where an imported series stands: its last step in source order (None: no points yet) and
    the `seq` its next point gets in `scalar_events` (None: no step repeated so far)."""

    last_step: int | None
    next_seq: int | None


class FileProgress(NamedTuple):
    """How far an event file was imported, and into which run."""

    run_id: int
    read_to: int
    last_wall: float | None
    plugins: dict[str, str]


class RawSummary(NamedTuple):
    tag: str
    rep: int
    step: int
    walltime_ms: int
    kind: str
    format: str
    data: bytes


class ImportedLogs(BatchWrites):
    """The `Store` methods imports use: the sink's batch write (`BatchWrites`), plus what only
    imports keep, in the same transaction."""

    def create_imported_run(self, fields: dict[str, Any], debug: bool = False) -> int:
        """`create_run` for an import: the run is marked incomplete in the same transaction (an
        `import_files` row under `INCOMPLETE`), and stays so until the importer has written all it
        needs and says so (`write_import(..., complete=[run_id])`). An import that fails part-way,
        or a process killed during one, thus leaves a run that a second import knows to be partial
        (`incomplete_imports`) rather than "already present"."""
        self.ready_for_writing()

        def create() -> int:
            run_id = self.create_run(fields, debug)  # nested: part of this transaction
            self.execute(
                "INSERT INTO import_files (source, name, run_id, read_to) VALUES (?, ?, ?, 0)"
                " ON CONFLICT (source, name) DO NOTHING",
                (INCOMPLETE, str(run_id), run_id),
            )
            return run_id

        with self._lock:
            return self.atomic(create)

    def incomplete_imports(self) -> set[int]:
        """The ids of the runs whose import began and has not completed (see `create_imported_run`);
        none in a table older than the import tables (schema v5)."""
        from tallyboard.store.migrations import stored_version
        from tallyboard.store.tables import BY_NAME

        with self._lock:
            if (stored_version(self) or 0) < BY_NAME["import_files"].since:
                return set()
            rows = self.execute("SELECT run_id FROM import_files WHERE source = ?", (INCOMPLETE,))
        return {run_id for (run_id,) in rows}

    def write_import(self, batch: Batch, records: ImportRecords, complete: Sequence[int] = ()) -> None:
        """Commit `batch` and `records` in one transaction: a crash leaves the files' read
        positions consistent with the rows, so the next import resumes exactly where this stopped.
        The runs in `complete` are complete from this transaction on (`create_imported_run`)."""
        with self._lock:
            new_tags: dict[str, int] = {}

            def work() -> None:
                self._write(batch, new_tags)
                self._write_import_records(records, new_tags)
                self.executemany(
                    "DELETE FROM import_files WHERE source = ? AND name = ?",
                    [(INCOMPLETE, str(run_id)) for run_id in complete],
                )

            self.atomic(work)
            self._tag_ids.update(new_tags)

    def _write_import_records(self, records: ImportRecords, new_tags: dict[str, int]) -> None:
        from tallyboard.store.writes import WALLTIME_MS_SQL

        for run_id, tag, rows in records.scalar_events:
            tag_id = int(self._tag_id(tag, new_tags))
            self.executemany(
                "INSERT INTO scalar_events (run_id, tag_id, rep, seq, step, epoch, walltime_ms, value)"
                f" VALUES ({int(run_id)}, {tag_id}, ?, ?, ?, ?, {WALLTIME_MS_SQL}, ?)",
                rows,
            )
        if records.raw:
            self.executemany(
                "INSERT INTO raw_summaries (run_id, tag_id, rep, step, walltime_ms, kind, format, data)"
                f" VALUES (?, ?, ?, ?, {WALLTIME_MS_SQL}, ?, ?, ?)",
                [(r[0], self._tag_id(r[1], new_tags), *r[2:]) for r in records.raw],
            )
        if records.files:
            self.executemany(
                "INSERT INTO import_files (source, name, run_id, read_to, last_wall, plugins)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source, name) DO UPDATE SET"
                " run_id = excluded.run_id, read_to = excluded.read_to, last_wall = excluded.last_wall,"
                " plugins = excluded.plugins",
                records.files,
            )

    def import_progress(self, source: str) -> dict[str, FileProgress]:
        """{file name: progress} of the files of directory `source` imported so far."""
        with self._lock:
            rows = self.execute(
                "SELECT name, run_id, read_to, last_wall, plugins FROM import_files WHERE source = ?",
                (source,),
            )
        return {
            name: FileProgress(run_id, read_to, wall, json.loads(plugins))
            for name, run_id, read_to, wall, plugins in rows
        }

    def series_tail(self, run_id: int, tag: str, rep: int) -> SeriesTail:
        """Where the series stands after earlier imports (two index seeks, whatever its length)."""
        key = (run_id, tag, rep)
        tag_of = "(SELECT tag_id FROM tags WHERE name = ?)"
        with self._lock:
            last_event = self.execute(
                f"SELECT seq, step FROM scalar_events WHERE run_id = ? AND tag_id = {tag_of} AND rep = ?"
                " ORDER BY seq DESC LIMIT 1",
                key,
            )
            if last_event:
                seq, step = last_event[0]
                return SeriesTail(step, seq + 1)
            last = self.execute(
                "SELECT MAX(last_step) FROM scalar_blocks"
                f" WHERE run_id = ? AND tag_id = {tag_of} AND rep = ?",
                key,
            )
        return SeriesTail(last[0][0] if last else None, None)

    def start_scalar_events(self, run_id: int, tag: str, rep: int) -> int:
        """Copy a series' points so far into `scalar_events` (seq in step order, which is their
        source order: until now its steps only increased); returns how many, the next seq."""
        with self._lock:

            def copy() -> int:
                found = self.execute("SELECT tag_id FROM tags WHERE name = ?", (tag,))
                if not found:
                    return 0
                key = (run_id, found[0][0], rep)
                seq = 0
                for points in block_reads.blocks(self.execute, key):  # a page of blocks at a time
                    events = [(*key, seq + at, *row) for at, row in enumerate(block_reads.rows(points))]
                    self.executemany(INSERT_EVENT, events)
                    seq += len(events)
                return seq

            return self.atomic(copy)

    def scalar_events(self, run_id: int, tag: str, rep: int | None = None) -> list[tuple[Any, ...]]:
        """Every point of an imported series that repeats steps, in source order: rows of
        (rep, seq, step, epoch, walltime_ms, value); [] for a series without repeated steps."""
        sql = (
            "SELECT rep, seq, step, epoch, walltime_ms, value FROM scalar_events WHERE run_id = ?"
            " AND tag_id = (SELECT tag_id FROM tags WHERE name = ?)"
        )
        params: tuple[Any, ...] = (run_id, tag)
        if rep is not None:
            sql, params = sql + " AND rep = ?", (*params, rep)
        with self._lock:
            return self.execute(sql + " ORDER BY rep, seq", params)

    def raw_summaries(self, run_id: int) -> list[RawSummary]:
        """Summaries kept as their source bytes (histograms), by tag then source order."""
        with self._lock:
            rows = self.execute(
                "SELECT t.name, r.rep, r.step, r.walltime_ms, r.kind, r.format, r.data FROM raw_summaries r"
                " JOIN tags t ON t.tag_id = r.tag_id WHERE r.run_id = ? ORDER BY t.name, r.raw_id",
                (run_id,),
            )
        return [RawSummary(row[0], row[1], row[2], row[3], row[4], row[5], bytes(row[6])) for row in rows]

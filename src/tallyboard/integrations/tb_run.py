"""One TensorBoard run directory streamed into a result table, from where the last import stopped.

Streaming: records are decoded as they are read and committed in batches of bounded size, so an
import's memory does not grow with the logs (only with the number of tags). Each batch commits
together with how far every file has been read (`Store.write_import`), which is what makes a second
import add exactly what was written since the first, even after a crash in between.

Every point is kept. A series whose step does not increase (the same step again, or a step counter
that went back) is switched, at that point, to also keep all its points in source order
(`scalar_events`); until then it costs nothing more than `scalars`.

A run's status follows its files: `running` while the newest of them was modified less than
`quiet_seconds` ago, `finished` (with the last event's time as its end) once they have been quiet
that long. Re-evaluated at every import, so a finished run that grows again is running again.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tallyboard.integrations.tb_records import Damage, FileRead, read_records
from tallyboard.integrations.tb_summaries import (
    EVENT_KINDS,
    HISTOGRAM,
    HPARAMS,
    IMAGE,
    SCALAR,
    TEXT,
    SummaryDecoder,
)
from tallyboard.store.base import Batch, Store
from tallyboard.store.imported import ImportRecords

ROWS_PER_BATCH = 50_000
BYTES_PER_BATCH = 16 << 20  # images: a batch's PNGs stay below this
RESULTS = "results"  # scalars of an hparams session become the parent run's results


def event_files(directory: Path) -> list[Path]:
    """The event files directly in `directory`, in name order (which is creation order: TensorBoard
    names them events.out.tfevents.<seconds>.<host>...)."""
    return sorted(path for path in directory.iterdir() if "tfevents" in path.name and path.is_file())


@dataclass
class Tally:
    """What imports found, by kind: imported records, skipped ones, and damaged files."""

    imported: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    damage: list[Damage] = field(default_factory=list)


@dataclass
class Target:
    """The run the records go into. A new run has no id until its first event gives its start."""

    name: str
    run_id: int | None = None
    start: float = 0.0
    session: bool = False  # an `add_hparams` child folded into its parent: scalars become results


class RunImport:
    """Reads the event files of one directory from their last read positions into `target`."""

    def __init__(
        self,
        store: Store,
        directory: Path,
        target: Target,
        tally: Tally,
        new_run: Callable[[str, float], int | None],
    ) -> None:
        self.store, self.directory, self.target, self.tally = store, directory, target, tally
        self.source = str(directory.resolve())
        self.new_run = new_run
        self.decoder = SummaryDecoder()
        self.tails: dict[str, list[Any]] = {}  # tag -> [last step, next seq or None]
        self.batch, self.records = Batch(), ImportRecords()
        self.scalars: dict[str, list[tuple]] = {}
        self.events: dict[str, list[tuple]] = {}
        self.rows = self.bytes = 0
        self.hparams: dict[str, Any] = {}
        self.results: dict[str, float | None] = {}
        self.positions: dict[str, int] = {}
        self.incomplete: dict[str, int | None] = {}  # file -> offset of an unfinished last record  # file name -> bytes read, not committed yet
        self.last_wall: float | None = None
        self.added = 0  # records imported by this call

    def read(self, progress: dict[str, tuple[int, int]]) -> bool:
        """Import what is new in every file; False when the run was skipped (already present from an
        import that kept no read positions)."""
        from tensorboard.compat.proto import event_pb2

        parse = event_pb2.Event.FromString
        for path in event_files(self.directory):
            read_to = progress.get(path.name, (0, 0))[1]
            if path.stat().st_size <= read_to:
                continue
            result = FileRead(str(path), read_to)
            with path.open("rb") as file:
                for data, end in read_records(file, str(path), read_to, result):
                    event = parse(data)
                    if self.target.run_id is None and not self._create(event.wall_time):
                        return False
                    self.positions[path.name] = end
                    self._event(event)
            if result.damage is not None:
                self.tally.damage.append(result.damage)
            self.incomplete[str(path)] = result.offset if result.incomplete else None
        return True

    def _create(self, wall_time: float) -> bool:
        run_id = self.new_run(self.target.name, wall_time)
        if run_id is None:
            return False
        self.target.run_id, self.target.start = run_id, wall_time
        return True

    def _event(self, event: Any) -> None:
        what = event.WhichOneof("what")
        if what != "summary":
            if what in EVENT_KINDS:
                self.tally.skipped[EVENT_KINDS[what]] += 1
            return
        step, wall = event.step, event.wall_time - self.target.start
        self.last_wall = event.wall_time
        for kind, tag, payload in self.decoder.items(event.summary):
            if kind == SCALAR:
                self._scalar(tag, step, wall, payload)
            elif kind == IMAGE:
                self._images(tag, step, wall, payload)
            elif kind == TEXT:
                self.batch.texts.append((self.target.run_id, tag, 0, step, None, wall, "text", payload))
                self._added(TEXT, len(payload))
            elif kind == HPARAMS:
                if payload:
                    self.hparams.update(payload)
                    self.tally.imported[HPARAMS] += len(payload)
            elif kind == HISTOGRAM:
                self.records.raw.append((self.target.run_id, tag, 0, step, wall, "histogram", *payload))
                self._added(HISTOGRAM, len(payload[1]))
            else:
                self.tally.skipped[kind] += 1
        if self.rows >= ROWS_PER_BATCH or self.bytes >= BYTES_PER_BATCH:
            self.flush()

    def _added(self, kind: str, size: int) -> None:
        self.tally.imported[kind] += 1
        self.rows += 1
        self.bytes += size
        self.added += 1

    def _scalar(self, tag: str, step: int, wall: float, value: float | None) -> None:
        if self.target.session:
            self.results[tag] = value
            return
        tail = self.tails.get(tag)
        if tail is None:
            tail = self.tails[tag] = list(self.store.series_tail(self.target.run_id, tag, 0))
        if tail[1] is None and tail[0] is not None and step <= tail[0]:
            self.flush()  # the series' points so far are in `scalars`: they become its first events
            tail[1] = self.store.start_scalar_events(self.target.run_id, tag, 0)
        if tail[1] is not None:
            self.events.setdefault(tag, []).append((0, tail[1], step, None, wall, value))
            tail[1] += 1
        tail[0] = step
        rows = self.scalars.get(tag)
        if rows is None:
            rows = self.scalars[tag] = []
        rows.append((0, step, None, wall, value))
        self.tally.imported[SCALAR] += 1
        self.rows += 1
        self.added += 1

    def _images(self, tag: str, step: int, wall: float, pngs: list[bytes]) -> None:
        from tallyboard.media import to_png

        for encoded in pngs:
            try:
                png, width, height = to_png(encoded)
            except ValueError:
                self.tally.skipped["images that do not decode"] += 1
                continue
            self.batch.media.append((self.target.run_id, tag, 0, step, None, wall, "image", width, height, png))
            self._added(IMAGE, len(png))

    def finish(self, run_update: dict[str, Any] | None) -> None:
        """Commit the rest, with the run's new status (None: leave it as it is)."""
        if self.results:
            self.tally.imported[RESULTS] += len(self.results)
        self.flush(run_update)

    def flush(self, run_update: dict[str, Any] | None = None) -> None:
        """Commit what is pending, with the files' read positions, in one transaction."""
        run_id = self.target.run_id
        if run_id is None:
            return
        batch, records = self.batch, self.records
        batch.scalars = [(run_id, tag, rows) for tag, rows in self.scalars.items()]
        records.scalar_events = [(run_id, tag, rows) for tag, rows in self.events.items()]
        batch.hparams = [(run_id, name, _json(value)) for name, value in self.hparams.items()]
        batch.results = [(run_id, name, _json(value)) for name, value in self.results.items()]
        records.files = [(self.source, name, run_id, read_to) for name, read_to in self.positions.items()]
        if run_update:
            batch.run_updates = [(run_id, run_update)]
        if len(batch) or records.raw or records.files or records.scalar_events:
            self.store.write_import(batch, records)
        self.batch, self.records = Batch(), ImportRecords()
        self.scalars, self.events, self.hparams, self.positions = {}, {}, {}, {}
        self.rows = self.bytes = 0


def _json(value: Any) -> str:
    from tallyboard.exchange.bundle import json_value

    return json_value(value)


def newest_change(directory: Path) -> float:
    """When the run's files last changed (seconds since the epoch, their newest mtime)."""
    return max((os.stat(path).st_mtime for path in event_files(directory)), default=0.0)

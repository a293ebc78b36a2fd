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

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np

from tallyboard.integrations.tb_records import Chunk, Damage, FileRead, read_chunks
from tallyboard.integrations.tb_scalar_events import ScalarEvents, decode
from tallyboard.integrations.tb_summaries import (
    EVENT_KINDS,
    HISTOGRAM,
    HPARAMS,
    IMAGE,
    SCALAR,
    TEXT,
    Item,
    SummaryDecoder,
)
from tallyboard.progress import ProgressBar
from tallyboard.store.base import Store
from tallyboard.store.histograms import queued_row
from tallyboard.store.imported import FileProgress, ImportRecords
from tallyboard.store.records import Batch, QueuedMedia, QueuedText, QueuedValue, RunUpdate

ROWS_PER_BATCH = 50_000
BYTES_PER_BATCH = 16 << 20  # images: a batch's PNGs stay below this
RESULTS = "results"  # scalars of an hparams session become the parent run's results
NOT_AN_EVENT = "a record that is not a TensorBoard event"
PROJECTOR_CONFIG = "projector_config.pbtxt"  # add_embedding's entries, beside the event files
EMBEDDINGS = "embeddings"


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
    series: str | None = None  # an `add_scalars` child folded into its parent: its key, the split


class Series:
    """One scalar series of the run being imported: where it stands, and its rows not yet committed."""

    __slots__ = ("events", "last_step", "next_seq", "rows")

    def __init__(self, last_step: int | None, next_seq: int | None) -> None:
        self.last_step = last_step  # in source order; None: no point yet
        self.next_seq = next_seq  # None until a step repeats: then every point also goes to `events`
        self.rows: list[tuple] = []
        self.events: list[tuple] = []


class RunImport:
    """Reads the event files of one directory from their last read positions into `target`."""

    def __init__(
        self,
        store: Store,
        directory: Path,
        target: Target,
        tally: Tally,
        new_run: Callable[[Path, float], int | None],
        bar: ProgressBar,
    ) -> None:
        self.store, self.directory, self.target, self.tally = store, directory, target, tally
        self.source = str(directory.resolve())
        self.new_run, self.bar = new_run, bar
        self.decoder = SummaryDecoder()
        self.series: dict[str, Series] = {}
        self.batch, self.records = Batch(), ImportRecords()
        self.pending = self.bytes = 0  # scalar rows / other records and their bytes, not committed yet
        self.hparams: dict[str, Any] = {}
        self.results: dict[str, float | None] = {}
        self.positions: dict[str, int] = {}  # file name -> bytes read, not committed yet
        self.incomplete: dict[str, int | None] = {}  # file -> offset of an unfinished last record
        self.walls: dict[str, float] = {}  # file name -> wall time of its last event read
        self.added = 0  # records imported by this call
        self.created = False  # this call created the run: its first commit completes it
        self.prefix = "" if target.series is None else f"{target.series}/"  # of its scalars' tags

    @property
    def last_wall(self) -> float | None:
        """When the run's last event was written (seconds since the epoch), None before any."""
        return max(self.walls.values(), default=None)

    def read(self, progress: dict[str, FileProgress]) -> bool:
        """Import what is new in every file; False when the run was skipped (already present from an
        import that kept no read positions)."""
        self.walls = {name: file.last_wall for name, file in progress.items() if file.last_wall is not None}
        for file in progress.values():
            self.decoder.plugins.update(file.plugins)
        for path in event_files(self.directory):
            read_to = progress[path.name].read_to if path.name in progress else 0
            if path.stat().st_size <= read_to:
                continue
            result = FileRead(str(path), read_to)
            with path.open("rb") as stream:
                try:
                    done = read_to
                    for chunk in read_chunks(stream, str(path), read_to, result):
                        if not self._chunk(path.name, chunk):
                            return False
                        self.bar.update(int(chunk.ends[-1]) - done)
                        done = int(chunk.ends[-1])
                except NotAnEvent as error:
                    result.damage = Damage(str(path), error.offset, NOT_AN_EVENT)
            if result.damage is not None:
                self.tally.damage.append(result.damage)
            self.incomplete[str(path)] = result.offset if result.incomplete else None
        self._projector(progress)
        return True

    def _projector(self, progress: dict[str, FileProgress]) -> None:
        """`add_embedding` writes no event: it appends an entry to the run's projector config (and
        tensors beside it) that the table has no kind for. Each entry not counted before is counted
        as skipped; the config's size read so far is kept with the files' read positions."""
        path = self.directory / PROJECTOR_CONFIG
        if not path.is_file() or self.target.run_id is None:
            return
        content = path.read_bytes()
        done = progress[PROJECTOR_CONFIG].read_to if PROJECTOR_CONFIG in progress else 0
        if len(content) > done:
            self.tally.skipped[EMBEDDINGS] += content[done:].count(b"embeddings {")
            self.positions[PROJECTOR_CONFIG] = len(content)

    def _chunk(self, name: str, chunk: Chunk) -> bool:
        """Import a chunk's records in file order: runs of common scalar events decoded together
        (`tb_scalar_events`), any other record parsed with protobuf in its place."""
        if self.target.run_id is None and not self._create(_parse(chunk, 0).wall_time):
            return False
        fast = decode(chunk)
        slow = np.flatnonzero(~fast.decoded).tolist()
        ends = chunk.ends.tolist()
        begin = 0
        for index in [*slow, len(chunk)]:
            if begin < index:
                self._scalar_run(fast, begin, index, name, ends)
            if index < len(chunk):
                event = _parse(chunk, index)
                self.positions[name] = ends[index]
                self.walls[name] = event.wall_time
                if event.HasField("summary"):
                    self._summary(event)
                else:
                    self._other(event)
            begin = index + 1
        return True

    def _scalar_run(self, fast: ScalarEvents, begin: int, end: int, name: str, ends: list[int]) -> None:
        """Records begin..end-1 of a chunk, all common scalar events. When every series among them
        simply continues (steps increasing past where it stood), their rows are appended a series at
        a time; otherwise they go one by one, in file order, through `_scalar`."""
        walls = fast.walls[begin:end] - self.target.start
        tag_index, steps, values = fast.tag_index[begin:end], fast.steps[begin:end], fast.values[begin:end]
        tags = [self.prefix + tag for tag in fast.tags] if self.prefix else fast.tags
        by_tag = [(tags[code], np.flatnonzero(tag_index == code)) for code in np.unique(tag_index).tolist()]
        if not self.target.session and all(self._continues(tag, steps[members]) for tag, members in by_tag):
            for tag, members in by_tag:
                series = self.series[tag]
                numbers = values[members].tolist()
                if np.isnan(values[members]).any():
                    numbers = [None if number != number else number for number in numbers]
                series.rows.extend(
                    zip(repeat(0), steps[members].tolist(), repeat(None), walls[members].tolist(), numbers)
                )
                series.last_step = int(steps[members[-1]])
            self.pending += end - begin
            self.positions[name] = ends[end - 1]
            self.walls[name] = float(fast.walls[end - 1])
        else:
            step_list, wall_list = steps.tolist(), walls.tolist()
            for offset, (code, value) in enumerate(zip(tag_index.tolist(), values.tolist(), strict=True)):
                self.positions[name] = ends[begin + offset]
                self.walls[name] = float(fast.walls[begin + offset])
                if self.target.session:
                    self.results[tags[code]] = None if value != value else value
                else:
                    self._scalar(
                        tags[code], step_list[offset], wall_list[offset], None if value != value else value
                    )
                if self.pending >= ROWS_PER_BATCH:
                    self.flush()
        if self.pending >= ROWS_PER_BATCH or self.bytes >= BYTES_PER_BATCH:
            self.flush()

    @property
    def run_id(self) -> int:
        """The run the records go into (it exists once the first event has been read)."""
        if self.target.run_id is None:
            raise RuntimeError("no run before the first event")
        return self.target.run_id

    def _series(self, tag: str) -> Series:
        """The series of `tag`, where the table has it after earlier imports when first seen."""
        series = self.series.get(tag)
        if series is None:
            series = self.series[tag] = Series(*self.store.series_tail(self.run_id, tag, 0))
        return series

    def _continues(self, tag: str, steps: np.ndarray) -> bool:
        """Whether `steps` (in file order) simply continue the series: no repeat, no step back."""
        series = self._series(tag)
        if series.next_seq is not None or (series.last_step is not None and steps[0] <= series.last_step):
            return False
        return len(steps) < 2 or bool((steps[1:] > steps[:-1]).all())

    def _create(self, wall_time: float) -> bool:
        run_id = self.new_run(self.directory, wall_time)
        if run_id is None:
            return False
        self.target.run_id, self.target.start = run_id, wall_time
        self.created = True
        return True

    def _other(self, event: Any) -> None:
        what = event.WhichOneof("what")
        if what in EVENT_KINDS:
            self.tally.skipped[EVENT_KINDS[what]] += 1

    def _summary(self, event: Any) -> None:
        step, wall = event.step, event.wall_time - self.target.start
        session = self.target.session
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value" and not session:  # the common case, inlined
                number = value.simple_value
                self._scalar(self.prefix + value.tag, step, wall, None if number != number else number)
            else:
                self._item(self.decoder.item(value), step, wall)
        if self.pending >= ROWS_PER_BATCH or self.bytes >= BYTES_PER_BATCH:
            self.flush()

    def _item(self, item: Item, step: int, wall: float) -> None:
        kind, tag, payload = item
        if kind == SCALAR:
            if self.target.session:
                self.results[tag] = payload
            else:
                self._scalar(self.prefix + tag, step, wall, payload)
        elif kind == IMAGE:
            self._images(tag, step, wall, payload)
        elif kind == TEXT:
            self.batch.texts.append(QueuedText(self.run_id, tag, 0, step, None, wall, "text", payload))
            self._added(TEXT, len(payload))
        elif kind == HPARAMS:
            if payload:  # {} for the experiment and session-end parts
                self.hparams.update(payload)
                self.tally.imported[HPARAMS] += len(payload)
        elif kind == HISTOGRAM:
            row = queued_row(self.run_id, tag, 0, step, None, wall, payload)
            self.batch.histograms.append(row)
            self._added(HISTOGRAM, len(row[-2]) + len(row[-1]))
        else:
            self.tally.skipped[kind] += 1

    def _added(self, kind: str, size: int) -> None:
        self.tally.imported[kind] += 1
        self.pending += 1
        self.bytes += size
        self.added += 1

    def _scalar(self, tag: str, step: int, wall: float, value: float | None) -> None:
        series = self._series(tag)
        last = series.last_step
        if series.next_seq is None and last is not None and step <= last:
            self.flush()  # the series' points so far are in `scalars`: they become its first events
            series.next_seq = self.store.start_scalar_events(self.run_id, tag, 0)
        if series.next_seq is not None:
            series.events.append((0, series.next_seq, step, None, wall, value))
            series.next_seq += 1
        series.last_step = step
        series.rows.append((0, step, None, wall, value))
        self.pending += 1

    def _images(self, tag: str, step: int, wall: float, pngs: list[bytes]) -> None:
        from tallyboard.media import to_png

        for encoded in pngs:
            try:
                png, width, height = to_png(encoded, max_pixels=None)  # an import keeps what it reads
            except ValueError:
                self.tally.skipped["images that do not decode"] += 1
                continue
            self.batch.media.append(
                QueuedMedia(self.run_id, tag, 0, step, None, wall, "image", width, height, png)
            )
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
        batch.scalars = [(run_id, tag, series.rows) for tag, series in self.series.items() if series.rows]
        records.scalar_events = [(run_id, tag, s.events) for tag, s in self.series.items() if s.events]
        batch.hparams = [QueuedValue(run_id, name, _json(value)) for name, value in self.hparams.items()]
        batch.results = [QueuedValue(run_id, name, _json(value)) for name, value in self.results.items()]
        plugins = json.dumps(self.decoder.plugins)
        records.files = [
            (self.source, name, run_id, read_to, self.walls.get(name), plugins)
            for name, read_to in self.positions.items()
        ]
        if run_update:
            batch.run_updates = [RunUpdate(run_id, run_update)]
        # The run this call created is complete with its first commit: from then on the files'
        # read positions say where the next import goes on (bundle.reclaim_incomplete before).
        complete = [run_id] if self.created else []
        if len(batch) or records.raw or records.files or records.scalar_events or complete:
            self.store.write_import(batch, records, complete)
            self.created = False
        scalars = sum(len(rows) for _, _, rows in batch.scalars)
        if scalars:
            self.tally.imported[SCALAR] += scalars
            self.added += scalars
        for series in self.series.values():
            series.rows, series.events = [], []
        self.batch, self.records = Batch(), ImportRecords()
        self.hparams, self.positions = {}, {}
        self.pending = self.bytes = 0


class NotAnEvent(ValueError):
    """A record whose CRCs match but whose bytes do not parse as an `Event`: damage at `offset`."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"not a TensorBoard event at byte {offset}")
        self.offset = offset


def _parse(chunk: Chunk, index: int) -> Any:
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2

    try:
        return event_pb2.Event.FromString(chunk.data(index))
    except DecodeError:
        raise NotAnEvent(int(chunk.ends[index] - chunk.lengths[index]) - 16) from None


def _json(value: Any) -> str:
    from tallyboard.exchange.bundle import json_value

    return json_value(value)


def newest_change(directory: Path) -> float:
    """When the run's files last changed (seconds since the epoch, their newest mtime)."""
    return max((os.stat(path).st_mtime for path in event_files(directory)), default=0.0)

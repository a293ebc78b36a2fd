"""`tallyboard import tallyboard DIR`: an export (see export.py) back into a result table.

The inverse of `export_table`, row for row: runs keep their ids, start and end times, status, git
state and unique key; records keep their repetition, step, epoch and wall time; console lines keep
their order, texts their markdown flag; PNGs are read back from the export's media files, and the
artefacts' files are copied into the target table's artefact store (exchange/artifact_files.py).
Importing into an empty table and exporting again gives the same
files. Into a table that already has runs, runs already present (same experiment and start time)
are skipped, a run whose id is taken gets a new one, and the column layout is left as it was.
Rows are streamed in batches: an export larger than memory imports fine.

An export may come from someone else: every file it names (row files, media files, artefacts'
blobs) must lie inside its directory once resolved, symlinks included (store/confined.py), and a
media file must be a PNG; all of it is checked before the first row is written. An import that
still stops part-way (the database failing, a process killed) leaves its runs marked incomplete,
and importing the export again writes those runs afresh instead of finding them "already present"
(exchange/bundle.py, `reclaim_incomplete`).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tallyboard.exchange.artifact_files import (
    ARTIFACTS,
    check_exported_files,
    import_artifacts,
    target_blobs,
)
from tallyboard.exchange.bundle import (
    apply_column_layout,
    create_run,
    nan_to_none,
    run_identity,
    select_new_runs,
)
from tallyboard.exchange.export import (
    COLUMNS,
    CONSOLE,
    ENVIRONMENTS,
    HISTOGRAMS,
    HPARAMS,
    LAYOUTS,
    MANIFEST,
    MEDIA,
    OPTIONAL_LAYOUTS,
    RAW_SUMMARIES,
    READABLE_VERSIONS,
    REPETITIONS,
    RESULTS,
    RUN_TAGS,
    RUNS,
    SCALAR_EVENTS,
    SCALARS,
    TEXTS,
    TEXTS_V1,
)
from tallyboard.exchange.formats import FORMATS, Layout, read_rows
from tallyboard.histogram import Histogram
from tallyboard.media import png_size
from tallyboard.store import Batch
from tallyboard.store.confined import confined_path
from tallyboard.store.histograms import queued_row
from tallyboard.store.imported import ImportRecords
from tallyboard.store.location import Location, LocationLike
from tallyboard.store.records import (
    ArtifactRow,
    QueuedEnvironment,
    QueuedLine,
    QueuedMedia,
    QueuedRepetition,
    QueuedText,
    QueuedValue,
)

MEDIA_PER_BATCH = 200
PNG_HEADER_BYTES = 24  # signature and IHDR up to the size: what `png_size` reads


def read_manifest(directory: Path) -> dict[str, Any]:
    path = confined_path(directory, MANIFEST, "the export")
    if not path.is_file():
        raise FileNotFoundError(f"{str(directory)!r} is not a tallyboard export (no {MANIFEST})")
    manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("tallyboard_export") not in READABLE_VERSIONS or manifest.get("format") not in FORMATS:
        raise ValueError(f"{path} is not a manifest this version of tallyboard can read")
    return manifest


class ExportReader:
    """The files of one export, read with their run ids mapped to the ids in the target table."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        manifest = read_manifest(directory)
        self.format = manifest["format"]
        self.version = manifest["tallyboard_export"]
        self.run_ids: dict[int, int] = {}

    def file(self, name: str, entry: str) -> Path:
        """The export's file `name` (relative to the export), never one outside it: `entry` says
        which part of the export named it (OutsideSourceError otherwise, store/confined.py)."""
        return confined_path(self.directory, name, entry)

    def _path(self, layout: Layout) -> Path:
        return self.file(layout.path(Path(), self.format).name, "the export")

    def has(self, layout: Layout) -> bool:
        """Whether the export has the layout's file (an older export lacks `OPTIONAL_LAYOUTS`)."""
        return layout not in OPTIONAL_LAYOUTS or self._path(layout).is_file()

    def _read(self, layout: Layout) -> Iterator[list[tuple[Any, ...]]]:
        """All rows of one file, in the columns its export version wrote (version 1 texts have no
        markdown flag; their rows are one column shorter, which `Batch.texts` reads as 0)."""
        written = TEXTS_V1 if layout is TEXTS and self.version < 2 else layout
        return read_rows(self._path(layout), written, self.format)

    def media_file(self, run_id: int, name: str) -> Path:
        """The PNG file a `media` row names, inside the export."""
        return self.file(name, f"{MEDIA.name}.{self.format} (run {run_id})")

    def rows(self, layout: Layout) -> Iterator[list[tuple[Any, ...]]]:
        """Batches of rows of the runs being imported, run id already mapped."""
        if not self.has(layout):
            return
        for chunk in self._read(layout):
            mapped = [(self.run_ids[run_id], *rest) for run_id, *rest in chunk if run_id in self.run_ids]
            if mapped:
                yield mapped

    def check(self) -> int:
        """Read every file once before anything is written, so that a damaged export fails before
        it leaves half-imported runs behind (which a second import would skip as present).
        Returns the number of rows."""
        total = 0
        for layout in filter(self.has, LAYOUTS):
            for chunk in self._read(layout):
                total += len(chunk)
                if layout is MEDIA:
                    for row in chunk:
                        self._check_png(row[0], row[-1])
        if self.has(ARTIFACTS):
            for chunk in self._read(ARTIFACTS):
                check_exported_files(self.directory, chunk)
        return total

    def _check_png(self, run_id: int, name: str) -> None:
        """Raise unless the `media` row's file is inside the export, present, and a PNG (its header:
        what the table stores is a PNG, and only a PNG is served as an image)."""
        path = self.media_file(run_id, name)
        if not path.is_file():
            raise FileNotFoundError(f"the export lacks {name}")
        with path.open("rb") as file:
            header = file.read(PNG_HEADER_BYTES)
        try:
            png_size(header)
        except ValueError:
            raise ValueError(
                f"{MEDIA.name}.{self.format} (run {run_id}) names {name!r}, which is not a PNG image"
            ) from None

    def all_rows(self, layout: Layout) -> list[tuple[Any, ...]]:
        return [row for chunk in self._read(layout) for row in chunk]


def _scalar_batches(reader: ExportReader) -> Iterator[Batch]:
    for chunk in reader.rows(SCALARS):
        batch = Batch()
        series: list[Any] = []
        key = None
        for run_id, tag, rep, step, epoch, walltime, value in chunk:
            if (run_id, tag) != key:
                key, series = (run_id, tag), []
                batch.scalars.append((run_id, tag, series))
            series.append((rep, step, epoch, walltime, nan_to_none(value)))  # as the table keeps NaN
        yield batch


def _media_batches(reader: ExportReader) -> Iterator[Batch]:
    for chunk in reader.rows(MEDIA):
        for start in range(0, len(chunk), MEDIA_PER_BATCH):
            batch = Batch()
            for run_id, tag, rep, step, epoch, walltime, kind, width, height, file in chunk[
                start : start + MEDIA_PER_BATCH
            ]:
                png = reader.media_file(run_id, file).read_bytes()
                png_size(png)  # still a PNG: the file may have changed since `check`
                batch.media.append(
                    QueuedMedia(run_id, tag, rep, step, epoch, walltime, kind, width, height, png)
                )
            yield batch


def _histogram_batches(reader: ExportReader) -> Iterator[Batch]:
    for chunk in reader.rows(HISTOGRAMS):
        yield Batch(
            histograms=[
                queued_row(run_id, tag, rep, step, epoch, walltime, exported_histogram(rest))
                for run_id, tag, rep, step, epoch, walltime, *rest in chunk
            ]
        )


def exported_histogram(columns: Sequence[Any]) -> Histogram:
    """The `Histogram` of an export row's columns after `walltime` (edges and counts as JSON)."""
    count, nonfinite, minimum, maximum, total, squares, edges, counts = columns
    return Histogram(
        count,
        nonfinite,
        minimum,
        maximum,
        total,
        squares,
        tuple(json.loads(edges)),
        tuple(json.loads(counts)),
    )


def _record_batches(reader: ExportReader) -> Iterator[Batch]:
    for layout in (HPARAMS, RESULTS):
        for chunk in reader.rows(layout):
            values = [QueuedValue(*row) for row in chunk]
            yield Batch(hparams=values) if layout is HPARAMS else Batch(results=values)
    for chunk in reader.rows(REPETITIONS):
        yield Batch(repetitions=[QueuedRepetition(*row) for row in chunk])
    yield from _scalar_batches(reader)
    for chunk in reader.rows(TEXTS):
        yield Batch(texts=[QueuedText(*row) for row in chunk])
    yield from _media_batches(reader)
    yield from _histogram_batches(reader)
    for chunk in reader.rows(CONSOLE):
        yield Batch(console=[QueuedLine(*row) for row in chunk])
    for chunk in reader.rows(ENVIRONMENTS):
        yield Batch(environments=[QueuedEnvironment(*row) for row in chunk])


def _imported_records(reader: ExportReader) -> Iterator[ImportRecords]:
    """What only imports keep, as the records `Store.write_import` takes."""
    for chunk in reader.rows(SCALAR_EVENTS):
        series: dict[tuple[int, str], list[Any]] = {}
        for run_id, tag, rep, seq, step, epoch, walltime, value in chunk:
            series.setdefault((run_id, tag), []).append((rep, seq, step, epoch, walltime, nan_to_none(value)))
        yield ImportRecords(scalar_events=[(run_id, tag, rows) for (run_id, tag), rows in series.items()])
    for chunk in reader.rows(RAW_SUMMARIES):
        yield ImportRecords(raw=[(*row[:-1], base64.b64decode(row[-1], validate=True)) for row in chunk])


def import_export(
    directory: str | os.PathLike[str],
    into: LocationLike,
    progress: bool = False,
    artifacts: str | None = None,
) -> str:
    """Import the export in `directory` into the table at `into`; returns a one-line summary.
    Artefacts' files go to `artifacts` (default: the table's store, as for `ResultTable`)."""
    from tallyboard.exchange.target import open_target
    from tallyboard.progress import progress_bar

    reader = ExportReader(Path(directory))
    total = reader.check()
    runs = [dict(zip(RUNS.names, row, strict=True)) for row in reader.all_rows(RUNS)]
    # Before anything is written: a target without an artefact store must not get half an import.
    into = Location.of(into)
    blobs = target_blobs(into, artifacts) if reader.has(ARTIFACTS) else None
    with open_target(into) as store:
        new = select_new_runs(store, runs)
        was_empty = not store.runs(show_hidden=True)  # after the runs left incomplete were reclaimed
        exported_ids = {run_identity(run): run["run_id"] for run in runs}
        for fields in new:
            reader.run_ids[exported_ids[run_identity(fields)]] = create_run(store, fields)
        with progress_bar(total, "importing", enabled=progress, unit="row") as bar:
            for batch in _record_batches(reader):
                store.write_batch(batch)
                bar.update(len(batch))
            for records in _imported_records(reader):
                store.write_import(Batch(), records)
                bar.update(sum(len(rows) for _, _, rows in records.scalar_events) + len(records.raw))
        for chunk in reader.rows(RUN_TAGS):  # a handful per run: written directly, not batched
            for run_id, tag in chunk:
                store.change_run_tags(run_id, add=[tag])
        if blobs is not None:
            listed = [ArtifactRow(*row) for chunk in reader.rows(ARTIFACTS) for row in chunk]
            import_artifacts(store, reader.directory, listed, blobs, progress)
        if was_empty:
            apply_column_layout(store, _layout(reader))
        # Only now, with everything of theirs written, are the runs complete: an import that
        # stopped before this point is done again by the next one (bundle.reclaim_incomplete).
        store.write_import(Batch(), ImportRecords(), complete=list(reader.run_ids.values()))
    return f"imported {len(new)} runs ({len(runs) - len(new)} already present)"


def _layout(reader: ExportReader) -> dict[str, dict[str, Any]]:
    return {
        name: {"alias": alias, "position": position} for name, _, alias, position in reader.all_rows(COLUMNS)
    }

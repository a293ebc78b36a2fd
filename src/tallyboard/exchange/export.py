"""`tallyboard export`: a result table written out as plain files, every point of it.

TensorBoard's CSV export samples 1,000 points per series; a hosted tracker can delete what it holds.
An export here is the whole table, in files any tool reads, and it imports back unchanged
(`tallyboard import tallyboard DIR`, see reimport.py). Layout of the directory:

    manifest.json           format, schema version, row counts
    runs.<ext>              one row per run: every column of `runs` (config content, git diff, ...)
    hparams.<ext>           run_id, name, value (JSON text, so 1, 1.0, "1" and true stay apart)
    results.<ext>           run_id, name, value (JSON text)
    columns.<ext>           the result table's column aliases and positions (empty = hidden)
    repetitions.<ext>       run_id, rep, start_time (seconds since the epoch)
    run_tags.<ext>          run_id, tag: the runs' tags, several per run (exports before
                            schema v4 lack this file; they import with no tags)
    scalars.<ext>           run_id, tag, rep, step, epoch, walltime (s since the rep started), value
                            (NaN, +-inf as each format writes them: formats.py)
    texts.<ext>             run_id, tag, rep, step, epoch, walltime, kind (text|fragment|table),
                            content, markdown (1 when logged with `markdown=True`, else 0; since export
                            version 2, before which every text imports as 0)
    media.<ext>             run_id, tag, rep, step, epoch, walltime, kind (image|figure), width,
                            height, file (relative path of the PNG)
    media/<run_id>/<n>.png  the images and figures, numbered per run in logging order
    histograms.<ext>        run_id, tag, rep, step, epoch, walltime, count, nonfinite, minimum,
                            maximum, total, total_squares, edges and counts (JSON arrays of numbers)
                            -- written since schema v7; an older export has no such file
    console.<ext>           run_id, rep, walltime, stream (stdout|stderr|log), line: the captured
                            console in capture order (since export version 2)
    environments.<ext>      run_id, content (the run's environment, JSON text; since version 2)
    scalar_events.<ext>     run_id, tag, rep, seq, step, epoch, walltime, value: every point, in
                            source order, of an imported series that logged a step more than once
                            (store/imported.py; since version 3)
    raw_summaries.<ext>     run_id, tag, rep, step, walltime, kind, format, data (base64): summaries
                            an import before schema v7 kept as their source bytes (since version 3)
    artifacts.<ext>         (only when the runs have artefacts) run_id, name, kind, size, sha256,
                            step, logged_at
    artifacts/sha256/ab/... the artefacts' files, laid out as an artefact store (content-addressed:
                            shared bytes once; never named by a logged name, which could say "../");
                            an import copies them into the target's store (exchange/artifact_files.py)

Rows come in a fixed order (runs by id, then tag, repetition and step), so exporting the same table
twice gives identical files. Wall times are the table's milliseconds written as seconds.
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tallyboard.exchange.artifact_files import ARTIFACTS, export_artifacts
from tallyboard.exchange.formats import FORMATS, Layout, RowWriter
from tallyboard.exchange.target import open_target
from tallyboard.store import Store
from tallyboard.store.artifacts import location_for, open_blobs, require_location
from tallyboard.store.location import LocationLike
from tallyboard.store.records import TEXT_KINDS
from tallyboard.store.run_fields import RunRow, typed
from tallyboard.store.tables import BY_NAME

EXPORT_VERSION = 3  # 2: console, environments and the texts' markdown flag; 3: what imports keep
READABLE_VERSIONS = (1, 2, 3)
# The schema version that added the console, environments and texts.markdown.
CONSOLE_SINCE = BY_NAME["console"].since
IMPORTS_SINCE = BY_NAME["scalar_events"].since  # ... and the one that added scalar_events, raw_summaries
CONSOLE_PAGE = 10_000  # console lines read at a time (a chatty run may have millions)
MANIFEST = "manifest.json"
MEDIA_DIR = "media"

# The files' column order is part of the export format (older exports are read by it): never reorder.
RUNS = Layout(
    "runs",
    typed((
        "run_id", "experiment", "status", "start_time", "end_time", "tag", "note", "color", "hidden",
        "comment", "config_path", "config_hash", "config_content", "cli", "command", "git_commit",
        "git_diff", "unique_key", "error", "rerun_of", "window_tags",
    )),
)  # fmt: skip
HPARAMS = Layout("hparams", (("run_id", int, False), ("name", str, False), ("value", str, False)))
RESULTS = Layout("results", HPARAMS.columns)
COLUMNS = Layout(
    "columns", (("name", str, False), ("kind", str, False), ("alias", str, False), ("position", int, True))
)
REPETITIONS = Layout(
    "repetitions", (("run_id", int, False), ("rep", int, False), ("start_time", float, False))
)
RUN_TAGS = Layout("run_tags", (("run_id", int, False), ("tag", str, False)))
_RECORD = (
    ("run_id", int, False), ("tag", str, False), ("rep", int, False), ("step", int, False),
    ("epoch", int, True), ("walltime", float, False),
)  # fmt: skip
SCALARS = Layout("scalars", (*_RECORD, ("value", float, True)))
TEXTS_V1 = Layout("texts", (*_RECORD, ("kind", str, False), ("content", str, False)))
TEXTS = Layout("texts", (*TEXTS_V1.columns, ("markdown", int, False)))
MEDIA = Layout(
    "media",
    (*_RECORD, ("kind", str, False), ("width", int, False), ("height", int, False), ("file", str, False)),
)
HISTOGRAMS = Layout(
    "histograms",
    (*_RECORD, ("count", int, False), ("nonfinite", int, False), ("minimum", float, True),
     ("maximum", float, True), ("total", float, False), ("total_squares", float, False),
     ("edges", str, False), ("counts", str, False)),
)  # fmt: skip
CONSOLE = Layout(
    "console",
    (("run_id", int, False), ("rep", int, False), ("walltime", float, False), ("stream", str, False),
     ("line", str, False)),
)  # fmt: skip
ENVIRONMENTS = Layout("environments", (("run_id", int, False), ("content", str, False)))
SCALAR_EVENTS = Layout(
    "scalar_events",
    (("run_id", int, False), ("tag", str, False), ("rep", int, False), ("seq", int, False),
     ("step", int, False), ("epoch", int, True), ("walltime", float, False), ("value", float, True)),
)  # fmt: skip
RAW_SUMMARIES = Layout(
    "raw_summaries",
    (("run_id", int, False), ("tag", str, False), ("rep", int, False), ("step", int, False),
     ("walltime", float, False), ("kind", str, False), ("format", str, False), ("data", str, False)),
)  # fmt: skip
LAYOUTS = (
    RUNS, HPARAMS, RESULTS, COLUMNS, REPETITIONS, RUN_TAGS, SCALARS, TEXTS, MEDIA, HISTOGRAMS, CONSOLE,
    ENVIRONMENTS, SCALAR_EVENTS, RAW_SUMMARIES,
)  # fmt: skip
# Files that exports of older versions lack. `artifacts` is not in LAYOUTS: it is written only when
# the runs have artefacts, with their files (exchange/artifact_files.py).
OPTIONAL_LAYOUTS = (RUN_TAGS, HISTOGRAMS, CONSOLE, ENVIRONMENTS, SCALAR_EVENTS, RAW_SUMMARIES, ARTIFACTS)


def seconds(walltime_ms: int) -> float:
    return walltime_ms / 1000


def _prepare_directory(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{str(out)!r} exists and is not an empty directory; export into a new one")
    out.mkdir(parents=True, exist_ok=True)


def _select_runs(store: Store, run_ids: Sequence[int] | None) -> list[RunRow]:
    runs = store.runs(show_hidden=True)
    if run_ids is None:
        return runs
    known = {run.run_id for run in runs}
    missing = [run_id for run_id in run_ids if run_id not in known]
    if missing:
        raise ValueError(f"no run with id {', '.join(map(str, missing))} in the table")
    wanted = set(run_ids)
    return [run for run in runs if run.run_id in wanted]


def _by_id(rows_by_kind: Mapping[str, Sequence[tuple[Any, ...]]]) -> list[tuple[str, tuple[Any, ...]]]:
    """Records of several kinds merged back into logging order (their ids)."""
    merged = [(kind, row) for kind, rows in rows_by_kind.items() for row in rows]
    return sorted(merged, key=lambda item: item[1][0])


def export_run(store: Store, run: RunRow, out: Path, writers: dict[str, RowWriter]) -> None:
    """Append one run and everything logged under it to the open writers (PNGs go to `out`)."""
    run_id, fields = run.run_id, run._asdict()
    writers["runs"].write([tuple(fields[name] for name in RUNS.names)])
    for kind, layout in (("hparams", HPARAMS), ("results", RESULTS)):
        values = store.values(kind, run_id).get(run_id, {})
        writers[layout.name].write(
            (run_id, name, json.dumps(value)) for name, value in sorted(values.items())
        )
    writers["repetitions"].write(
        (run_id, rep, start) for rep, start in store.repetition_starts(run_id).items()
    )
    writers["run_tags"].write((run_id, tag) for tag in store.run_tags(run_id).get(run_id, []))
    for tag in store.tag_names(run_id, "scalars"):
        writers["scalars"].write(  # a scalar is never missing: NULL is how the table keeps a NaN
            (run_id, tag, rep, step, epoch, seconds(walltime_ms), math.nan if value is None else value)
            for rep, step, epoch, walltime_ms, value in store.scalars(run_id, tag)
        )
    texts = _by_id({kind: store.texts(run_id, kind) for kind in TEXT_KINDS})
    markdown = store.markdown_text_ids(run_id) if _has_console(store) else set()
    writers["texts"].write(
        (run_id, tag, rep, step, epoch, seconds(walltime_ms), kind, content, int(text_id in markdown))
        for kind, (text_id, step, epoch, rep, tag, walltime_ms, content) in texts
    )
    media = _by_id({kind: store.media(run_id, kind) for kind in ("image", "figure")})
    if media:
        (out / MEDIA_DIR / str(run_id)).mkdir(parents=True)
    rows = []
    for index, (kind, (_, step, epoch, rep, tag, walltime_ms, width, height, png)) in enumerate(media):
        file = f"{MEDIA_DIR}/{run_id}/{index:06d}.png"
        (out / file).write_bytes(png)
        rows.append((run_id, tag, rep, step, epoch, seconds(walltime_ms), kind, width, height, file))
    writers["media"].write(rows)
    writers["histograms"].write(
        (run_id, r.tag, r.run_rep, r.step, r.epoch, r.walltime, h.count, h.nonfinite, h.minimum, h.maximum,
         h.total, h.total_squares, json.dumps(h.edges), json.dumps(h.counts))
        for r in store.histograms(run_id) for h in (r.histogram,)
    )  # fmt: skip
    if _has_console(store):
        writers["console"].write(_console_rows(store, run_id))
        environment = store.environment(run_id)
        writers["environments"].write([(run_id, environment)] if environment is not None else [])
    if (store.schema_version or IMPORTS_SINCE) >= IMPORTS_SINCE:
        _export_imported(store, run_id, writers)


def _export_imported(store: Store, run_id: int, writers: dict[str, RowWriter]) -> None:
    """What only imports keep (store/imported.py): every point of a series that repeated a step,
    and summaries kept as their source bytes."""
    for tag in store.tag_names(run_id, "scalar_events"):
        writers["scalar_events"].write(
            (run_id, tag, rep, seq, step, epoch, seconds(walltime_ms), math.nan if value is None else value)
            for rep, seq, step, epoch, walltime_ms, value in store.scalar_events(run_id, tag)
        )
    writers["raw_summaries"].write(
        (run_id, raw.tag, raw.rep, raw.step, seconds(raw.walltime_ms), raw.kind, raw.format,
         base64.b64encode(raw.data).decode("ascii"))
        for raw in store.raw_summaries(run_id)
    )  # fmt: skip


def _has_console(store: Store) -> bool:
    """Whether the table has console, environments and texts.markdown (an older table, opened only
    to read, is exported as it is)."""
    return (store.schema_version or CONSOLE_SINCE) >= CONSOLE_SINCE


def _console_rows(store: Store, run_id: int) -> Iterator[tuple[Any, ...]]:
    """The run's console lines in capture order, read a page at a time."""
    after = 0
    while lines := store.console(run_id, after=after, limit=CONSOLE_PAGE):
        yield from ((run_id, line.rep, seconds(line.walltime_ms), line.stream, line.line) for line in lines)
        after = lines[-1].console_id


def export_table(
    source: LocationLike,
    out: str | os.PathLike[str],
    file_format: str = "csv",
    run_ids: Sequence[int] | None = None,
    progress: bool = False,
    artifacts: str | None = None,
) -> dict[str, int]:
    """Export the table at `source` (path or URL), opened only to read; see `export_store`.
    The runs' artefacts are copied from their store (`artifacts`, default as for `ResultTable`)."""
    with open_target(source, create=False) as store:
        location = location_for(store.url, artifacts)
        return export_store(store, out, file_format, run_ids, progress, location)


def export_store(
    store: Store,
    out: str | os.PathLike[str],
    file_format: str = "csv",
    run_ids: Sequence[int] | None = None,
    progress: bool = False,
    artifacts: str | None = None,
) -> dict[str, int]:
    """Export the table of `store` into the new directory `out` (`ResultTable.export`); returns row
    counts. The runs' artefacts are copied from the artefact store at `artifacts`."""
    from tallyboard.progress import progress_bar

    if file_format not in FORMATS:
        raise ValueError(f"unknown format {file_format!r}; use one of {', '.join(FORMATS)}")
    out = Path(out)
    runs = _select_runs(store, run_ids)
    listed = [row for run in runs for row in store.artifacts(run.run_id)]
    blobs = open_blobs(require_location(artifacts)) if listed else None
    _prepare_directory(out)
    writers = {
        layout.name: RowWriter(layout.path(out, file_format), layout, file_format) for layout in LAYOUTS
    }
    try:
        writers["columns"].write((c.name, c.kind, c.alias, c.position) for c in store.columns())
        with progress_bar(len(runs), "exporting", enabled=progress, unit="run") as bar:
            for run in runs:
                export_run(store, run, out, writers)
                bar.update()
    finally:
        for writer in writers.values():
            writer.close()
    counts = {name: writer.count for name, writer in writers.items()}
    if blobs is not None:
        counts[ARTIFACTS.name] = export_artifacts(listed, blobs, out, file_format)
    manifest = {"tallyboard_export": EXPORT_VERSION, "format": file_format, "counts": counts}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return counts

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
    texts.<ext>             run_id, tag, rep, step, epoch, walltime, kind (text|fragment), content
    media.<ext>             run_id, tag, rep, step, epoch, walltime, kind (image|figure), width,
                            height, file (relative path of the PNG)
    media/<run_id>/<n>.png  the images and figures, numbered per run in logging order
    histograms.<ext>        run_id, tag, rep, step, epoch, walltime, count, nonfinite, minimum,
                            maximum, total, total_squares, edges and counts (JSON arrays of numbers)
                            -- written since schema v7; an older export has no such file
    artifacts.<ext>         (only when the runs have artefacts) run_id, name, kind, size, sha256,
                            step, logged_at
    artifacts/sha256/ab/... the artefacts' files, laid out as an artefact store (content-addressed:
                            shared bytes once; never named by a logged name, which could say "../")

Rows come in a fixed order (runs by id, then tag, repetition and step), so exporting the same table
twice gives identical files. Wall times are the table's milliseconds written as seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tallyboard.artifacts import Blobs, LocalBlobs, location_for, open_blobs, require_location
from tallyboard.exchange.formats import FORMATS, Layout, RowWriter
from tallyboard.exchange.target import open_target
from tallyboard.store import Store
from tallyboard.store.records import ArtifactRow
from tallyboard.store.run_row import typed

EXPORT_VERSION = 1
MANIFEST = "manifest.json"
MEDIA_DIR = "media"

# The files' column order is part of the export format (older exports are read by it): never reorder.
RUNS = Layout(
    "runs",
    typed((
        "run_id", "experiment", "status", "start_time", "end_time", "tag", "note", "color", "hidden",
        "comment", "config_path", "config_hash", "config_content", "cli", "command", "git_commit",
        "git_diff", "unique_key",
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
TEXTS = Layout("texts", (*_RECORD, ("kind", str, False), ("content", str, False)))
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
LAYOUTS = (RUNS, HPARAMS, RESULTS, COLUMNS, REPETITIONS, RUN_TAGS, SCALARS, TEXTS, MEDIA, HISTOGRAMS)
OPTIONAL_LAYOUTS = (RUN_TAGS, HISTOGRAMS)  # files that exports of older versions lack
# Written alongside, not in LAYOUTS: `tallyboard import tallyboard` does not bring artefacts back.
ARTIFACTS = Layout(
    "artifacts",
    (
        ("run_id", int, False), ("name", str, False), ("kind", str, False), ("size", int, False),
        ("sha256", str, False), ("step", int, True), ("logged_at", float, False),
    ),
)  # fmt: skip
ARTIFACTS_DIR = "artifacts"


def seconds(walltime_ms: int) -> float:
    return walltime_ms / 1000


def _prepare_directory(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{str(out)!r} exists and is not an empty directory; export into a new one")
    out.mkdir(parents=True, exist_ok=True)


def _select_runs(store: Store, run_ids: Sequence[int] | None) -> list[dict[str, Any]]:
    runs = store.runs(show_hidden=True)
    if run_ids is None:
        return runs
    known = {run["run_id"] for run in runs}
    missing = [run_id for run_id in run_ids if run_id not in known]
    if missing:
        raise ValueError(f"no run with id {', '.join(map(str, missing))} in the table")
    wanted = set(run_ids)
    return [run for run in runs if run["run_id"] in wanted]


def _by_id(rows_by_kind: dict[str, list[tuple]]) -> list[tuple[str, tuple]]:
    """Records of several kinds merged back into logging order (their ids)."""
    merged = [(kind, row) for kind, rows in rows_by_kind.items() for row in rows]
    return sorted(merged, key=lambda item: item[1][0])


def export_run(store: Store, run: dict[str, Any], out: Path, writers: dict[str, RowWriter]) -> None:
    """Append one run and everything logged under it to the open writers (PNGs go to `out`)."""
    run_id = run["run_id"]
    writers["runs"].write([tuple(run[name] for name in RUNS.names)])
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
        writers["scalars"].write(
            (run_id, tag, rep, step, epoch, seconds(walltime_ms), value)
            for rep, step, epoch, walltime_ms, value in store.scalars(run_id, tag)
        )
    texts = _by_id({kind: store.texts(run_id, kind) for kind in ("text", "fragment")})
    writers["texts"].write(
        (run_id, tag, rep, step, epoch, seconds(walltime_ms), kind, content)
        for kind, (_, step, epoch, rep, tag, walltime_ms, content) in texts
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


def _export_artifacts(listed: list[ArtifactRow], blobs: Blobs, out: Path, file_format: str) -> int:
    """The artefacts' list, and their files copied (streamed, hash-checked) into `out/artifacts/`."""
    with RowWriter(ARTIFACTS.path(out, file_format), ARTIFACTS, file_format) as writer:
        writer.write(tuple(row) for row in listed)
    exported = LocalBlobs(out / ARTIFACTS_DIR)
    for sha256 in sorted({row.sha256 for row in listed}):
        with blobs.open(sha256) as stream:
            exported.put_stream(stream, sha256)
    (out / ARTIFACTS_DIR / "tmp").rmdir()  # empty: every file went in whole (there was at least one)
    return len(listed)


def export_table(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    file_format: str = "csv",
    run_ids: Sequence[int] | None = None,
    progress: bool = False,
    artifacts: str | None = None,
) -> dict[str, int]:
    """Export the table at `source` (path or URL) into the new directory `out`; returns row counts.
    The runs' artefacts are copied from their store (`artifacts`, default as for `ResultTable`)."""
    from tallyboard.progress import progress_bar

    if file_format not in FORMATS:
        raise ValueError(f"unknown format {file_format!r}; use one of {', '.join(FORMATS)}")
    out = Path(out)
    with open_target(source, create=False) as store:
        runs = _select_runs(store, run_ids)
        listed = [row for run in runs for row in store.artifacts(run["run_id"])]
        blobs = open_blobs(require_location(location_for(os.fspath(source), artifacts))) if listed else None
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
        counts[ARTIFACTS.name] = _export_artifacts(listed, blobs, out, file_format)
    manifest = {"tallyboard_export": EXPORT_VERSION, "format": file_format, "counts": counts}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return counts

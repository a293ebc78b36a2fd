"""`tallyboard import deepboard OLD.db`: a DeepBoard 0.3 result table into ours.

DeepBoard is not needed: its SQLite schema (deepboard/resultTable/table_schema.py, 0.3.0) is read
directly, read-only. How its rows map onto ours:
- `Experiments` -> runs, keeping run id (when free in the target), experiment, config path and hash,
  config content (`ConfigFile`), command, comment, note, tag, colour ("ff0000" becomes our
  "#ff0000"), start, status, git commit and diff, and the hidden flag. Its CLI, stored as
  "key=value key=value", becomes a JSON object of strings (DeepBoard kept no types). The debug
  run (-1) is imported only if the target has none.
- `Results` -> hparams (`is_hparam = 1`) and results. DeepBoard stored numpy integers and float32
  values as raw bytes; they are decoded (8 bytes: int64, 4: float32, 1: bool).
- `Logs` -> scalars under `split/label` (or `label` when the split is empty), with epoch,
  repetition and wall time; `Images` -> images ('IMAGE') and figures ('PLOT'); `Fragments` -> text
  ('RAW') and HTML fragments ('HTML'). DeepBoard kept no wall time for these: they get 0.
- `ResultDisplay` (column aliases, order, hidden columns) is applied when the target had no runs
  before the import, so an existing table's layout is never reshuffled.
Runs already in the target (same experiment and start time) are skipped, but a run that an import
failed to complete is imported again.
"""

from __future__ import annotations

import json
import os
import struct
from contextlib import closing
from datetime import datetime
from typing import Any

from tallyboard.exchange.bundle import RunBundle, import_bundles, nan_to_none
from tallyboard.store.deepboard import DeepBoardFile
from tallyboard.store.location import LocationLike

# DeepBoard's names for the built-in columns that ours names differently.
COLUMN_NAMES = {
    "config": "config_path",
    "commit_hash": "git_commit",
    "diff": "git_diff",
    "start": "start_time",
}
IMAGE_KINDS = {"IMAGE": "image", "PLOT": "figure"}
TEXT_KINDS = {"RAW": "text", "HTML": "fragment"}


def decode_value(value: Any) -> Any:
    """A value of DeepBoard's untyped `Results.value` column as a Python scalar."""
    if not isinstance(value, bytes):
        return value
    if len(value) == 8:
        return struct.unpack("<q", value)[0]
    if len(value) == 4:
        return struct.unpack("<f", value)[0]
    if len(value) == 1:
        return bool(value[0])
    return value.hex()


def parse_cli(cli: str | None) -> str | None:
    """DeepBoard's "key=value key=value" as our JSON object; text it cannot split is kept as a JSON string."""
    if not cli:
        return None
    pairs = [token.partition("=") for token in cli.split(" ")]
    if all(separator for _, separator, _ in pairs):
        return json.dumps({key: value for key, _, value in pairs})
    return json.dumps(cli)


def _start_time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def read_runs(source: DeepBoardFile) -> list[RunBundle]:
    """Every DeepBoard run as a bundle, by run id."""
    configs = source.config_files()
    bundles: dict[int, RunBundle] = {}
    for row in source.experiments():
        start = _start_time(row["start"])
        fields = {
            "run_id": row["run_id"],
            "experiment": row["experiment"],
            "config_path": row["config"],
            "config_hash": row["config_hash"],
            "config_content": configs.get(row["run_id"]),
            "cli": parse_cli(row["cli"]),
            "command": row["command"],
            "comment": row["comment"],
            "note": row["note"] or "",
            "tag": row["tag"] or "",
            "color": f"#{row['color']}" if row["color"] else None,  # its case kept, as set_color keeps it
            "status": row["status"] or "running",
            "start_time": start,
            "git_commit": row["commit_hash"],
            "git_diff": row["diff"],
            "hidden": int(bool(row["hidden"])),
        }
        bundles[row["run_id"]] = RunBundle(fields=fields, repetitions={0: start})
    for run_id, metric, value, is_hparam in source.results():
        if run_id in bundles:
            target = bundles[run_id].hparams if is_hparam else bundles[run_id].results
            target[metric] = decode_value(value)
    for run_id, epoch, step, split, label, value, walltime, rep in source.logs():
        if run_id in bundles:
            tag = f"{split}/{label}" if split else label
            bundles[run_id].scalars.setdefault(tag, []).append(
                (rep, step, epoch, walltime, nan_to_none(value))
            )
    _read_artefacts(source, bundles)
    for bundle in bundles.values():
        bundle.repetitions.update({rep: bundle.fields["start_time"] for rep in _reps(bundle)})
    return list(bundles.values())


def _reps(bundle: RunBundle) -> set[int]:
    reps = {rep for rows in bundle.scalars.values() for rep, *_ in rows}
    return reps | {record[1] for record in bundle.media} | {record[1] for record in bundle.texts}


def _read_artefacts(source: DeepBoardFile, bundles: dict[int, RunBundle]) -> None:
    from tallyboard.media import to_png

    for run_id, step, epoch, rep, kind, tag, image in source.images():
        if run_id in bundles:
            png, _, _ = to_png(image, max_pixels=None)  # an import keeps what it reads
            bundles[run_id].media.append(
                (tag or "", rep, step, epoch, 0.0, IMAGE_KINDS.get(kind, "image"), png)
            )
    for run_id, step, epoch, rep, kind, tag, content in source.fragments():
        if run_id in bundles:
            bundles[run_id].texts.append(
                (tag or "", rep, step, epoch, 0.0, TEXT_KINDS.get(kind, "text"), content)
            )


def read_column_layout(source: DeepBoardFile) -> dict[str, dict[str, Any]]:
    """DeepBoard's `ResultDisplay` as changes for `Store.set_columns` ({name: {alias, position}})."""
    rows = source.column_layout()
    return {COLUMN_NAMES.get(name, name): {"alias": alias, "position": order} for name, order, alias in rows}


def import_deepboard(path: str | os.PathLike[str], into: LocationLike, progress: bool = False) -> str:
    """Import every run of the DeepBoard table at `path` into `into`; returns a one-line summary."""
    from tallyboard.exchange.target import open_target

    with closing(DeepBoardFile(path)) as source:
        bundles = read_runs(source)
        layout = read_column_layout(source)
    with open_target(into) as store:
        imported = import_bundles(store, bundles, progress, "importing DeepBoard runs", layout)
    return f"imported {imported} DeepBoard runs ({len(bundles) - imported} already present)"

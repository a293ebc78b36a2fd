"""What a real W&B run recorded offline, read back from its `run-ID.wandb` file.

The file is W&B's transaction log: a 7-byte header, then records framed as LevelDB's log format
frames them (32 KiB blocks; each piece a 7-byte header of checksum, length and type: whole, first,
middle or last piece), each record one protobuf `Record` of W&B's own `wandb_internal_pb2`. The
W&B release in the test environment has no reader of its own in Python (its core is a Go
binary), so this one walks the frames and lets W&B's protobuf classes parse what they hold.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

BLOCK = 32 * 1024
FILE_HEADER = 7  # ":W&B", a magic number and a version
PIECE_HEADER = struct.Struct("<IHB")  # checksum, length, type
WHOLE, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def record_bytes(path: Path) -> list[bytes]:
    """The records of a `.wandb` file, each as the bytes of one protobuf message."""
    data, found, pending = path.read_bytes(), [], b""
    assert data[:4] == b":W&B", f"{path} is no W&B transaction log"
    position = FILE_HEADER
    while position + PIECE_HEADER.size <= len(data):
        left = BLOCK - position % BLOCK
        if left < PIECE_HEADER.size:  # a block's tail too short for a header is padding
            position += left
            continue
        _, length, kind = PIECE_HEADER.unpack_from(data, position)
        if kind == 0:  # zeros: the rest of the block is padding
            position += left
            continue
        piece = data[position + PIECE_HEADER.size : position + PIECE_HEADER.size + length]
        position += PIECE_HEADER.size + length
        if kind == WHOLE:
            found.append(piece)
        elif kind == FIRST:
            pending = piece
        elif kind == MIDDLE:
            pending += piece
        elif kind == LAST:
            found.append(pending + piece)
    return found


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


@dataclass
class OfflineRun:
    """The parts of a W&B run the skins' tests compare: its init fields, final config and summary,
    history rows (one per step, keys flattened with '/'), alerts and the folder of its files."""

    fields: Any = None  # the RunRecord: project, display_name, run_group, notes, tags, job_type
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[tuple[str, str, str]] = field(default_factory=list)
    files: Path = Path()

    def series(self, key: str, x: str = "_step") -> list[tuple[Any, Any]]:
        """(x, value) of every history row holding `key`."""
        return [(row[x], row[key]) for row in self.history if key in row]


def read_offline_run(folder: Path) -> OfflineRun:
    """The one offline run W&B wrote under `folder` (its WANDB_DIR)."""
    [path] = folder.glob("wandb/offline-run-*/run-*.wandb")
    run = OfflineRun(files=path.parent / "files")
    for data in record_bytes(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.fields = record.run
            run.config.update({_key(item): json.loads(item.value_json) for item in record.run.config.update})
        elif kind == "config":
            run.config.update({_key(item): json.loads(item.value_json) for item in record.config.update})
        elif kind == "summary":
            run.summary.update({_key(item): json.loads(item.value_json) for item in record.summary.update})
        elif kind == "history":
            run.history.append({_key(item): json.loads(item.value_json) for item in record.history.item})
        elif kind == "alert":
            run.alerts.append((record.alert.title, record.alert.text, record.alert.level))
    run.config.pop("_wandb", None)
    return run

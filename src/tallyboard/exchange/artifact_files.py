"""The artefacts of an export: their list (`artifacts.<ext>`) and their files (`artifacts/`).

Why it is built this way:
- The export's `artifacts/` folder is itself an artefact store (`sha256/ab/abcdef...`), so bytes
  several runs share are written once, a logged name (which could say "../") never becomes a
  path, and the same `Blobs` code that copies between stores copies out and back in, streamed and
  verified against the hash: a 2 GB checkpoint never sits in memory.
- On import the files go into the target table's store first and the list rows after, so a listed
  artefact always has its bytes; bytes the store has already are not copied again.
- A PostgreSQL target has no folder "next to" it: an export that carries artefacts needs a store
  named for it (`--artifacts`), and says so before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tallyboard.errors import ArtifactError
from tallyboard.exchange.formats import Layout, RowWriter
from tallyboard.store.artifacts import (
    Blobs,
    Carry,
    LocalBlobs,
    blob_key,
    location_for,
    open_blobs,
    require_location,
)
from tallyboard.store.base import Store
from tallyboard.store.confined import confined_path
from tallyboard.store.location import Location
from tallyboard.store.records import ArtifactRow

ARTIFACTS = Layout(
    "artifacts",
    (
        ("run_id", int, False), ("name", str, False), ("kind", str, False), ("size", int, False),
        ("sha256", str, False), ("step", int, True), ("logged_at", float, False),
    ),
)  # fmt: skip
ARTIFACTS_DIR = "artifacts"


def export_artifacts(listed: list[ArtifactRow], blobs: Blobs, out: Path, file_format: str) -> int:
    """Write the list, and copy each distinct blob once into `out/artifacts/`; how many rows."""
    with RowWriter(ARTIFACTS.path(out, file_format), ARTIFACTS, file_format) as writer:
        writer.write(tuple(row) for row in listed)
    exported = LocalBlobs(out / ARTIFACTS_DIR)
    for sha256 in sorted({row.sha256 for row in listed}):
        with blobs.open(sha256) as stream:
            exported.put_stream(stream, sha256)
    (out / ARTIFACTS_DIR / "tmp").rmdir()  # empty: every file went in whole (there was at least one)
    return len(listed)


class ExportedBlobs(LocalBlobs):
    """An export's `artifacts/` folder, read by an import: a blob is never read from outside the
    export, even when a file or folder of the export is a symlink leading out (store/confined.py)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory / ARTIFACTS_DIR)
        self.directory = directory

    def _path(self, sha256: str) -> Path:
        key = f"{ARTIFACTS_DIR}/{blob_key(sha256)}"
        return confined_path(self.directory, key, f"{ARTIFACTS.name} (blob {sha256[:12]})")


def check_exported_files(directory: Path, rows: Iterable[tuple[Any, ...]]) -> None:
    """Raise unless every listed blob is in the export (a valid hash, its file present inside it)."""
    exported = ExportedBlobs(directory)
    for row in rows:
        sha256 = ArtifactRow(*row).sha256
        if not exported.exists(sha256):  # `exists` refuses a hash that is not 64 hex digits
            raise FileNotFoundError(f"the export lacks {ARTIFACTS_DIR}/{blob_key(sha256)}")


def target_blobs(into: Location, configured: str | None) -> Blobs:
    """The artefact store of the table an export is imported into (ArtifactError if it has none)."""
    try:
        return open_blobs(require_location(location_for(into, configured)))
    except ArtifactError as error:
        raise ArtifactError(f"the export carries artefacts: {error} (`import --artifacts`)") from error


def import_artifacts(
    store: Store, directory: Path, rows: list[ArtifactRow], target: Blobs, progress: bool
) -> None:
    """Copy the blobs `rows` name that `target` lacks, then list the rows with their runs."""
    if not rows:
        return
    hashes = sorted({row.sha256 for row in rows})
    Carry(ExportedBlobs(directory), target, hashes).run(progress)
    for row in rows:
        store.add_artifact(row)

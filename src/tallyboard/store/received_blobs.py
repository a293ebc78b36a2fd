"""Artefact bytes a remote client uploads to a tallyboard server, chunk by chunk, into its store.

A client of `tallyboard serve --accept-writes` (store/http_shipping.py) logs artefacts into a
node-local store; before it ships the listing of one (`add_artifact`), it uploads the bytes here
(docs/server.md, "Artefact bytes"). Why it is built this way:
- Content-addressed end to end: an upload is named by the sha256 of the whole file, which is
  checked before the bytes enter the store (`Blobs`, store/artifacts.py) under that name; bytes
  that hash otherwise are dropped (422) and never stored. A name is 64 lowercase hex digits
  (`blob_key`), so no upload names a path.
- Resumable and idempotent: the bytes received so far sit in a staging file named by hash and
  size; a chunk says at which offset it starts. A chunk at or before the end of what is there is
  compared with it (a retried chunk whose answer was lost changes nothing), its new tail appended;
  a chunk past the end is refused with the size held (409), so a client asks where to go on. A
  server killed mid-upload keeps what it wrote: the client goes on from there.
- Bounded: a chunk is at most `MAX_CHUNK` bytes (the request's limit), a file `MAX_BLOB`.
- One upload at a time (a lock): chunks are appended in order, and the store's commit of a file
  is never raced by another request for the same hash.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from tallyboard.errors import ArtifactError
from tallyboard.store.artifacts import Blobs, blob_key, file_sha256

MAX_CHUNK = 8 * 2**20  # bytes of one upload request (a client sends `UPLOAD_CHUNK`)
MAX_BLOB = 64 * 2**30  # bytes of one artefact


class UploadRefused(ArtifactError):
    """An upload request refused: its HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ReceivedBlobs:
    """The server's artefact store (`blobs`) and the staging folder of uploads under way."""

    def __init__(self, blobs: Blobs, staging: str | os.PathLike[str]) -> None:
        self.blobs = blobs
        self.staging = Path(staging)
        self._lock = threading.Lock()

    def _part(self, sha256: str, total: int) -> Path:
        return self.staging / f"{sha256}.{total}.part"

    def state(self, sha256: str) -> dict[str, Any]:
        """{"sha256", "size": bytes held, "complete"}: where an upload of `sha256` stands."""
        _checked_hash(sha256)
        with self._lock:
            if self.blobs.exists(sha256):
                return {"sha256": sha256, "size": None, "complete": True}
            parts = sorted(self.staging.glob(f"{sha256}.*.part")) if self.staging.is_dir() else []
            size = parts[0].stat().st_size if parts else 0
            return {"sha256": sha256, "size": size, "complete": False}

    def receive(self, sha256: str, offset: int, total: int, chunk: bytes) -> dict[str, Any]:
        """Take `chunk`, the bytes of the file `sha256` (of `total` bytes) from `offset` on; once
        all `total` bytes are here and hash to `sha256`, store the file. The state after it."""
        _checked_hash(sha256)
        if not 0 <= total <= MAX_BLOB:
            raise UploadRefused(413, f"an artefact is limited to {MAX_BLOB:,} bytes")
        if len(chunk) > MAX_CHUNK:
            raise UploadRefused(413, f"a chunk is limited to {MAX_CHUNK:,} bytes")
        if offset < 0 or offset + len(chunk) > total:
            raise UploadRefused(400, f"a chunk of {len(chunk)} bytes at {offset} lies outside {total} bytes")
        with self._lock:
            if self.blobs.exists(sha256):
                return {"sha256": sha256, "size": None, "complete": True}
            self.staging.mkdir(parents=True, exist_ok=True)
            for other in self.staging.glob(f"{sha256}.*.part"):
                if other.name != self._part(sha256, total).name:
                    raise UploadRefused(
                        409, f"{sha256} is being uploaded as {other.name.split('.')[1]} bytes"
                    )
            part = self._part(sha256, total)
            with open(part, "a+b") as staged:
                held = staged.seek(0, os.SEEK_END)
                if offset > held:
                    raise UploadRefused(409, f"{held} bytes of {sha256} are here: go on from there")
                staged.seek(offset)
                overlap = staged.read(min(held - offset, len(chunk)))
                if overlap != chunk[: len(overlap)]:  # not what was received: start again
                    part.unlink()
                    raise UploadRefused(
                        409, f"the bytes at {offset} differ from those received: upload again"
                    )
                staged.seek(0, os.SEEK_END)
                staged.write(chunk[len(overlap) :])
                held = max(held, offset + len(chunk))
            if held < total:
                return {"sha256": sha256, "size": held, "complete": False}
            return self._commit(sha256, part)

    def _commit(self, sha256: str, part: Path) -> dict[str, Any]:
        """Store the whole file under its hash if it hashes so; a file that does not is dropped."""
        found, _ = file_sha256(part)
        if found != sha256:
            part.unlink()
            raise UploadRefused(422, f"the bytes received hash to {found}, not {sha256}: upload again")
        with open(part, "rb") as source:
            self.blobs.put_stream(source, sha256)
        part.unlink()
        return {"sha256": sha256, "size": None, "complete": True}


def _checked_hash(sha256: str) -> None:
    try:
        blob_key(sha256)
    except ArtifactError as error:
        raise UploadRefused(400, str(error)) from None

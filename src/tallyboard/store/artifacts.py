"""Artefacts: files kept with a run (checkpoints, predictions, plots), in a content-addressed store.

Why it is built this way:
- Content-addressed: a blob's name is the sha256 of its bytes (`sha256/ab/abcdef...`), so the same
  bytes logged by ten runs are stored once, and a name never points at other bytes.
- Streaming: a file is read in `CHUNK` pieces, hashed and copied piece by piece; a 2 GB checkpoint
  never sits in memory. The copy goes to a temporary name and is renamed (moved) under its hash
  only once complete, so a crash never leaves a half file under a hash.
- Off the training thread: `Uploader` copies in a background thread of its own (not the sink's,
  whose batches must not wait behind a 2 GB copy); `log_artifact` only checks the file and queues
  it. `LogWriter.flush()` and the end of the run wait for the copies.
- Standard library for a local folder; fsspec (the `[artifacts]` extra) only for a URL such as
  `s3://bucket/prefix`, imported when such a URL is used.
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import shutil
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tallyboard.errors import ArtifactError
from tallyboard.store.base import Store
from tallyboard.store.location import Location, without_password
from tallyboard.store.records import ArtifactRow

CHUNK = 1 << 20  # bytes read, hashed and written at a time
SHA256 = re.compile(r"[0-9a-f]{64}")


def location_for(table: Location, configured: str | os.PathLike[str] | None = None) -> str | None:
    """Where a table's artefacts are: `configured` if given, else $TALLYBOARD_ARTIFACTS, else a
    folder next to a SQLite file (`results.db` -> `results.artifacts/`); None for a PostgreSQL
    table without one (it has no "next to": configure a shared folder or object storage)."""
    if configured is None:
        configured = os.environ.get("TALLYBOARD_ARTIFACTS") or None
    if configured is not None:
        return os.fspath(configured)
    path = table.sqlite_path
    return None if path is None else str(Path(path).with_suffix(".artifacts"))


NO_STORE = (
    "this table has no artefact store: a PostgreSQL table needs one, e.g. "
    "ResultTable(url, artifacts='s3://bucket/prefix' or '/shared/folder'), or $TALLYBOARD_ARTIFACTS"
)


def require_location(location: str | None) -> str:
    if location is None:
        raise ArtifactError(NO_STORE)
    return location


def find(store: Store, run_id: int, name: str) -> ArtifactRow:
    """The artefact `name` of run `run_id`, or ArtifactError saying which names the run has."""
    found = store.artifacts(run_id, name)
    if not found:
        names = [row.name for row in store.artifacts(run_id)]
        raise ArtifactError(
            f"run {run_id} has no artefact {name!r}" + (f"; it has {names}" if names else "; it has none")
        )
    return found[0]


def open_blobs(location: str) -> Blobs:
    """The blob store at `location`: a folder path (standard library) or an fsspec URL."""
    if "://" in location and not location.startswith("file://"):
        return FsspecBlobs(location)
    return LocalBlobs(location.removeprefix("file://"))


def blob_key(sha256: str) -> str:
    """Where the blob of `sha256` lives in a store. Refuses anything but 64 hex digits: a hash read
    from a table someone else wrote must not become a path such as '../../.ssh/id_rsa'."""
    if not SHA256.fullmatch(sha256):
        raise ArtifactError(f"not a sha256 (64 lowercase hex digits): {sha256[:80]!r}")
    return f"sha256/{sha256[:2]}/{sha256}"


def file_sha256(path: str | os.PathLike[str]) -> tuple[str, int]:
    """The sha256 (hex) and size of the file at `path`, read a chunk at a time."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def copy_hashing(source: IO[bytes], target: IO[bytes]) -> tuple[str, int]:
    """Copy `source` into `target` a chunk at a time; the sha256 and size of what was copied."""
    digest, size = hashlib.sha256(), 0
    while chunk := source.read(CHUNK):
        digest.update(chunk)
        target.write(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


class Blobs:
    """A content-addressed store of files. Subclasses say how to test, write, rename and read."""

    location: str

    def exists(self, sha256: str) -> bool:
        raise NotImplementedError

    def open(self, sha256: str) -> IO[bytes]:
        """The stored bytes, for reading (a stream: read it in chunks)."""
        raise NotImplementedError

    def _write_temporary(self, source: IO[bytes]) -> tuple[str, str, int]:
        """Copy `source` to a new temporary blob; its key, sha256 and size."""
        raise NotImplementedError

    def _commit(self, temporary: str, sha256: str) -> None:
        """Move a temporary blob under its hash (or drop it if that hash is there meanwhile)."""
        raise NotImplementedError

    def _discard(self, temporary: str) -> None:
        """Remove a temporary blob that is not to be kept."""
        raise NotImplementedError

    def put(self, path: str | os.PathLike[str]) -> tuple[str, int]:
        """Store the file at `path` unless its bytes are already here; its sha256 and size.

        Reads the file once to hash it (nothing is written when the bytes are known), then once
        more while copying, hashing again: what is stored is named by what was copied, even if the
        file changed in between."""
        sha256, size = file_sha256(path)
        if self.exists(sha256):
            return sha256, size
        with open(path, "rb") as source:
            temporary, sha256, size = self._write_temporary(source)
        self._commit(temporary, sha256)
        return sha256, size

    def put_stream(self, source: IO[bytes], sha256: str) -> None:
        """Store a blob read from `source` (another store's copy of `sha256`) unless it is here."""
        if self.exists(sha256):
            return
        temporary, copied, _ = self._write_temporary(source)
        if copied != sha256:
            self._discard(temporary)
            raise ArtifactError(f"blob {sha256} read back as {copied}: the source store is damaged")
        self._commit(temporary, sha256)


class LocalBlobs(Blobs):
    """Blobs in a local (or mounted) folder; standard library only. Temporary files are written in
    `tmp/` inside the folder, so the final rename stays on one file system (atomic)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.location = os.fspath(folder)
        self.root = Path(folder)

    def _path(self, sha256: str) -> Path:
        return self.root / blob_key(sha256)

    def exists(self, sha256: str) -> bool:
        return self._path(sha256).is_file()

    def open(self, sha256: str) -> IO[bytes]:
        return open(self._path(sha256), "rb")

    def _write_temporary(self, source: IO[bytes]) -> tuple[str, str, int]:
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        temporary = tmp / uuid.uuid4().hex
        try:
            with open(temporary, "wb") as target:
                sha256, size = copy_hashing(source, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return str(temporary), sha256, size

    def _commit(self, temporary: str, sha256: str) -> None:
        final = self._path(sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temporary, final)  # same bytes under the same name: replacing is harmless

    def _discard(self, temporary: str) -> None:
        os.remove(temporary)


class FsspecBlobs(Blobs):
    """Blobs under an fsspec URL (`s3://bucket/prefix`, `gcs://...`, `memory://...`). Object stores
    publish an upload only when it completes; the temporary name keeps other file systems honest."""

    def __init__(self, url: str) -> None:
        try:
            import fsspec
        except ImportError as error:  # pragma: no cover - fsspec is in the [artifacts] extra
            raise ArtifactError(
                f"artefacts at {without_password(url)!r} need fsspec: pip install 'tallyboard[artifacts]'"
            ) from error
        self.location = without_password(url)  # what messages and progress bars name
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.root = self.root.rstrip("/")

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def exists(self, sha256: str) -> bool:
        return bool(self.fs.exists(self._path(blob_key(sha256))))

    def open(self, sha256: str) -> IO[bytes]:
        opened: IO[bytes] = self.fs.open(self._path(blob_key(sha256)), "rb")
        return opened

    def _write_temporary(self, source: IO[bytes]) -> tuple[str, str, int]:
        temporary = self._path(f"tmp/{uuid.uuid4().hex}")
        try:
            with self.fs.open(temporary, "wb", block_size=8 * CHUNK) as target:
                sha256, size = copy_hashing(source, target)
        except BaseException:
            if self.fs.exists(temporary):
                self.fs.rm(temporary)
            raise
        return temporary, sha256, size

    def _commit(self, temporary: str, sha256: str) -> None:
        self.fs.mv(temporary, self._path(blob_key(sha256)))

    def _discard(self, temporary: str) -> None:
        self.fs.rm(temporary)


def read_chunks(blobs: Blobs, sha256: str) -> Iterator[bytes]:
    """The stored bytes of `sha256`, a chunk at a time (what the dashboard streams)."""
    with blobs.open(sha256) as source:
        while chunk := source.read(CHUNK):
            yield chunk


def save_to(blobs: Blobs, sha256: str, path: str | os.PathLike[str]) -> None:
    """Write a stored blob to `path`, through a temporary name next to it."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
    try:
        with blobs.open(sha256) as source, open(temporary, "wb") as out:
            shutil.copyfileobj(source, out, CHUNK)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


# ---- the upload thread ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Upload:
    """A file `log_artifact` accepted, waiting to be copied and listed."""

    path: str
    run_id: int
    name: str
    kind: str
    step: int | None
    logged_at: float


class Uploader:
    """Copies queued files into `blobs` and lists each with `record`, in one daemon thread.

    Why a thread of its own: a 2 GB checkpoint takes seconds to hash and copy, and the training
    thread must not wait for it; the sink's thread must not either (scalars would queue behind it).
    A file that cannot be copied (deleted before its turn, a store that is down) is reported with a
    warning naming it; nothing else is held back."""

    def __init__(self, blobs: Blobs, record: Callable[[ArtifactRow], None]) -> None:
        self.blobs = blobs
        self._record = record
        self._queue: queue.Queue[Upload | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, upload: Upload) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="tallyboard-artifacts", daemon=True)
                self._thread.start()
        self._queue.put(upload)

    def wait(self) -> None:
        """Return once every file submitted so far is stored and listed (or reported)."""
        self._queue.join()

    def close(self) -> None:
        """Wait for the copies, then let the thread end (a run that ended logs no more files)."""
        with self._start_lock:
            if self._thread is not None and self._thread.is_alive():
                self._queue.put(None)
                self._thread.join()
            self._thread = None

    def _work(self) -> None:
        while (upload := self._queue.get()) is not None:
            try:
                sha256, size = self.blobs.put(upload.path)
                self._record(
                    ArtifactRow(
                        upload.run_id, upload.name, upload.kind, size, sha256, upload.step, upload.logged_at
                    )
                )
            except Exception as error:
                warnings.warn(
                    f"artefact {upload.name!r} of run {upload.run_id} ({upload.path}) was not stored:"
                    f" {error}",
                    RuntimeWarning,
                    stacklevel=1,
                )
            finally:
                self._queue.task_done()
        self._queue.task_done()  # the None that `close` sent


def check_upload(run_id: int, path: Any, name: str | None, kind: str, step: int | None) -> Upload:
    """Validate `log_artifact`'s arguments in the caller's thread: a clear error now, not a warning
    from the upload thread later."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    file = Path(path)
    if not file.is_file():
        raise ArtifactError(f"cannot log {os.fspath(path)!r} as an artefact: no such file")
    if not os.access(file, os.R_OK):
        raise ArtifactError(f"cannot log {os.fspath(path)!r} as an artefact: not readable")
    name = file.name if name is None else name
    for label, text in (("name", name), ("kind", kind)):
        if not isinstance(text, str) or not text or "\x00" in text or len(text) > 1024:
            raise ValueError(
                f"artefact {label} must be a non-empty str (1024 characters at most), got {text!r}"
            )
    if step is not None and (not isinstance(step, int) or isinstance(step, bool) or abs(step) >= 2**63):
        raise TypeError(f"step must be a 64-bit int or None, got {step!r}")
    return Upload(str(file.resolve()), run_id, name, kind, step, time.time())


def describe(rows: list[ArtifactRow]) -> str:
    """The `tallyboard artifacts list` table: name, kind, size, step, sha256 prefix."""
    if not rows:
        return "no artefacts"
    lines = [f"{'NAME':40} {'KIND':8} {'BYTES':>14} {'STEP':>8}  SHA256"]
    for row in rows:
        step = "" if row.step is None else str(row.step)
        lines.append(f"{row.name:40} {row.kind:8} {row.size:>14} {step:>8}  {row.sha256[:12]}")
    return "\n".join(lines)


# ---- carrying the files along when a table is copied ------------------------------------------------
@dataclass(frozen=True)
class Carry:
    """The blobs a copy of a table must bring along, from one artefact store to another."""

    source: Blobs
    target: Blobs
    hashes: list[str]

    def run(self, progress: bool = True) -> int:
        """Copy the blobs the target lacks (streamed, verified against their hash); how many."""
        from tallyboard.progress import progress_bar

        copied = 0
        with progress_bar(len(self.hashes), f"copying artefacts to {self.target.location}",
                          enabled=progress, unit="file") as bar:  # fmt: skip
            for sha256 in self.hashes:
                if not self.target.exists(sha256):
                    with self.source.open(sha256) as stream:
                        self.target.put_stream(stream, sha256)
                    copied += 1
                bar.update(1)
        return copied


def plan_carry(
    src_url: Location, dst_url: Location, src_location: str | None = None, dst_location: str | None = None
) -> Carry | None:
    """What `tallyboard copy` must carry besides the rows: None when the source lists no artefact
    or both tables share one store. Checked before anything is copied: a target without an
    artefact store (PostgreSQL without one configured) is an ArtifactError, not half a copy."""
    from tallyboard.store import Access, open_store

    store = open_store(src_url, access=Access.READ)
    try:
        hashes = store.artifact_hashes()
    finally:
        store.close()
    if not hashes:
        return None
    source = location_for(src_url, src_location)
    if source is None:
        raise ArtifactError(f"{src_url} lists artefacts but no artefact store is known: pass --artifacts")
    target = location_for(dst_url, dst_location)
    if target is None:
        raise ArtifactError(
            f"{dst_url} has no artefact store to copy {len(hashes)} files into: pass --artifacts-to"
        )
    if source == target:
        return None
    return Carry(open_blobs(source), open_blobs(target), hashes)

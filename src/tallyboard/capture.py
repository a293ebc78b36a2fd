"""What it takes to reproduce a run: the git commit and diff, the config file, the command line.

Capture runs once, when a run starts, and must never be the reason a run fails to start: a missing
git binary, a directory that is not a repository or a git that hangs (a network filesystem, a lock)
all give ``None`` fields, within a bounded time.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

GIT_TIMEOUT_S = 10.0
_CHUNK = 1 << 16


@dataclass(frozen=True)
class GitState:
    """``commit`` is HEAD's full hash (None before the first commit); ``diff`` is the working tree
    against HEAD, untracked files included (None outside a repository)."""

    commit: str | None
    diff: str | None


@dataclass(frozen=True)
class ConfigFile:
    """A config file as it was when the run started: where it was, its sha256 and its text."""

    path: str | None
    sha256: str
    content: str


def git_state(cwd: str | os.PathLike[str] | None = None, timeout_s: float = GIT_TIMEOUT_S) -> GitState:
    """Return the commit and the diff of the repository containing ``cwd``; never raises.

    Untracked files are included with their contents, ignored files (``.gitignore``) are not. They
    are marked intent-to-add in a temporary copy of the index, so the user's own index is left alone.
    """
    try:
        return _git_state(Path.cwd() if cwd is None else Path(cwd), timeout_s)
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return GitState(None, None)


def _git_state(cwd: Path, timeout_s: float) -> GitState:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    inside = _git(cwd, env, timeout_s, "rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0 or inside.stdout.strip() != b"true":
        return GitState(None, None)
    head = _git(cwd, env, timeout_s, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    commit = head.stdout.decode().strip() if head.returncode == 0 else None
    index_path = _git(cwd, env, timeout_s, "rev-parse", "--git-path", "index")
    if index_path.returncode != 0:
        return GitState(commit, None)
    with tempfile.TemporaryDirectory(prefix="tallyboard-git-") as scratch:
        index_copy = Path(scratch) / "index"
        user_index = cwd / index_path.stdout.decode().strip()  # relative to cwd unless absolute
        if user_index.exists():
            shutil.copyfile(user_index, index_copy)
        env["GIT_INDEX_FILE"] = str(index_copy)
        _git(cwd, env, timeout_s, "add", "--intent-to-add", "--all")
        if commit is None:  # before the first commit, everything is new against the empty tree
            base = _git(cwd, env, timeout_s, "hash-object", "-t", "tree", os.devnull).stdout.decode().strip()
        else:
            base = commit
        diff = _git(cwd, env, timeout_s, "diff", "--no-color", "--no-ext-diff", "--no-textconv", base)
    if diff.returncode != 0:
        return GitState(commit, None)
    return GitState(commit, diff.stdout.decode("utf-8", errors="replace"))


def _git(cwd: Path, env: dict[str, str], timeout_s: float, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout_s,
        check=False,
    )


def read_config(config: str | os.PathLike[str] | IO[str] | IO[bytes]) -> ConfigFile:
    """Read a config file (a path or an open file) whole: its text is stored with the run.

    The hash is of the exact bytes; the text is decoded as UTF-8, undecodable bytes replaced.
    """
    if hasattr(config, "read"):
        data = _as_bytes(config.read())
        if hasattr(config, "seek"):
            config.seek(0)
        name = getattr(config, "name", None)
        return ConfigFile(name if isinstance(name, str) else None, _sha256(data), _decode(data))
    path = Path(config)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"config file not found: {path.resolve()}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"config file is a directory: {path.resolve()}") from None
    return ConfigFile(os.fspath(config), _sha256(data), _decode(data))


def file_hash(file: str | os.PathLike[str] | IO[str] | IO[bytes], hash_algo: str = "sha256") -> str:
    """The hex digest of a file with any algorithm of `hashlib.new`, read in chunks (a path, or an
    open file rewound after)."""
    digest = hashlib.new(hash_algo)
    if hasattr(file, "read"):
        while chunk := file.read(_CHUNK):
            digest.update(_as_bytes(chunk))
        if hasattr(file, "seek"):
            file.seek(0)
        return digest.hexdigest()
    with open(file, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def command_line() -> str:
    """The command that started this process, shell-quoted so it can be pasted back into a shell.

    ``sys.orig_argv`` keeps the interpreter and its options (``python -m pkg``, ``-X dev``), which
    ``sys.argv`` loses.
    """
    argv = sys.orig_argv or [sys.executable, *sys.argv]  # orig_argv is empty in embedded interpreters
    return shlex.join(argv)


def _as_bytes(chunk: str | bytes) -> bytes:
    return chunk.encode("utf-8") if isinstance(chunk, str) else chunk


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")

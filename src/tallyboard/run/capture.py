"""What it takes to reproduce a run: the git commit and diff, the config file, the command line.

Untracked files and the config file are stored only when they are small text; the others are
listed by path, size and sha256 (see left_out.py). The diff itself is capped (`MAX_DIFF_BYTES`):
an 82 MB diff (a data file kept in git, rewritten) once made every run store 82 MB and start in
14 s. It is cut between two files, so that what is stored still applies with ``git apply``, and
the files past the cap are listed like left-out untracked ones; git is stopped there.

Capture runs once, when a run starts, and must never be the reason a run fails to start: a missing
git binary, a directory that is not a repository or a git that hangs (a network filesystem, a lock)
all give ``None`` fields, within a bounded time. The commit is asked for before the diff (which
may be slow, and is bounded on its own), so a diff cut off by the timeout still leaves the run its
commit; what a timeout leaves missing is said in `GitState.warning`, which `new_run` warns with.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tallyboard.run import left_out
from tallyboard.run.left_out import LeftOut
from tallyboard.values import check_text

GIT_TIMEOUT_S = 10.0  # for each git command
MAX_DIFF_BYTES = 10 * 1024 * 1024  # of git diff's output; see ResultTable(max_diff_bytes=...)
MAX_DIFF_ENV = "TALLYBOARD_MAX_DIFF_BYTES"
_CHUNK = 1 << 16
# What `str()` of an object without a text of its own contains: `<Model object at 0x7f...>`.
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+")


@dataclass(frozen=True)
class GitState:
    """``commit`` is HEAD's full hash (None before the first commit); ``diff`` is the working tree
    against HEAD, untracked files included when small text (None outside a repository), preceded
    by a line for each file left out: untracked ones, and those past the diff's cap; ``left_out``
    lists those files. ``warning`` says what git did not answer in time, and so is missing."""

    commit: str | None
    diff: str | None
    left_out: tuple[LeftOut, ...] = ()
    warning: str | None = None


@dataclass(frozen=True)
class GitLimits:
    """How long each git command may take, and how much of the diff is stored."""

    timeout_s: float = GIT_TIMEOUT_S
    max_diff_bytes: int = MAX_DIFF_BYTES


def diff_cap(given: int | None) -> int:
    """The cap on a stored diff: `given`, else $TALLYBOARD_MAX_DIFF_BYTES, else `MAX_DIFF_BYTES`."""
    if given is None:
        text = os.environ.get(MAX_DIFF_ENV, "").strip()
        if not text:
            return MAX_DIFF_BYTES
        try:
            given = int(text)
        except ValueError:
            raise ValueError(f"${MAX_DIFF_ENV} must be a number of bytes, got {text!r}") from None
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        raise ValueError(f"max_diff_bytes must be a number of bytes (0 or more), got {given!r}")
    return given


@dataclass(frozen=True)
class ConfigFile:
    """A config file as it was when the run started: where it was, its sha256 and its text (or,
    for a binary or large file, the line that says so, and ``left_out`` set)."""

    path: str | None
    sha256: str
    content: str
    left_out: LeftOut | None = None


@dataclass(frozen=True)
class Repository:
    """Where git keeps a checkout's state: its top folder, its git folder (a worktree's own), the
    folder it shares with other worktrees, and its index. What `run/git_cache.py` watches."""

    root: Path
    git_dir: Path
    common_dir: Path
    index: Path


def git_state(
    cwd: str | os.PathLike[str] | None = None,
    timeout_s: float = GIT_TIMEOUT_S,
    max_diff_bytes: int = MAX_DIFF_BYTES,
) -> GitState:
    """Return the commit and the diff of the repository containing ``cwd``; never raises.

    Untracked files are included with their contents when they are small text (see left_out.py),
    ignored files (``.gitignore``) are not. They are marked intent-to-add in a temporary copy of the
    index, so the user's own index is left alone. Of git's diff, the files that fit whole in
    ``max_diff_bytes`` are kept; the others are listed (`left_out.past_the_cap`).
    """
    return git_capture(cwd, timeout_s, max_diff_bytes)[0]


def git_capture(
    cwd: str | os.PathLike[str] | None = None,
    timeout_s: float = GIT_TIMEOUT_S,
    max_diff_bytes: int = MAX_DIFF_BYTES,
) -> tuple[GitState, Repository | None]:
    """`git_state`, and the repository it was taken from (None outside one, or when git failed)."""
    where = Path.cwd() if cwd is None else Path(cwd)
    env = git_env()
    try:  # one rev-parse answers all: inside a work tree?, its layout, then HEAD's commit (if any)
        found = run_git(where, env, timeout_s, "rev-parse", *_LAYOUT, "--verify", "--quiet", "HEAD^{commit}")
    except subprocess.TimeoutExpired as late:
        return GitState(None, None, warning=_late(late, where, "no git commit and no git diff")), None
    except (OSError, subprocess.SubprocessError):
        return GitState(None, None), None
    lines = found.stdout.split(b"\n")  # 5 lines, then the commit's, each ended by a newline
    if lines[0] != b"true" or len(lines) != (7 if found.returncode == 0 else 6):
        return GitState(None, None), None  # not a work tree (or a path holding a newline: unread)
    root, git_dir, common_dir, index = (where / os.fsdecode(line) for line in lines[1:5])
    commit = lines[5].decode("ascii", errors="replace") if found.returncode == 0 else None
    repository = Repository(root, git_dir, common_dir, index)
    try:
        return _with_diff(repository, env, timeout_s, max_diff_bytes, commit), repository
    except subprocess.TimeoutExpired as late:
        what = f"commit {commit} but no git diff" if commit else "no git diff"
        return GitState(commit, None, warning=_late(late, where, what)), None
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return GitState(commit, None), None


# What `git rev-parse` prints before HEAD's commit, a line each: "true", then four paths (absolute,
# or relative to the cwd).
_LAYOUT = (
    "--is-inside-work-tree",
    "--show-toplevel",
    "--absolute-git-dir",
    "--git-common-dir",
    "--git-path",
    "index",
)


def _late(late: subprocess.TimeoutExpired, where: Path, recorded: str) -> str:
    """The warning for a git command cut off by the timeout: which, where, and what the run lacks."""
    return (
        f"tallyboard: `git {late.cmd[1]}` did not finish within {late.timeout:g} s in {where}: the run "
        f"records {recorded}, so it may not be reproducible from what it stored"
    )


def _with_diff(
    repository: Repository, env: dict[str, str], timeout_s: float, max_bytes: int, commit: str | None
) -> GitState:
    """The state with the diff of the working tree against `commit` (see `git_state`). The index is
    copied only when untracked files are to be marked in it, and git diff runs only when something
    changed: a clean checkout costs two git processes in all."""
    root = repository.root
    untracked = run_git(root, env, timeout_s, "ls-files", "--others", "--exclude-standard", "-z")
    if untracked.returncode != 0:
        return GitState(commit, None)
    taken, left = _select_untracked(root, [p for p in untracked.stdout.split(b"\0") if p])
    with tempfile.TemporaryDirectory(prefix="tallyboard-git-") as scratch:
        if taken:
            index_copy = Path(scratch) / "index"
            if repository.index.exists():
                # with its times: git trusts a file's cached stat unless the file is as new as the
                # index, so a copy made now would hide a same-size rewrite within that second
                shutil.copy2(repository.index, index_copy)
            env = {**env, "GIT_INDEX_FILE": str(index_copy)}
            add = ("add", "--intent-to-add", "--pathspec-from-file=-", "--pathspec-file-nul")
            run_git(root, {**env, "GIT_LITERAL_PATHSPECS": "1"}, timeout_s, *add, stdin=b"\0".join(taken))
        if commit is None:  # before the first commit, everything is new against the empty tree
            base = (
                run_git(root, env, timeout_s, "hash-object", "-t", "tree", os.devnull).stdout.decode().strip()
            )
        else:
            base = commit
        # --submodule=short: every file's part starts with `diff --git`, a submodule's too (counted
        # to know which files the cap cut), whatever diff.submodule says
        diff = ("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--submodule=short")
        names = run_git(root, env, timeout_s, *diff, "--name-only", "-z", base)
        if names.returncode != 0:
            return GitState(commit, None)
        changed = [name for name in names.stdout.split(b"\0") if name]
        stored, cut = b"", False
        if changed:
            order = Path(scratch) / "order"
            order.write_bytes(_smallest_first(changed, root))
            ordered = (*diff, f"-O{order}")
            output = _capped_output(root, env, timeout_s, max_bytes, *ordered, base)
            if output is None:
                return GitState(commit, None)
            stored, cut = output
        if cut:  # the files past the cap, by name, in the order git diffed them
            names = run_git(root, env, timeout_s, *ordered, "--name-only", "-z", base)
            paths = [os.fsdecode(name) for name in names.stdout.split(b"\0") if name]
            reason = left_out.past_the_cap(max_bytes)
            left += [_listed_change(root, path, reason) for path in paths[_files_in(stored) :]]
    listed = "".join(entry.line() + "\n" for entry in left)
    return GitState(commit, listed + _decode(stored), tuple(left))


def _capped_output(
    cwd: Path, env: dict[str, str], timeout_s: float, max_bytes: int, *args: str
) -> tuple[bytes, bool] | None:
    """What git diff writes, cut before the first file that does not fit whole in `max_bytes`, and
    whether it had to be cut (git is stopped then: the rest would only cost time); None if git
    failed. Raises `subprocess.TimeoutExpired` after `timeout_s`, as `subprocess.run` does."""
    command = ["git", *args]
    cut_off = threading.Event()
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as process:
        assert process.stdout is not None  # stdout=PIPE

        def stop() -> None:  # a read blocked on a git that hangs returns once git is gone
            cut_off.set()
            process.kill()

        timer = threading.Timer(timeout_s, stop)
        timer.start()
        try:
            output = process.stdout.read(max_bytes + 1)
            over = len(output) > max_bytes
            if over:
                process.kill()
            process.wait()
        finally:
            timer.cancel()
    if cut_off.is_set():
        raise subprocess.TimeoutExpired(command, timeout_s)
    if not over:
        return (output, False) if process.returncode == 0 else None
    cut = output.rfind(b"\n" + _FILE_HEADER, 0, max_bytes + 1)  # -1: not even the first file fits
    return output[: cut + 1], True


def _smallest_first(paths: list[bytes], root: Path) -> bytes:
    """A `git diff -O` order file that puts the changed `paths` smallest first (by their size in
    the working tree; deleted: 0), so that the cap keeps as many files whole as it can, and cuts
    the data file rewritten, not the change of the training script that sorts after it. Each path
    is a pattern matching itself alone (wildmatch's special characters escaped; a path holding a
    newline cannot be written, and goes last, which only changes which files fit)."""
    sizes = {}
    for path in paths:
        try:
            sizes[path] = os.lstat(root / os.fsdecode(path)).st_size
        except OSError:
            sizes[path] = 0
    return b"".join(
        re.sub(rb"([\\*?\[#])", rb"\\\1", path) + b"\n" for path in sorted(paths, key=sizes.__getitem__)
    )


_FILE_HEADER = b"diff --git "  # what starts each file's part of git diff's output, at a line's start


def _files_in(diff: bytes) -> int:
    """How many files a (whole-file) piece of git diff's output covers."""
    return diff.count(b"\n" + _FILE_HEADER) + diff.startswith(_FILE_HEADER)


def _listed_change(root: Path, path: str, reason: str) -> LeftOut:
    """A changed file whose diff is not stored, as it is in the working tree: its size and sha256
    (no sha256 for what is not a regular file, or above `left_out.MAX_HASHED_BYTES`); a file the
    change deleted has size 0."""
    full = root / path
    try:
        info = os.lstat(full)
        if not stat.S_ISREG(info.st_mode) or info.st_size > left_out.MAX_HASHED_BYTES:
            return LeftOut(path, info.st_size, None, reason)
        with open(full, "rb") as file:
            size, sha256 = left_out.rest_digest(file, b"")
    except OSError:
        return LeftOut(path, 0, None, reason)
    return LeftOut(path, size, sha256, reason)


def _select_untracked(root: Path, paths: list[bytes]) -> tuple[list[bytes], list[LeftOut]]:
    """Split untracked files (paths relative to `root`, in git's order) into those the diff takes
    whole and those it lists (see left_out.py). Anything but a regular file (a symlink, a nested
    repository) is taken: git stores no more than a path for it."""
    kept: list[bytes] = []
    left: list[LeftOut] = []
    total = 0
    for path in paths:
        full = root / os.fsdecode(path)
        try:
            info = os.lstat(full)
            if not stat.S_ISREG(info.st_mode):
                kept.append(path)
                continue
            if info.st_size > left_out.MAX_HASHED_BYTES:
                left.append(LeftOut(os.fsdecode(path), info.st_size, None, left_out.TOO_LARGE))
                continue
            with open(full, "rb") as file:
                head, reason = left_out.read_head(file)
                if reason is None and total + len(head) > left_out.MAX_TOTAL_BYTES:
                    reason = left_out.OVER_TOTAL
                if reason is None:
                    kept.append(path)
                    total += len(head)
                    continue
                size, sha256 = left_out.rest_digest(file, head)
        except OSError:  # gone or unreadable since git listed it: git would not store it either
            continue
        left.append(LeftOut(os.fsdecode(path), size, sha256, reason))
    return kept, left


def git_env() -> dict[str, str]:
    """The environment git runs in: this process's, without locks git may skip (a capture never
    writes the user's index) and with untranslated messages."""
    return {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}


def run_git(
    cwd: Path, env: dict[str, str], timeout_s: float, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        input=b"" if stdin is None else stdin,
        timeout=timeout_s,
        check=False,
    )


def read_config(config: str | os.PathLike[str] | IO[str] | IO[bytes]) -> ConfigFile:
    """Read a config file (a path or an open file): its text is stored with the run, unless it is
    binary or larger than `left_out.MAX_FILE_BYTES` (then the line that lists it is stored).

    The hash is always of the exact bytes, the whole file; the text is decoded as UTF-8,
    undecodable bytes replaced.
    """
    if not isinstance(config, (str, os.PathLike)):  # an open file
        if not hasattr(config, "read"):
            raise TypeError(f"configfile must be a path or an open file, not {type(config).__name__}")
        name = getattr(config, "name", None)
        config_file = _config_from(_BytesOf(config), name if isinstance(name, str) else None)
        if hasattr(config, "seek"):
            config.seek(0)
        return config_file
    path = Path(config)
    try:
        with path.open("rb") as file:
            return _config_from(file, os.fspath(config))
    except FileNotFoundError:
        raise FileNotFoundError(f"config file not found: {path.resolve()}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"config file is a directory: {path.resolve()}") from None


def _config_from(file: left_out.Readable, path: str | None) -> ConfigFile:
    head, reason = left_out.read_head(file)
    size, sha256 = left_out.rest_digest(file, head)
    if reason is None:
        return ConfigFile(path, sha256, _decode(head))
    listed = LeftOut(path or "", size, sha256, reason)
    return ConfigFile(path, sha256, listed.line(), listed)


class _BytesOf(io.RawIOBase):
    """An open config file, text or binary, read as bytes (text is encoded as UTF-8)."""

    def __init__(self, file: IO[str] | IO[bytes]) -> None:
        self._file = file
        self._pending = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._pending) < size:
            chunk = self._file.read(_CHUNK if size < 0 else max(size - len(self._pending), 1))
            if not chunk:
                break
            self._pending += _as_bytes(chunk)
        if size < 0:
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:size], self._pending[size:]
        return data


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
    # An argument that is not UTF-8 (a file name) arrives as lone surrogates, which no store holds.
    return _decode(os.fsencode(shlex.join(argv)))


MAX_CLI_DEPTH = 100  # dicts and lists inside one another in a `cli` (vars(args) is 1; a config tree ~10)


def cli_json(cli: dict[str, Any]) -> str:
    """The CLI dict as the JSON text stored with the run (and compared for uniqueness).

    JSON values are kept as they are (tuples become lists); any other object becomes its `str()` (a
    path its path, an enum member `Color.RED`) -- unless that text holds a memory address, which would
    differ at every start and so defeat the uniqueness check: that is a `TypeError` naming the key.
    Every text follows `values.check_text`.
    """
    if not isinstance(cli, dict):
        raise TypeError(f"cli must be a dict (e.g. vars(args)), got {type(cli).__name__}")
    return json.dumps(_plain(cli, "cli"))


def _plain(value: Any, where: str, within: tuple[int, ...] = ()) -> Any:
    """`value` as JSON types (see `cli_json`); `where` names it in errors, e.g. cli['model'];
    `within`, the ids of the dicts and lists it is inside: a cycle or a nesting deeper than
    `MAX_CLI_DEPTH` is a ValueError before the run starts, not a RecursionError."""
    if isinstance(value, (dict, list, tuple)):
        if id(value) in within:
            raise ValueError(f"{where} is a dict or list it is inside of (a cycle), which JSON cannot hold")
        if len(within) >= MAX_CLI_DEPTH:
            raise ValueError(f"cli holds dicts or lists nested more than {MAX_CLI_DEPTH} deep")
        within = (*within, id(value))
    if value is None or isinstance(value, (bool, int, float)):
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3321:
            raise ValueError(f"{where}: an integer of more than 1000 digits cannot be stored")
        return value
    if isinstance(value, str):
        return check_text(where, value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise TypeError(f"{where}: keys must be strings, got {type(key).__name__} {key!r}")
            name = key if isinstance(key, str) else json.dumps(key)
            out[check_text(f"a key of {where}", name)] = _plain(item, f"{where}[{name!r}]", within)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{where}[{index}]", within) for index, item in enumerate(value)]
    text = str(value)
    if _ADDRESS.search(text):
        raise TypeError(
            f"{where}: a {type(value).__name__} is stored as its text, but {text!r} holds a memory "
            "address that changes at every start (so no two runs would ever match); pass a value "
            "that names it, e.g. its class name or its settings"
        )
    return check_text(where, text)


def _as_bytes(chunk: str | bytes) -> bytes:
    return chunk.encode("utf-8") if isinstance(chunk, str) else chunk


def _decode(data: bytes) -> str:
    """Bytes as storable text: what is not UTF-8, and NUL (which PostgreSQL text cannot hold),
    become U+FFFD; the sha256 is taken of the exact bytes."""
    return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")

"""Git captures reused within a process while the checkout they describe has not changed.

Why: a sweep of runs in one process would run git for every run (two to six processes, 10-100 ms,
git's index refresh and untracked scan dominating) over the same tree. What a capture depends on
is a set of files whose status (`os.lstat`: times, size, inode) changes whenever they do: HEAD and
the ref it names, the packed refs, the index, git's config, ignore and attribute files, and in the
working tree every file and folder outside the ignored folders (a file created, deleted or renamed
changes its folder's status). A capture is kept with the status of each of them and reused while
every one is unchanged: looking costs one `lstat` a path, a fraction of a millisecond for a few
hundred files, where git costs milliseconds a process. So a sweep pays git once per change of the
tree, and gets exactly what git would have answered. Outside a repository (no `.git` in the folder
or above it), those `.git` paths are watched: one appearing is what would make one.

Not kept, so taken again by the next run:
- a capture git did not finish (a warning) or that failed;
- one where a watched path changed within `RACY_NS` before the capture began, or since: file times
  are coarse (a tick of the kernel's clock; seconds on some file systems), so a second change in
  the same tick could leave a status as it was -- git's own "racy git" problem, solved alike;
- a checkout holding another repository (a submodule, a nested clone: its state lives in files
  not watched here), one kept in reftable format, or one of more than `MAX_WATCHED` paths.
Not watched: files that git's config names by path (core.excludesFile and core.attributesFile
elsewhere than their defaults, included config files); a change to one of those alone is seen at
the next change of the tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tallyboard.run.capture import GitLimits, GitState, Repository, git_capture, git_env, run_git

RACY_NS = 2_000_000_000  # FAT's 2 s timestamps are the coarsest a checkout is likely to sit on
MAX_WATCHED = 20_000  # beyond this many paths, looking costs about what git does: not kept
# Environment variables that change what git answers (the others are set alike for every capture).
_GIT_SETTINGS = ("HOME", "XDG_CONFIG_HOME", "PATH")

Status = tuple[int, int, int, int, int, int] | None  # mode, inode, device, size, mtime, ctime (ns)


def status(path: str) -> Status:
    """What changes whenever `path` does (None: absent)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_mode, info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclass(frozen=True)
class _Kept:
    paths: tuple[str, ...]
    statuses: tuple[Status, ...]
    state: GitState


class GitCache:
    """The captures of this process, one per (folder, diff cap, git's environment). `clock` gives
    the wall time in nanoseconds, as file times are (tests move it on instead of waiting)."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        self._kept: dict[tuple[object, ...], _Kept] = {}

    def git_state(self, limits: GitLimits, cwd: str | os.PathLike[str] | None = None) -> GitState:
        """What `capture.git_state` answers for `cwd` (default: the process's folder) now."""
        where = os.fspath(cwd) if cwd is not None else os.getcwd()
        settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("GIT_") or k in _GIT_SETTINGS)
        key = (where, limits.max_diff_bytes, tuple(settings))
        kept = self._kept.get(key)
        if kept is not None and tuple(map(status, kept.paths)) == kept.statuses:
            return kept.state
        self._kept.pop(key, None)
        began = self._clock()
        state, repository = git_capture(where, limits.timeout_s, limits.max_diff_bytes)
        paths: tuple[str, ...] | None = None
        if repository is not None and state.diff is not None and state.warning is None:
            paths = _watched(repository, limits.timeout_s)
        elif state == GitState(None, None) and shutil.which("git") is not None:
            paths = _outside(where)  # not in a repository: so it stays while no `.git` appears
        if paths is not None:
            statuses = tuple(map(status, paths))
            if not _racy(statuses, began - RACY_NS) and not _racy(statuses, self._clock() - RACY_NS):
                self._kept[key] = _Kept(paths, statuses, state)
        return state


def _racy(statuses: Iterable[Status], since_ns: int) -> bool:
    return any(s is not None and max(s[4], s[5]) >= since_ns for s in statuses)


def _watched(repository: Repository, timeout_s: float) -> tuple[str, ...] | None:
    """Every path whose status a capture of `repository` depends on; None when that cannot be
    known from statuses (see the module's notes)."""
    if (repository.common_dir / "reftable").exists():
        return None
    try:
        ignored = run_git(
            repository.root, git_env(), timeout_s,
            "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory",
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if ignored.returncode != 0:
        return None
    skipped = {os.fsdecode(p).rstrip("/") for p in ignored.stdout.split(b"\0") if p}
    tree = _tree(str(repository.root), skipped)
    if tree is None:
        return None
    return (*_git_files(repository), *tree)


def _outside(where: str) -> tuple[str, ...] | None:
    """What git looks for to find the repository of `where` (a `.git` in it or in a folder above),
    and `where` itself; None unless every such `.git` is absent (git answered nothing for another
    reason: an unreadable repository, one of another owner, a folder inside `.git`)."""
    folder = Path(where).absolute()
    found = tuple(os.fspath(above / ".git") for above in (folder, *folder.parents))
    return None if any(map(os.path.lexists, found)) else (os.fspath(folder), *found)


def _git_files(repository: Repository) -> list[str]:
    """Git's own files a capture reads: HEAD, the ref it names, the refs and index, the config,
    ignore and attribute files of the repository and of the user and system."""
    git_dir, common = repository.git_dir, repository.common_dir
    paths = [git_dir / "HEAD", repository.index, common / "packed-refs", common / "config"]
    paths += [git_dir / "config.worktree", common / "info" / "exclude", common / "info" / "attributes"]
    try:
        head = (git_dir / "HEAD").read_text(errors="replace")
    except OSError:
        head = ""
    if head.startswith("ref: "):
        ref = head[5:].strip()
        paths += [git_dir / ref, common / ref]
    home = Path(os.environ.get("HOME") or os.path.expanduser("~"))
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "git"
    paths += [home / ".gitconfig", config / "config", config / "ignore", config / "attributes"]
    paths += [
        Path("/etc/gitconfig"),
        *(Path(os.environ[name]) for name in _CONFIG_VARIABLES if os.environ.get(name)),
    ]
    return [os.fspath(path) for path in paths]


_CONFIG_VARIABLES = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM")


def _tree(root: str, skipped: set[str]) -> list[str] | None:
    """Every folder and file under `root` but its `.git` and the `skipped` paths (relative to
    `root`: what git ignores); None when a folder holds another repository, or past `MAX_WATCHED`."""
    found: list[str] = []
    folders = [""]
    while folders:
        folder = folders.pop()
        found.append(os.path.join(root, folder))
        try:
            entries = list(os.scandir(os.path.join(root, folder)))
        except OSError:
            continue  # gone or unreadable: its own status says so
        for entry in entries:
            relative = os.path.join(folder, entry.name) if folder else entry.name
            if entry.name == ".git":
                if folder:
                    return None  # a submodule or a nested repository
                continue
            if relative in skipped:
                continue
            if entry.is_dir(follow_symlinks=False):
                folders.append(relative)
            else:
                found.append(entry.path)
        if len(found) > MAX_WATCHED:
            return None
    return found


# The captures of this process (`run/start.py` asks it for every run).
CAPTURES = GitCache()

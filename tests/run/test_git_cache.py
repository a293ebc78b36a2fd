"""git_cache: a capture reused while the checkout is unchanged, taken again on every change git sees."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from run.test_capture import git
from tallyboard.run.capture import GitLimits, git_state
from tallyboard.run.git_cache import RACY_NS, GitCache

LIMITS = GitLimits()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "model").mkdir(parents=True)
    (root / "empty").mkdir()
    git(root, "init", "-q")
    (root / "train.py").write_text("lr = 0.1\n")
    (root / "model" / "net.py").write_text("layers = 4\n")
    (root / ".gitignore").write_text("*.ckpt\nbuild/\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    (root / "notes.txt").write_text("untracked\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(b"ignored")
    return root


@pytest.fixture
def git_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Put a `git` first on PATH that notes each call, then runs the real one; the calls so far."""
    real = shutil.which("git")
    log = tmp_path / "git-calls"
    log.write_text("")
    folder = tmp_path / "counting-bin"
    folder.mkdir()
    wrapper = folder / "git"
    wrapper.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n    f.write(' '.join(sys.argv[1:2]) + '\\n')\n"
        f"os.execv({real!r}, [{real!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return lambda: len(log.read_text().splitlines())


def later() -> int:
    """A clock past the racy window of everything the test wrote (instead of waiting for it)."""
    return time.time_ns() + 2 * RACY_NS


def test_an_unchanged_checkout_is_answered_without_git_and_as_git_answers(repo, git_calls) -> None:
    cache = GitCache(clock=later)
    first = cache.git_state(LIMITS, repo)
    calls = git_calls()
    assert [cache.git_state(LIMITS, repo) for _ in range(3)] == [first] * 3
    assert git_calls() == calls
    assert first == git_state(repo) and "+untracked" in first.diff


def write_same_size(repo: Path) -> None:
    """Only its times say it changed, so they move by whole seconds: git compares seconds, and a
    rewrite within the second git last saw the file is one git itself may miss."""
    path = repo / "train.py"
    seen = path.stat().st_mtime_ns
    path.write_text("lr = 0.2\n")
    os.utime(path, ns=(seen + 3_000_000_000, seen + 3_000_000_000))


def switch_to_a_new_branch(repo: Path) -> None:
    side = git(repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "side")
    git(repo, "branch", "side", side)
    git(repo, "checkout", "-q", "side")


CHANGES: dict[str, Callable[[Path], object]] = {
    "a tracked file rewritten": write_same_size,
    "a tracked file deleted": lambda repo: (repo / "model" / "net.py").unlink(),
    "an untracked file changed": lambda repo: (repo / "notes.txt").write_text("changed\n"),
    "a new untracked file": lambda repo: (repo / "model" / "new.py").write_text("x = 1\n"),
    "a file in an empty folder": lambda repo: (repo / "empty" / "a.py").write_text("a = 1\n"),
    "a new untracked folder": lambda repo: (
        (repo / "data").mkdir() or (repo / "data" / "d.txt").write_text("d\n")
    ),
    "a staged change": lambda repo: write_same_size(repo) or git(repo, "add", "train.py"),
    "a commit": lambda repo: git(repo, "commit", "-q", "--allow-empty", "-m", "second"),
    "another branch checked out": lambda repo: switch_to_a_new_branch(repo),
    "the ignore file": lambda repo: (repo / ".gitignore").write_text("*.ckpt\n"),
    "the repository's excludes": lambda repo: (repo / ".git" / "info" / "exclude").write_text("notes.txt\n"),
    "git's config": lambda repo: git(repo, "config", "diff.noprefix", "true"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_change_git_sees_is_captured_again(repo, change: str) -> None:
    cache = GitCache(clock=later)
    before = cache.git_state(LIMITS, repo)
    CHANGES[change](repo)
    after = cache.git_state(LIMITS, repo)
    assert after == git_state(repo)
    assert after != before


def test_a_capture_of_a_tree_changed_within_the_racy_window_is_not_kept(repo, git_calls) -> None:
    cache = GitCache()  # the real clock: the fixture wrote the tree just now
    cache.git_state(LIMITS, repo)
    calls = git_calls()
    cache.git_state(LIMITS, repo)
    assert git_calls() > calls


def test_a_checkout_holding_another_repository_is_captured_every_time(repo, git_calls) -> None:
    git(repo / "model", "init", "-q")  # a nested clone: its own state is not in the watched files
    cache = GitCache(clock=later)
    cache.git_state(LIMITS, repo)
    calls = git_calls()
    cache.git_state(LIMITS, repo)
    assert git_calls() > calls


def test_another_folder_or_diff_cap_is_another_capture(repo, git_calls) -> None:
    cache = GitCache(clock=later)
    whole = cache.git_state(LIMITS, repo)
    capped = cache.git_state(GitLimits(max_diff_bytes=0), repo)
    assert capped == git_state(repo, max_diff_bytes=0) != whole
    assert cache.git_state(LIMITS, repo / "model") == whole  # the same repository from below


def test_outside_a_repository_git_is_asked_again_only_once_a_git_folder_appears(tmp_path, git_calls) -> None:
    folder = tmp_path / "plain" / "sub"
    folder.mkdir(parents=True)
    cache = GitCache(clock=later)
    outside = git_state(folder)
    assert cache.git_state(LIMITS, folder) == outside
    calls = git_calls()
    assert [cache.git_state(LIMITS, folder) for _ in range(3)] == [outside] * 3
    assert git_calls() == calls
    git(tmp_path / "plain", "init", "-q")
    (folder / "a.py").write_text("a = 1\n")
    assert cache.git_state(LIMITS, folder) == git_state(folder)
    assert "+a = 1" in cache.git_state(LIMITS, folder).diff

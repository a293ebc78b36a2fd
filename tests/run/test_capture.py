"""capture: git state from real repositories, config files and the command line."""

import hashlib
import io
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

import tallyboard as tb
from tallyboard.run import capture, left_out
from tallyboard.run.capture import command_line, file_hash, git_state, read_config


def git(repo, *args):
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "train.py").write_text("lr = 0.1\n")
    (root / ".gitignore").write_text("*.ckpt\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_clean_repository_has_commit_and_empty_diff(repo):
    state = git_state(repo)
    assert state.commit == git(repo, "rev-parse", "HEAD")
    assert len(state.commit) == 40
    assert state.diff == ""


def test_diff_has_modified_and_untracked_files_but_not_ignored_ones(repo):
    (repo / "train.py").write_text("lr = 0.3\n")
    (repo / "model").mkdir()
    (repo / "model" / "net.py").write_text("layers = 4\n")
    (repo / "weights.ckpt").write_text("do not store me\n")
    diff = git_state(repo).diff
    assert "-lr = 0.1" in diff and "+lr = 0.3" in diff
    assert "+++ b/model/net.py" in diff and "+layers = 4" in diff
    assert "weights.ckpt" not in diff and "do not store me" not in diff


def test_diff_applies_back_onto_the_commit(repo, tmp_path):
    (repo / "train.py").write_text("lr = 0.3\nepochs = 2\n")
    (repo / "extra.txt").write_text("new file\n")
    state = git_state(repo)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "checkout", "-q", state.commit)
    subprocess.run(["git", "apply"], cwd=clone, input=state.diff, text=True, check=True)
    assert (clone / "train.py").read_text() == "lr = 0.3\nepochs = 2\n"
    assert (clone / "extra.txt").read_text() == "new file\n"


def test_users_index_is_left_untouched(repo):
    (repo / "untracked.py").write_text("x = 1\n")
    (repo / "staged.py").write_text("y = 2\n")
    git(repo, "add", "staged.py")
    before = git(repo, "status", "--porcelain")
    index_before = (repo / ".git" / "index").read_bytes()
    assert "untracked.py" in git_state(repo).diff
    assert git(repo, "status", "--porcelain") == before
    assert (repo / ".git" / "index").read_bytes() == index_before


def test_state_from_a_subdirectory_covers_the_whole_repository(repo):
    (repo / "sub").mkdir()
    (repo / "train.py").write_text("lr = 1\n")
    state = git_state(repo / "sub")
    assert state.commit == git(repo, "rev-parse", "HEAD")
    assert "+lr = 1" in state.diff


def test_repository_without_commits_diffs_against_nothing(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("print(1)\n")
    state = git_state(tmp_path)
    assert state.commit is None
    assert "+++ b/a.py" in state.diff and "+print(1)" in state.diff


def test_default_cwd_is_the_process_directory(repo, monkeypatch):
    monkeypatch.chdir(repo)
    assert git_state().commit == git(repo, "rev-parse", "HEAD")


def test_not_a_repository_gives_none(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    state = git_state(tmp_path)
    assert state.commit is None and state.diff is None


def test_missing_directory_gives_none(tmp_path):
    state = git_state(tmp_path / "gone")
    assert state.commit is None and state.diff is None


def test_missing_git_binary_gives_none(repo, tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    state = git_state(repo)
    assert state.commit is None and state.diff is None


def test_hanging_git_is_cut_off_by_the_timeout(repo, tmp_path, monkeypatch):
    bin_dir = tmp_path / "hanging-bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    state = git_state(repo, timeout_s=0.2)
    assert state.commit is None and state.diff is None


def test_read_config_keeps_path_hash_and_content(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes("lr: 0.1\nname: café\n".encode())
    config = read_config(path)
    assert config.path == str(path)
    assert config.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert config.content == "lr: 0.1\nname: café\n"
    assert read_config(str(path)) == config


def test_read_config_from_an_open_file_rewinds_it(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"lr": 0.1}')
    with open(path) as handle:
        config = read_config(handle)
        assert handle.read() == '{"lr": 0.1}'
    assert config.path == str(path)
    assert config.content == '{"lr": 0.1}'
    assert config.sha256 == file_hash(path)
    in_memory = read_config(io.StringIO('{"lr": 0.1}'))
    assert in_memory.path is None and in_memory.sha256 == config.sha256


def test_read_config_hashes_exact_bytes_even_when_not_utf8(tmp_path):
    path = tmp_path / "latin1.cfg"
    path.write_bytes(b"name=caf\xe9\n")
    config = read_config(path)
    assert config.sha256 == hashlib.sha256(b"name=caf\xe9\n").hexdigest()
    assert config.content == "name=caf\ufffd\n"


def test_missing_config_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"config file not found: .*nope\.yaml"):
        read_config(tmp_path / "nope.yaml")
    with pytest.raises(IsADirectoryError, match="config file is a directory"):
        read_config(tmp_path)


def test_file_hash_of_path_and_file_objects(tmp_path):
    path = tmp_path / "big.bin"
    data = os.urandom(300_000)
    path.write_bytes(data)
    expected = hashlib.sha256(data).hexdigest()
    assert file_hash(path) == expected == file_hash(str(path))
    with open(path, "rb") as handle:
        assert file_hash(handle) == expected
        assert handle.tell() == 0


def test_command_line_is_the_quoted_command_of_the_process():
    code = "from tallyboard.run.capture import command_line; print(command_line())"
    argv = [sys.executable, "-c", code, "it's", "a b"]
    output = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    assert shlex.split(output) == argv


def test_command_line_in_this_process_starts_with_the_interpreter_command():
    assert shlex.split(command_line()) == sys.orig_argv


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_untracked_files_enter_the_diff_only_when_small_text_and_the_others_are_listed(repo, tmp_path):
    big = b"x,y\n" * (left_out.MAX_FILE_BYTES // 4 + 1)  # a CSV just over the cap
    binary = b"\x89PNG\r\n\x1a\n\0\0" + os.urandom(100)
    (repo / "data.csv").write_bytes(big)
    (repo / "weird name é.bin").write_bytes(binary)
    (repo / "notes.txt").write_text("small text\n")
    state = git_state(repo)
    assert "+small text" in state.diff
    assert "x,y" not in state.diff and "PNG" not in state.diff
    assert len(state.diff) < 2_000  # the diff lists, it does not carry
    listed = {(e.path, e.size, e.sha256, e.reason) for e in left_out.parse(state.diff)}
    assert listed == {
        ("data.csv", len(big), sha256(big), left_out.TOO_LARGE),
        ("weird name é.bin", len(binary), sha256(binary), left_out.BINARY),
    }
    assert set(left_out.parse(state.diff)) == set(state.left_out)
    clone = tmp_path / "clone"  # the listed lines do not stop the diff from applying
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    subprocess.run(["git", "apply"], cwd=clone, input=state.diff, text=True, check=True)
    assert (clone / "notes.txt").read_text() == "small text\n" and not (clone / "data.csv").exists()


def test_untracked_text_stops_entering_the_diff_at_the_total_cap(repo):
    size = left_out.MAX_FILE_BYTES - 10
    fit = left_out.MAX_TOTAL_BYTES // size
    for index in range(fit + 2):
        (repo / f"part{index:02d}.txt").write_text("a\n" * (size // 2))
    state = git_state(repo)
    assert [e.path for e in state.left_out] == [f"part{index:02d}.txt" for index in (fit, fit + 1)]
    assert {e.reason for e in state.left_out} == {left_out.OVER_TOTAL}
    assert state.diff.count("diff --git") == fit


def test_a_binary_or_large_config_is_hashed_whole_and_listed_instead_of_stored(tmp_path):
    binary = tmp_path / "model.pt"
    binary.write_bytes(b"\0\1\2" * 1000)
    config = read_config(binary)
    assert config.sha256 == file_hash(binary)
    assert config.left_out == left_out.LeftOut(str(binary), 3000, config.sha256, left_out.BINARY)
    assert left_out.listed_config(config.content) == config.left_out
    large = "lr: 0.1\n" * (left_out.MAX_FILE_BYTES // 8 + 1)
    with io.StringIO(large) as handle:  # an open text file: same rule, and rewound
        config = read_config(handle)
        assert handle.read() == large
    assert config.sha256 == sha256(large.encode())
    assert (config.left_out.size, config.left_out.reason) == (len(large), left_out.TOO_LARGE)
    small = read_config(io.StringIO("lr: 0.1\n"))
    assert (small.content, small.left_out) == ("lr: 0.1\n", None)
    assert left_out.listed_config(small.content) is None


def test_files_too_large_to_hash_quickly_are_listed_without_a_sha256(repo, monkeypatch):
    monkeypatch.setattr(left_out, "MAX_HASHED_BYTES", left_out.MAX_FILE_BYTES * 2)
    (repo / "huge.bin").write_bytes(b"a" * (left_out.MAX_FILE_BYTES * 2 + 1))
    (entry,) = git_state(repo).left_out
    assert (entry.path, entry.size, entry.sha256, entry.reason) == (
        "huge.bin", left_out.MAX_FILE_BYTES * 2 + 1, None, left_out.TOO_LARGE,
    )  # fmt: skip


def rewritten(path, lines, seed):
    """Fill `path` with `lines` lines that share nothing with another seed's: a diff twice its size."""
    path.write_text("".join(f"{seed} {index} {index * 7919 % 1000003}\n" for index in range(lines)))


def test_a_same_size_rewrite_as_new_as_the_index_is_in_the_diff_with_untracked_files(repo):
    """Git trusts a file's cached stat unless the file is as new as the index ("racily clean"): the
    copy of the index that marks untracked files must keep the index's times, or a file rewritten
    at the same size within the second of the last commit is missing from the stored diff (seen in
    CI). Made deterministic: the file and the index get one old mtime, ctime is not trusted."""
    git(repo, "config", "core.trustctime", "false")
    path, old = repo / "params.txt", time.time_ns() - 10 * 10**9
    path.write_text("lr = 0.1\n")
    os.utime(path, ns=(old, old))  # older than the index git writes next: its entry is not smudged
    git(repo, "add", "params.txt")
    git(repo, "commit", "-q", "-m", "params")
    path.write_text("lr = 0.2\n")  # the same size, and the same mtime as the entry
    os.utime(path, ns=(old, old))
    os.utime(repo / ".git" / "index", ns=(old, old))  # as if all happened in one second
    assert git(repo, "diff", "--name-only") == "params.txt"  # git itself sees it: racily clean
    (repo / "extra.py").write_text("new = True\n")  # untracked: the index is copied to mark it
    diff = git_state(repo, timeout_s=300).diff
    assert "+lr = 0.2" in diff and "+new = True" in diff


def test_a_diff_over_the_cap_keeps_whole_files_smallest_first_and_lists_the_others(repo, tmp_path):
    """A data file kept in git and rewritten would make the diff megabytes; the training script's
    change, and files named like glob patterns, still fit whole, and what is stored still applies."""
    rewritten(repo / "data.txt", 20_000, "old")
    (repo / "a[1]*.txt").write_text("one\n")
    (repo / "#notes.md").write_text("first\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "data")
    rewritten(repo / "data.txt", 20_000, "new")
    (repo / "train.py").write_text("lr = 0.3\n")
    (repo / "a[1]*.txt").write_text("two\n")
    (repo / "#notes.md").write_text("second\n")
    (repo / "extra.py").write_text("new = True\n")  # untracked: in the diff, and under the cap too
    whole = git(repo, "diff")
    assert len(whole) > 500_000
    # a bound no loaded machine reaches: the timeout case (a run keeps no diff) is tested apart
    state = git_state(repo, timeout_s=300, max_diff_bytes=100_000)
    assert state.warning is None
    data = (repo / "data.txt").read_bytes()
    reason = left_out.past_the_cap(100_000)
    assert reason == "its changes are past the 100,000-byte cap on the stored git diff"
    assert state.left_out == (left_out.LeftOut("data.txt", len(data), sha256(data), reason),)
    assert left_out.parse(state.diff) == list(state.left_out)
    assert len(state.diff.encode()) < 100_000 and "new 0 " not in state.diff
    assert state.diff.count("diff --git") == 4
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    subprocess.run(["git", "apply"], cwd=clone, input=state.diff, text=True, check=True)
    for name, text in [("train.py", "lr = 0.3\n"), ("a[1]*.txt", "two\n"), ("#notes.md", "second\n"),
                       ("extra.py", "new = True\n")]:  # fmt: skip
        assert (clone / name).read_text() == text


def test_a_cap_of_zero_lists_every_change_a_deleted_file_with_size_zero(repo):
    (repo / "train.py").unlink()
    (repo / "new.py").write_text("x = 1\n")
    state = git_state(repo, max_diff_bytes=0)
    reason = left_out.past_the_cap(0)
    assert set(state.left_out) == {
        left_out.LeftOut("train.py", 0, None, reason),
        left_out.LeftOut("new.py", 6, sha256(b"x = 1\n"), reason),
    }
    assert "diff --git" not in state.diff


def test_new_run_stores_at_most_10_mb_of_a_huge_diff_and_get_left_out_lists_the_rest(
    repo, tmp_path, monkeypatch
):
    """The default cap, through the table: a 6 MB data file rewritten makes a 12 MB diff."""
    rewritten(repo / "data.txt", 300_000, "old")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "data")
    rewritten(repo / "data.txt", 300_000, "new")
    (repo / "train.py").write_text("lr = 0.3\n")
    size = (repo / "data.txt").stat().st_size
    monkeypatch.chdir(repo)
    with tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP) as table:
        assert table.git_limits.max_diff_bytes == capture.MAX_DIFF_BYTES == 10 * 1024 * 1024
        run = table.new_run("huge diff", auto_log_plt=False, environment=False)
        run.close()
        row = table.get_experiment_raw(run.run_id)
        assert row["git_commit"] == git(repo, "rev-parse", "HEAD")
        assert "+lr = 0.3" in row["git_diff"] and len(row["git_diff"]) < 2_000
        (entry,) = table.get_left_out(run.run_id)
    assert (entry["source"], entry["path"], entry["size"]) == ("git", "data.txt", size)
    assert entry["reason"] == "its changes are past the 10 MB cap on the stored git diff"


def test_the_cap_is_max_diff_bytes_else_the_environment_else_10_mb(tmp_path, monkeypatch):
    monkeypatch.delenv(capture.MAX_DIFF_ENV, raising=False)
    assert capture.diff_cap(None) == capture.MAX_DIFF_BYTES
    monkeypatch.setenv(capture.MAX_DIFF_ENV, "2048")
    assert capture.diff_cap(None) == 2048 and capture.diff_cap(0) == 0
    with tb.ResultTable(tmp_path / "a.db") as table:
        assert table.git_limits == capture.GitLimits(capture.GIT_TIMEOUT_S, 2048)
    with tb.ResultTable(tmp_path / "b.db", max_diff_bytes=100, git_timeout=2.5) as table:
        assert table.git_limits == capture.GitLimits(2.5, 100)
    monkeypatch.setenv(capture.MAX_DIFF_ENV, "10MB")
    with pytest.raises(ValueError, match=r"\$TALLYBOARD_MAX_DIFF_BYTES must be a number of bytes, got '10MB"):
        tb.ResultTable(tmp_path / "c.db")
    for wrong in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_diff_bytes must be a number of bytes"):
            tb.ResultTable(tmp_path / "d.db", max_diff_bytes=wrong)
    with pytest.raises(ValueError, match="git_timeout must be a number of seconds above 0"):
        tb.ResultTable(tmp_path / "e.db", git_timeout=0)


def slow_git(tmp_path, monkeypatch, subcommand):
    """Put a `git` first on PATH that runs the real one, except that `subcommand` hangs first."""
    real = shutil.which("git")
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(
        f"#!{sys.executable}\nimport os, sys, time\n"
        f"if sys.argv[1:2] == [{subcommand!r}]:\n    time.sleep(60)\n"
        f"os.execv({real!r}, [{real!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_git_diff_past_the_timeout_leaves_the_commit_and_new_run_warns_what_is_missing(
    repo, tmp_path, monkeypatch
):
    """A bound the real `git rev-parse` (started through the Python wrapper) meets on a loaded machine."""
    head = git(repo, "rev-parse", "HEAD")
    (repo / "train.py").write_text("lr = 0.3\n")
    slow_git(tmp_path, monkeypatch, "diff")
    state = git_state(repo, timeout_s=2.5)
    assert (state.commit, state.diff) == (head, None)
    assert state.warning == (
        f"tallyboard: `git diff` did not finish within 2.5 s in {repo}: the run records commit {head} but no "
        "git diff, so it may not be reproducible from what it stored"
    )
    monkeypatch.chdir(repo)
    with tb.ResultTable(tmp_path / "results.db", git_timeout=2.5) as table:
        with pytest.warns(RuntimeWarning, match=r"`git diff` did not finish within 2.5 s") as caught:
            run = table.new_run("slow git", auto_log_plt=False, environment=False)
        run.close()
        row = table.get_experiment_raw(run.run_id)
    assert caught[0].filename == __file__  # at the new_run line
    assert (row["git_commit"], row["git_diff"]) == (head, None)


def test_a_git_that_hangs_from_the_start_is_a_warning_that_the_run_has_no_commit(repo, tmp_path, monkeypatch):
    slow_git(tmp_path, monkeypatch, "rev-parse")
    state = git_state(repo, timeout_s=0.3)
    assert (state.commit, state.diff) == (None, None)
    assert "`git rev-parse` did not finish within 0.3 s" in state.warning
    assert "the run records no git commit and no git diff" in state.warning

"""A location logging could not write is refused at `ResultTable(...)`, with a message naming it,
instead of a table that opens and a writer thread whose every commit fails later."""

import os
import pwd
import shutil
import stat
import tempfile
import traceback

import pytest

import tallyboard as tb


def test_a_folder_that_does_not_exist_is_refused_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"the folder .*missing. does not exist"):
        tb.ResultTable(str(tmp_path / "missing" / "results.db"))


def test_a_folder_given_as_the_table_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a folder"):
        tb.ResultTable(str(tmp_path))


def as_unprivileged_user(check) -> None:
    """Run `check` in a forked child that is not root (root may write anywhere), and fail if it does."""
    nobody = pwd.getpwnam("nobody")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if os.geteuid() == 0:
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            check()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_folder_or_table_file_we_may_not_write_is_refused(what):
    outer = tempfile.mkdtemp(prefix="tallyboard-ro-")
    try:
        os.chmod(outer, 0o755)
        folder = os.path.join(outer, "tables")
        os.mkdir(folder)
        path = os.path.join(folder, "results.db")
        tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP).close()
        read_only = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
        os.chmod(path, read_only | (0 if what == "file" else stat.S_IWOTH))
        os.chmod(
            folder,
            read_only | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | (stat.S_IWOTH if what == "file" else 0),
        )

        def refused() -> None:
            with pytest.raises(PermissionError, match=f"may not write to the {what}"):
                tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)

        as_unprivileged_user(refused)
    finally:
        for root, dirs, files in os.walk(outer):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o700)
        shutil.rmtree(outer)

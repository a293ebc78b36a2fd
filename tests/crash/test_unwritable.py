"""A database that can no longer take writes (a file system turned read-only by an I/O error, the
file deleted) must not hold a training loop for good: the next logging call raises
`DatabaseUnwritable` within `GIVE_UP_AFTER` plus a back-off, and what was committed stays.

The read-only case is the real fault: an ext4 image mounted with `errors=remount-ro`, turned
read-only by the kernel's own error path (`trigger_fs_error`), as a failing disk would. It needs
root and a loop device, which CI has."""

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from tallyboard.run.sink import GIVE_UP_AFTER, MAX_BACKOFF
from tallyboard.store.points_view import materialise

SCRIPT = textwrap.dedent("""
    import sys, time
    import tallyboard as tb
    from tallyboard.errors import DatabaseUnwritable
    table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("r")
    step = 0
    for step in range(2000):
        run.add_scalar("loss", float(step), step=step)
    run.flush()
    print("ready", flush=True)
    sys.stdin.readline()  # the test breaks the database now
    broken = time.monotonic()
    try:
        while True:
            step += 1
            run.add_scalar("loss", float(step), step=step)
            time.sleep(0.0001)
    except DatabaseUnwritable as error:
        print(f"{time.monotonic() - broken:.2f}", flush=True)
        print(error, file=sys.stderr)
    try:
        run.close()
    except DatabaseUnwritable:
        print("close raised", flush=True)
""")
BOUND = GIVE_UP_AFTER + 2 * MAX_BACKOFF + 5.0  # give up, the back-off in flight, a loaded machine


def run_until_broken(db: str, breaks) -> tuple[float, str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, db],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline() == "ready\n", proc.stderr.read()
    breaks()
    proc.stdin.write("\n")
    proc.stdin.flush()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    seconds, closed = out.split("\n")[:2]
    return float(seconds), closed, err


def committed_steps(db: str, copy_to: str) -> list[int]:
    """The steps committed in `db`, read from a copy with its WAL (a read-only file system lets no
    reader make the WAL index)."""
    for end in ("", "-wal"):
        if os.path.exists(db + end):
            shutil.copyfile(db + end, copy_to + end)
    conn = sqlite3.connect(copy_to)
    try:
        materialise(conn)
        return [step for (step,) in conn.execute("SELECT step FROM scalar_points ORDER BY step")]
    finally:
        conn.close()


def test_a_deleted_file_is_noticed_and_the_next_call_raises(tmp_path):
    db = str(tmp_path / "results.db")
    seconds, closed, err = run_until_broken(db, lambda: [os.remove(db + end) for end in ("", "-wal", "-shm")])
    assert seconds <= BOUND
    assert closed == "close raised"
    assert "was deleted while runs were logging to it" in err


@pytest.fixture
def ext4_remount_ro(tmp_path):
    """A file system of its own that the kernel turns read-only on an error (errors=remount-ro)."""
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the read-only file system test: it needs root and mkfs.ext4")
        pytest.skip("needs root and mkfs.ext4 for a loop-mounted file system")
    image, mount = tmp_path / "fs.img", tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(mount)], check=True)
    found = subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(mount)], capture_output=True, text=True)
    device = os.path.basename(found.stdout.strip())
    try:
        yield str(mount), f"/sys/fs/ext4/{device}/trigger_fs_error"
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_file_system_turned_read_only_makes_the_next_call_raise_and_keeps_what_was_committed(
    ext4_remount_ro, tmp_path
):
    mount, trigger = ext4_remount_ro
    db = os.path.join(mount, "results.db")

    def fail_the_disk():
        with open(trigger, "w") as control:
            control.write("tallyboard test\n")

    seconds, closed, err = run_until_broken(db, fail_the_disk)
    assert GIVE_UP_AFTER <= seconds <= BOUND  # an admin's quick remount is ridden out first
    assert closed == "close raised"
    assert "can no longer write" in err
    steps = committed_steps(db, str(tmp_path / "copy.db"))
    assert steps[:2000] == list(range(2000))  # flushed before the fault: all there, in order
    assert steps == list(range(len(steps)))

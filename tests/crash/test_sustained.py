"""Logging as fast as the training thread can, in a fresh process: the queue's memory stays under its
bound, no single call waits long, and what `os._exit` loses stays within the loss window.
(`python bench/table.py --only-sustained` is the long version: 10M scalars over 100 tags.)
"""

import sqlite3
import subprocess
import sys
import textwrap
import time

from tallyboard.run.sink import MAX_QUEUE_BYTES
from tallyboard.store import open_store

LOSS_WINDOW, KILL_LATENCY = 1.0, 0.25  # as in test_crash_matrix.py
# Besides the queue, a process logging hard grows by the allocator's slack and the store's caches.
RSS_SLACK = 32 * 2**20
LONGEST_CALL = 2.0  # about one commit (0.2 s of work) on a loaded 2-core box, with room to spare

CHILD = """
import os, sys, time
import tallyboard as tb
table = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run("sustained", auto_log_plt=False)
tags = [f"train/m{i}" for i in range(int(sys.argv[2]))]
text = "x" * int(sys.argv[4])
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
for tag in tags:
    run.add_scalar(tag, 0.0, step=0, walltime=time.time())
run.add_text(text, step=0, tag="log")
run.flush()
base, longest, step, start = rss(), 0.0, 1, time.time()
print("ready", flush=True)
while time.time() - start < float(sys.argv[3]):
    now = time.time()
    for tag in tags:
        run.add_scalar(tag, float(step), step=step, walltime=now)
    if step % int(sys.argv[5]) == 0:
        run.add_text(text, step=step, tag="log")
    took = time.time() - now
    longest = max(longest, took)
    step += 1
with open("/proc/self/status") as status:  # VmHWM: this process's peak (ru_maxrss spans the exec)
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
print(time.time(), step, longest, peak - base, flush=True)
if sys.argv[6] == "close":
    run.close()
else:
    os._exit(0)
"""


def run_child(db_url, tags, seconds, text_bytes, text_every, end, while_ready=None):
    args = [db_url, str(tags), str(seconds), str(text_bytes), str(text_every), end]
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "ready\n", proc.stderr.read()
    if while_ready is not None:
        while_ready()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    exited, steps, longest, growth = out.split()
    return float(exited), int(steps), float(longest), int(growth)


def test_a_hundred_tags_at_full_speed_stay_in_the_bounds(db_url):
    exited, _, longest, growth = run_child(db_url, 100, 4, 10_000, 10, "exit")
    store = open_store(db_url)
    try:
        (run,) = store.runs()
        last = 0.0
        for i in range(100):
            rows = store.scalars(run.run_id, f"train/m{i}", columns=("step", "walltime_ms"))
            assert [step for step, _ in rows] == list(range(len(rows)))  # a gapless prefix
            last = max(last, rows[-1][1] / 1000)
    finally:
        store.close()
    assert exited - last <= LOSS_WINDOW + KILL_LATENCY, f"os._exit lost the last {exited - last:.2f} s"
    assert growth <= MAX_QUEUE_BYTES + RSS_SLACK, f"grew {growth / 2**20:.0f} MB"
    assert longest <= LONGEST_CALL, f"one round of calls waited {longest:.2f} s"


def test_texts_logged_while_the_database_is_write_locked_wait_within_the_bound(tmp_path):
    """The database is locked by another process for 5 s: 64 kB texts queue up to the bound, then
    the calls wait; memory stays bounded and every text logged arrives once the lock is gone."""
    path = str(tmp_path / "locked.db")

    def lock_for_a_while():
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        time.sleep(5)
        blocker.execute("COMMIT")
        blocker.close()

    _, steps, _, growth = run_child(path, 1, 8, 64_000, 500, "close", while_ready=lock_for_a_while)
    assert growth <= MAX_QUEUE_BYTES + RSS_SLACK, f"grew {growth / 2**20:.0f} MB"
    conn = sqlite3.connect(path)
    texts, scalars = conn.execute(
        "SELECT (SELECT COUNT(*) FROM texts), (SELECT COALESCE(SUM(n), 0) FROM scalar_blocks)"
    ).fetchone()
    conn.close()
    assert (texts, scalars) == (1 + (steps - 1) // 500, steps)

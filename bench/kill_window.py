"""What SIGKILL costs, in every trial: the seconds of logging lost when a training process is
killed at a random moment (issue: the SIGKILL window, promise <= 1.0 s).

Per trial: a fresh SQLite file, a child that logs one series as fast as it can with
`walltime=time.time()` on every row, killed after a random 1-3 s. Lost is the kill's time minus
the wall time of the last committed row. Printed: each trial's loss, then the median, the maximum
and how many trials exceeded the promise. The kill's own latency on a loaded machine is part of
the figure (nothing is subtracted).

    python bench/kill_window.py [--trials 50]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from tallyboard.store.block_codec import unpack_deltas

PROMISE = 1.0
CHILD = textwrap.dedent("""
    import sys, time
    import tallyboard as tb
    run = tb.ResultTable(sys.argv[1], nocommit_action=tb.NoCommitAction.NOP).new_run("killed")
    print("ready", flush=True)
    step = 0
    while True:
        for _ in range(200):
            run.add_scalar("loss", float(step), step=step, walltime=time.time())
            step += 1
""")


def trial(folder: Path, index: int) -> float:
    db = str(folder / f"t{index}.db")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, db], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    time.sleep(random.uniform(1.0, 3.0))
    killed = time.time()
    proc.kill()
    proc.communicate()
    conn = sqlite3.connect(db)
    try:
        last = conn.execute(
            "SELECT walltime_data FROM scalar_blocks ORDER BY last_step DESC LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    last_ms = unpack_deltas(last[0])[-1] if last else 0  # its series' last point (steps grow with time)
    return killed - last_ms / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        losses = []
        for index in range(args.trials):
            losses.append(trial(Path(folder), index))
            print(f"trial {index + 1:3d}: lost {losses[-1]:.2f} s", flush=True)
    over = sum(loss > PROMISE for loss in losses)
    print(
        f"\n{args.trials} kills: median {statistics.median(losses):.2f} s, max {max(losses):.2f} s, "
        f"{over} over the {PROMISE:.1f} s promise"
    )


if __name__ == "__main__":
    main()

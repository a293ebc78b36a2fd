"""Benchmark of a run's start against tensorboardX's `SummaryWriter`, measured in the same run.

    python bench/run_start.py                       # the issue's sizes (a few minutes)
    python bench/run_start.py --reps 3 --sweep 200  # quicker
    python bench/run_start.py --only start,table    # some rows only

A run start is what the README's peer table calls one: create the run, log one scalar, close it
(durable). Rows, each against a reference timed alternately with it (so load from other users of a
shared machine hits both alike), medians over repetitions:

- start: one run start inside a git checkout, in a process that has started runs before (a sweep),
  against one `SummaryWriter` + `add_scalar` + `close`. Target <= 1.5x.
- first: the first run start of a fresh process, `import` included (tallyboard's table is new, as
  tensorboardX's folder is), against tensorboardX's first. Target <= 5x.
- table: `ResultTable(new file)` against raw sqlite3 creating the same schema (the same statements
  and rows, WAL, synchronous=FULL, closed). Target <= 3x.
- sweep: `--sweep` (1,000) runs started in a loop in one process, each with one scalar, against as
  many writers; the loops are timed in alternating blocks of 50 runs. Target <= 2x.

The checkout is made for the benchmark: `--files` tracked files in folders of ten, one of them
changed and one untracked (a tree being worked on), committed with the system's git; tables and
event files are written beside it, not in it. Runs use `NoCommitAction.NOP` (the changed tree would
otherwise warn at every start). tensorboardX imports torch when it is installed, which its `first`
includes: that is what its users wait for.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import tallyboard as tb

ROWS = ("start", "first", "table", "sweep")
TAGS_AND_STEP = ("train/loss", 1.0)
# tallyboard.run.git_cache.RACY_NS, written out so that older versions can be measured alike
RACY_S = 2.0
SWEEP_BLOCK = 50  # runs of one side timed together in the sweep row, before the other side's

FIRST_TALLYBOARD = """
import time
began = time.perf_counter()
import tallyboard as tb
table = tb.ResultTable({path!r}, nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run("first", auto_log_plt=False)
run.add_scalar("train/loss", 1.0, step=0)
run.close()
print(time.perf_counter() - began)
"""
FIRST_TENSORBOARDX = """
import time
began = time.perf_counter()
from tensorboardX import SummaryWriter
writer = SummaryWriter({path!r})
writer.add_scalar("train/loss", 1.0, 0)
writer.close()
print(time.perf_counter() - began)
"""


def checkout(folder: Path, files: int) -> Path:
    """A git checkout of `files` small Python files, one changed and one untracked."""
    root = folder / "project"
    for i in range(files):
        path = root / f"pkg{i // 10}" / f"module{i % 10}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {i}\n\n\ndef f(x):\n    return x * VALUE\n")
    (root / ".gitignore").write_text("*.ckpt\n__pycache__/\n")
    who = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    for command in (["init", "-q"], ["add", "."], [*who, "commit", "-q", "-m", "project"]):
        subprocess.run(["git", *command], cwd=root, check=True, capture_output=True)
    (root / "pkg0" / "module0.py").write_text("VALUE = -1\n")
    (root / "notes.txt").write_text("what to try next\n")
    time.sleep(RACY_S)  # a tree edited before the runs start, not within git_cache's racy window
    return root


def tallyboard_start(table: tb.ResultTable, i: int) -> None:
    run = table.new_run("bench", cli={"i": i}, auto_log_plt=False)
    run.add_scalar(*TAGS_AND_STEP, step=0)
    run.close()


def tensorboardx_start(writer_class: Any, folder: Path, i: int) -> None:
    writer = writer_class(str(folder / f"run{i}"))
    writer.add_scalar(*TAGS_AND_STEP, 0)
    writer.close()


def timed(work: Callable[..., object], *args: Any) -> float:
    began = time.perf_counter()
    work(*args)
    return time.perf_counter() - began


def many(start: Callable[..., None], runs: range, *args: Any) -> None:
    for i in runs:
        start(*args, i)


def report(what: str, ours: float, theirs: float, unit: str, target: float, reference: str) -> None:
    ratio = ours / theirs
    verdict = "PASS" if ratio <= target else "MISS"
    print(
        f"{verdict}  {what:<40} {ours:>9.2f} {unit} vs {theirs:>9.2f} {unit} {reference:<28}"
        f" {ratio:5.2f}x  target <= {target:g}x"
    )


def start_row(folder: Path, reps: int) -> None:
    from tensorboardX import SummaryWriter

    table = tb.ResultTable(folder / "start.db", nocommit_action=tb.NoCommitAction.NOP)
    ours, theirs = [], []
    sides = [(theirs, partial(tensorboardx_start, SummaryWriter, folder / "tb-start")),
             (ours, partial(tallyboard_start, table))]  # fmt: skip
    for i in range(reps + 3):  # the first three of each warm up (imports, git, the sink)
        for times, start in sides if i % 2 else sides[::-1]:  # neither always after the other's leftovers
            times.append(timed(start, i))
    table.close()
    report("run start in a git checkout (median)", statistics.median(ours[3:]) * 1e3,
           statistics.median(theirs[3:]) * 1e3, "ms", 1.5, "tensorboardX writer")  # fmt: skip


def first_row(folder: Path, project: Path, reps: int) -> None:
    def child(script: str, path: Path) -> float:
        code = script.format(path=str(path))
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=project, check=True, capture_output=True, text=True
        )
        return float(done.stdout.split()[-1])

    ours, theirs = [], []
    for i in range(reps):
        theirs.append(child(FIRST_TENSORBOARDX, folder / f"tb-first{i}"))
        ours.append(child(FIRST_TALLYBOARD, folder / f"first{i}.db"))
    report("first run start of a process, import incl.", statistics.median(ours) * 1e3,
           statistics.median(theirs) * 1e3, "ms", 5, "tensorboardX's first")  # fmt: skip


def table_row(folder: Path, reps: int) -> None:
    tb.ResultTable(folder / "template.db").close()
    with sqlite3.connect(folder / "template.db") as conn:
        objects = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type = 'index', rowid"
        ).fetchall()
        rows = [
            (name, conn.execute(f"SELECT * FROM {name}").fetchall())
            for kind, name, _ in objects
            if kind == "table"
        ]
    conn.close()

    def raw(path: Path) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")
        for _, _, sql in objects:
            conn.execute(sql)
        for name, found in rows:
            if found:
                conn.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(found[0]))})", found)
        conn.execute("COMMIT")
        conn.close()

    ours, theirs = [], []
    for i in range(reps * 5):
        theirs.append(timed(raw, folder / f"raw{i}.db"))
        ours.append(timed(lambda path: tb.ResultTable(path).close(), folder / f"new{i}.db"))
    report("ResultTable(new file) (median)", statistics.median(ours) * 1e3,
           statistics.median(theirs) * 1e3, "ms", 3, "raw sqlite3, same schema")  # fmt: skip


def sweep_row(folder: Path, reps: int, runs: int) -> None:
    """Each side's runs in one loop of `runs`, timed in blocks of `SWEEP_BLOCK` that alternate
    with the other side's (so that a change of the machine's load meets both alike)."""
    from tensorboardX import SummaryWriter

    ours, theirs = [], []
    for rep in range(reps):
        table = tb.ResultTable(folder / f"sweep{rep}.db", nocommit_action=tb.NoCommitAction.NOP)
        events = folder / f"tb-sweep{rep}"
        mine = other = 0.0
        for first in range(0, runs, SWEEP_BLOCK):
            block = range(first, min(first + SWEEP_BLOCK, runs))
            other += timed(many, tensorboardx_start, block, SummaryWriter, events)
            mine += timed(many, tallyboard_start, block, table)
        table.close()
        ours.append(mine)
        theirs.append(other)
    report(f"{runs:,} runs started in a loop (median)", statistics.median(ours),
           statistics.median(theirs), "s ", 2, f"{runs:,} tensorboardX writers")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each comparison")
    parser.add_argument("--sweep", type=int, default=1000, help="runs in the sweep row")
    parser.add_argument("--files", type=int, default=300, help="tracked files of the checkout")
    parser.add_argument("--only", default=",".join(ROWS), help=f"rows to measure, of {','.join(ROWS)}")
    args = parser.parse_args()
    wanted = args.only.split(",")
    with tempfile.TemporaryDirectory(prefix="tallyboard-bench-") as scratch:
        folder = Path(scratch)
        project = checkout(folder, args.files)
        os.chdir(project)  # runs start where a training script would: in the checkout
        print(f"tallyboard {tb.__version__}, a checkout of {args.files} files; load {os.getloadavg()[0]:.1f}")
        if "table" in wanted:
            table_row(folder, args.reps)
        if "start" in wanted:
            start_row(folder, args.reps * 10)
        if "sweep" in wanted:
            sweep_row(folder, args.reps, args.sweep)
        if "first" in wanted:
            first_row(folder, project, args.reps)


if __name__ == "__main__":
    main()

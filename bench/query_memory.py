"""Memory of the query API on one long series: what a query holds at its peak, against the size
of what it returns, and against reading the whole series at once (the reference, measured in the
same run: `LogWriter.get_scalar`, which fetches every row of a series in one list).

Each measurement runs in a fresh process, as the growth of its peak resident set from just before
the query (Linux's `VmHWM`, reset to the current resident set once the imports are done):

    python bench/query_memory.py --points 10000000 [--chunk-rows 20000]   # build, then measure
    python bench/query_memory.py --db PATH --points N --mode build|iter|frame|raw   # one step

`iter` consumes `ResultTable.iter_series` without keeping the chunks (flat: independent of the
series' length); `frame` builds the whole pandas frame with `ResultTable.series` (the frame, plus
its columns once more while they are concatenated); `raw` is the reference. The whole run also
measures `iter` on a series a tenth as long, and prints both peaks next to the raw rows of one
chunk (the reference's bytes per point times `--chunk-rows`): the issue's promise is that a
10,000,000-point query never holds more than one chunk of raw rows, whatever the length.
tests/test_query.py runs `iter` and `frame` at 250,000 and 1,000,000 points (a 10M build and
read take minutes on a small machine) and asserts the same: the peak does not grow with the
length, and stays a few chunks' worth.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUILD_BATCH = 500_000


def build(path: str, points: int) -> None:
    """One run with one series of `points` scalars, written through the store's bulk path."""
    import tallyboard as tb
    from tallyboard.store import Batch, open_store

    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    table.new_run("big").close()
    table.close()
    store = open_store(path)
    for start in range(0, points, BUILD_BATCH):
        steps = range(start, min(points, start + BUILD_BATCH))
        store.write_batch(
            Batch(scalars=[(1, "train/loss", [(0, s, s // 1000, s / 100, s * 0.5) for s in steps])])
        )
    store.close()


def peak() -> int:
    """This process's peak resident set in bytes: Linux's `VmHWM`, which belongs to this process's
    own memory. Not `ru_maxrss`: Linux keeps it across fork and exec, so a child started by a large
    process (a pytest worker) reports its parent's peak, and the growth of a query reads as 0."""
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def restart_peak() -> int:
    """Reset the peak to the current resident set (what the imports needed is not the query's);
    returns it. Where the kernel refuses, the peak so far is the baseline."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")  # 5: reset the peak resident set (Linux 4.0+)
    except OSError:
        pass
    return peak()


def measure(path: str, mode: str, chunk_rows: int) -> dict[str, float]:
    """Peak resident-set growth (bytes) while querying the whole series one way."""
    import numpy  # noqa: F401 (imported before the baseline: not the query's memory)
    import pandas  # noqa: F401

    import tallyboard as tb

    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    table.query()  # opens and warms the connection
    base, start, returned = restart_peak(), time.perf_counter(), 0
    if mode == "iter":
        points = sum(len(chunk) for chunk in table.iter_series(1, chunk_rows=chunk_rows))
    elif mode == "frame":
        frame = table.series(1, chunk_rows=chunk_rows)
        points, returned = len(frame), int(frame.memory_usage(deep=True).sum())
    else:
        points = len(table.load_run(1).get_scalar("train/loss"))
    return {"mode": mode, "points": points, "peak_growth": peak() - base, "returned_bytes": returned,
            "seconds": time.perf_counter() - start}  # fmt: skip


def run_step(path: str, points: int, mode: str, chunk_rows: int) -> dict[str, float]:
    """One step in a fresh process; returns its figures."""
    command = [sys.executable, __file__, "--db", path, "--points", str(points), "--mode", mode,
               "--chunk-rows", str(chunk_rows)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout) if mode != "build" else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--chunk-rows", type=int, default=20_000)
    parser.add_argument("--db")
    parser.add_argument("--mode", choices=("build", "iter", "frame", "raw"))
    args = parser.parse_args()
    if args.mode == "build":
        build(args.db, args.points)
    elif args.mode:
        print(json.dumps(measure(args.db, args.mode, args.chunk_rows)))
    else:
        shorter = args.points // 10
        with tempfile.TemporaryDirectory() as folder:
            path, short_path = str(Path(folder) / "results.db"), str(Path(folder) / "shorter.db")
            run_step(path, args.points, "build", args.chunk_rows)
            figures = {
                mode: run_step(path, args.points, mode, args.chunk_rows) for mode in ("raw", "iter", "frame")
            }
            run_step(short_path, shorter, "build", args.chunk_rows)
            figures["iter, 1/10"] = run_step(short_path, shorter, "iter", args.chunk_rows)
        raw = figures["raw"]["peak_growth"]
        for mode, figure in figures.items():
            growth, returned = figure["peak_growth"], figure["returned_bytes"]
            print(f"{mode:>10}: {figure['points']:,} points, peak growth {growth / 2**20:8.1f} MiB"
                  f" ({growth / raw:.4f} x raw), returned {returned / 2**20:.1f} MiB,"
                  f" {figure['seconds']:.1f} s")  # fmt: skip
        chunk = raw / args.points * args.chunk_rows
        flat = figures["iter"]["peak_growth"] / figures["iter, 1/10"]["peak_growth"]
        print(f"one chunk of raw rows ({args.chunk_rows:,} points): {chunk / 2**20:.1f} MiB; iter's peak"
              f" is {figures['iter']['peak_growth'] / chunk:.2f} chunks at {args.points:,} points and"
              f" {flat:.2f}x its peak at {shorter:,}")  # fmt: skip


if __name__ == "__main__":
    main()

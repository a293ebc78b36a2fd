"""Benchmark of the result table against raw sqlite3 on the same schema, measured in the same run.

    python bench/table.py                 # the issue's sizes (1,000,000 scalars; about a minute)
    python bench/table.py --scalars 200000 --reps 1
    python bench/table.py --sustained 10000000 --sustained-tags 100 --only-sustained
    python bench/table.py --only-call-cost  # add_scalar's median against a hand-written logger

The reference is what SQLite itself allows from Python: the same rows built in a Python loop and
inserted with one `executemany` in one transaction into the same schema (the engine's limit).
Every figure is printed with its ratio to that reference and the target from issue 3.
"""

from __future__ import annotations

import argparse
import gc
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing

import tallyboard as tb
from tallyboard.store import open_store
from tallyboard.store.points_view import materialise

TAGS10 = [f"train/metric{i}" for i in range(10)]
# The references' table: v13's one row per point (tallyboard stores blocks since v14).
ROWS_DDL = """CREATE TABLE IF NOT EXISTS ref_scalars (run_id BIGINT NOT NULL, tag_id INTEGER NOT NULL,
    rep INTEGER NOT NULL, step BIGINT NOT NULL, epoch BIGINT, walltime_ms BIGINT NOT NULL,
    value DOUBLE PRECISION, PRIMARY KEY (run_id, tag_id, rep, step)) WITHOUT ROWID"""


def fresh(folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path


def raw_executemany(path: str, tags: list[str], steps: int) -> float:
    """Seconds to build the rows and insert them in one transaction, as a hand-written logger would."""
    open_store(path).close()  # the same schema, and v12's rows beside it
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(ROWS_DDL)
    tag_ids = []
    for tag in tags:
        conn.execute("INSERT INTO tags (name) VALUES (?)", (tag,))
        tag_ids.append(conn.execute("SELECT tag_id FROM tags WHERE name = ?", (tag,)).fetchone()[0])
    clock = time.perf_counter
    start = clock()
    rows = []
    append = rows.append
    for step in range(steps):
        for tag_id in tag_ids:
            append((1, tag_id, 0, step, None, int((clock() - start) * 1000), 0.5))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO ref_scalars VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    conn.close()
    return clock() - start


def tallyboard_log(path: str, tags: list[str], steps: int) -> float:
    """Seconds for steps x tags add_scalar calls on auto steps, close() (everything durable) included."""
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    start = time.perf_counter()
    run = table.new_run("bench", auto_log_plt=False)
    add = run.add_scalar
    if len(tags) == 1:
        tag = tags[0]
        for _ in range(steps):
            add(tag, 0.5)
    else:
        for _ in range(steps):
            for tag in tags:
                add(tag, 0.5)
    run.close()
    elapsed = time.perf_counter() - start
    table.close()
    return elapsed


def file_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return os.path.getsize(path)


def throughput(folder: str, scalars: int, reps: int) -> None:
    for tags in ([TAGS10[0]], TAGS10):
        steps = scalars // len(tags)
        raw, ours = [], []
        for _ in range(reps):  # interleaved, so a noisy neighbour hits both
            gc.collect()
            raw.append(raw_executemany(fresh(folder, "raw.db"), tags, steps))
            gc.collect()
            ours.append(tallyboard_log(fresh(folder, "tb.db"), tags, steps))
        raw_rate, our_rate = scalars / min(raw), scalars / min(ours)
        report(f"throughput, {len(tags)} tag(s), {scalars:,} scalars", f"{our_rate:,.0f}/s",
               our_rate / raw_rate, ">= 0.5x raw executemany", our_rate / raw_rate >= 0.5,
               f"raw {raw_rate:,.0f}/s")  # fmt: skip
        if len(tags) == 1:
            size = file_bytes(os.path.join(folder, "tb.db")) / scalars
            report("size on disk", f"{size:.1f} B/scalar", None, "<= 32 B/scalar", size <= 32,
                   f"raw {file_bytes(os.path.join(folder, 'raw.db')) / scalars:.1f} B/scalar")  # fmt: skip


class HandWrittenLogger:
    """The reference of `call_cost`: what any in-process logger does per call at the least (count
    the tag's step, read the clock, append a row tuple), with no checks, no bound and no writer."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.steps: dict[str, int] = {}
        self.start = time.perf_counter()

    def add_scalar(self, tag: str, value: float) -> None:
        step = self.steps.get(tag, 0)
        self.steps[tag] = step + 1
        self.rows.append((0, step, None, time.perf_counter() - self.start, value))


def call_cost(folder: str, calls: int, block: int = 1000) -> None:
    """Median cost of one add_scalar in the training thread while the sink commits in the
    background, against `HandWrittenLogger`. Blocks of `block` calls of each alternate, so the
    sink's commits (its thread competing for the GIL and the cores from the first block on, as the
    queue's bound makes it commit during the loop) and a noisy neighbour hit both alike; the
    reference's rows are let go after each block, as the sink lets go of what it committed."""
    table = tb.ResultTable(fresh(folder, "cost.db"), nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("cost", auto_log_plt=False)
    reference = HandWrittenLogger()
    clock = time.perf_counter_ns
    empty, timed, handwritten = [], [], []
    for _ in range(calls):
        t0 = clock()
        empty.append(clock() - t0)
    for _ in range(calls // block):
        for add, times in ((run.add_scalar, timed), (reference.add_scalar, handwritten)):
            for _ in range(block):
                t0 = clock()
                add("train/loss", 0.5)
                times.append(clock() - t0)
        reference.rows.clear()
    run.close()
    timer = statistics.median(empty)
    cost, ref = statistics.median(timed) - timer, statistics.median(handwritten) - timer
    p99 = sorted(timed)[int(len(timed) * 0.99)] - timer
    report("add_scalar in the training thread (median)", f"{cost / 1000:.3f} us", cost / ref, "<= 1 us",
           cost <= 1000, f"hand-written logger {ref / 1000:.3f} us; p99 {p99 / 1000:.1f} us")  # fmt: skip


def reads(folder: str, points: int, reps: int) -> None:
    path = fresh(folder, "read.db")
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("read", auto_log_plt=False)
    for step in range(points):
        run.add_scalar("train/loss", step * 0.001)
    run.close()
    conn = sqlite3.connect(path)
    tag_id = conn.execute("SELECT tag_id FROM tags WHERE name = 'train/loss'").fetchone()[0]
    conn.execute(ROWS_DDL)  # the same points as v12's rows, the reference's table
    materialise(conn)
    conn.execute(
        "INSERT INTO ref_scalars"
        " SELECT run_id, tag_id, rep, step, epoch, walltime_ms, value FROM temp.scalar_points"
    )
    conn.commit()
    sql = "SELECT step, value FROM ref_scalars WHERE run_id = ? AND tag_id = ? ORDER BY rep, step"

    def raw() -> None:
        conn.execute(sql, (run.run_id, tag_id)).fetchall()

    loaded = table.load_run(run.run_id)
    raw_s = best(raw, reps)
    fast_s = best(lambda: loaded.get_scalar_arrays("train/loss"), reps)
    report(f"read {points:,} points, fast path (numpy)", f"{fast_s:.3f} s", fast_s / raw_s,
           "<= 1.5x raw SELECT", fast_s / raw_s <= 1.5, f"raw SELECT {raw_s:.3f} s")  # fmt: skip
    records = points // 2
    short = table.new_run("records", auto_log_plt=False)
    for step in range(records):
        short.add_scalar("train/loss", step * 0.001)
    short.close()
    record_s = best(lambda: short.get_scalar("train/loss"), reps)
    report(
        f"get_scalar records of {records:,} points", f"{record_s:.3f} s", None, "< 0.3 s", record_s < 0.3, ""
    )


def best(work, reps: int) -> float:
    times = []
    for _ in range(reps):
        gc.collect()
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def startup(folder: str, runs: int) -> None:
    """new_debug_run + first scalar + close(), median; raw: connect, insert a run and a scalar, commit."""
    path = fresh(folder, "start.db")
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    ours = []
    for _ in range(runs):
        start = time.perf_counter()
        run = table.new_debug_run("start")
        run.add_scalar("train/loss", 1.0)
        run.close()
        ours.append(time.perf_counter() - start)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(ROWS_DDL)
    raw = []
    for i in range(runs):
        start = time.perf_counter()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO runs (experiment, start_time, updated_at) VALUES (?, ?, ?)", ("r", 0.0, 0.0)
        )
        conn.execute("INSERT INTO ref_scalars VALUES (?, 1, 0, 0, NULL, 0, 1.0)", (1000 + i,))
        conn.execute("COMMIT")
        conn.close()
        raw.append(time.perf_counter() - start)
    ms, raw_ms = statistics.median(ours) * 1000, statistics.median(raw) * 1000
    report("new_debug_run + first scalar + close (median)", f"{ms:.2f} ms", ms / raw_ms, "<= 3 ms", ms <= 3,
           f"raw {raw_ms:.2f} ms")  # fmt: skip


def import_time(reps: int) -> None:
    heavy_names = "{'numpy', 'pandas', 'matplotlib', 'PIL'}"
    check = f"import sys, tallyboard; tallyboard.ResultTable; print(sorted({heavy_names} & set(sys.modules)))"

    def run(code: str) -> tuple[float, str]:
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        return time.perf_counter() - start, out.strip()

    bare = min(run("pass")[0] for _ in range(reps))
    timed = [run(check) for _ in range(reps)]
    ms = (min(t for t, _ in timed) - bare) * 1000
    heavy = timed[0][1]
    report("import tallyboard + its ResultTable", f"{ms:.0f} ms", None, "< 150 ms, no numpy etc.",
           ms < 150 and heavy == "[]", f"heavy modules imported: {heavy}")  # fmt: skip


SUSTAINED = """
import sys, time, tallyboard as tb
path, scalars, tags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = [f"train/m{i}" for i in range(tags)]
table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run("sustained", auto_log_plt=False)
add, clock = run.add_scalar, time.perf_counter
longest = 0.0
start = clock()
for _ in range(scalars // tags):
    for name in names:
        t0 = clock()
        add(name, 0.5)
        took = clock() - t0
        if took > longest:
            longest = took
loop = clock() - start
run.close()
with open("/proc/self/status") as status:  # VmHWM: this process's peak (ru_maxrss spans the exec)
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
print(loop, clock() - start - loop, longest, peak)
"""


def sustained(folder: str, scalars: int, tags: int) -> None:
    """Log as fast as the training thread can, in a fresh process: the queue's peak memory (peak RSS
    less that of the same process logging 1 row per tag), the longest single add_scalar (the
    back-pressure wait), and how long close() drained after the loop (about what SIGKILL would
    have lost at that moment)."""

    def child(count: int) -> list[float]:
        out = subprocess.run(
            [sys.executable, "-c", SUSTAINED, fresh(folder, "sustained.db"), str(count), str(tags)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return [float(x) for x in out.split()]

    base_rss = child(tags)[3]
    loop, drain, longest, rss = child(scalars)
    queue_mb = (rss - base_rss) / 2**20
    report(f"sustained {scalars:,} scalars, {tags} tags", f"{scalars / (loop + drain):,.0f}/s", None,
           "", True, f"loop {loop:.1f} s, close() drained {drain:.2f} s")  # fmt: skip
    report("  peak RSS over a 1-row run (the queue)", f"{queue_mb:.0f} MB", None, "<= 64 MB", queue_mb <= 64,
           f"peak RSS {rss / 2**20:.0f} MB")  # fmt: skip
    report("  longest single add_scalar", f"{longest * 1000:.0f} ms", None, "<= 1 s", longest <= 1.0, "")


def report(what: str, value: str, ratio: float | None, target: str, ok: bool, note: str) -> None:
    ratio_text = "" if ratio is None else f"{ratio:.2f}x"
    print(f"{'PASS' if ok else 'MISS'}  {what:<46} {value:>14} {ratio_text:>7}  target {target:<24} {note}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scalars", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sustained", type=int, default=10_000_000, help="scalars; 0 skips it")
    parser.add_argument("--sustained-tags", type=int, default=100)
    parser.add_argument("--only-sustained", action="store_true")
    parser.add_argument(
        "--only-call-cost", action="store_true", help="just the add_scalar median (for before/after runs)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.only_call_cost:
            return call_cost(folder, 200_000)
        if args.sustained:
            sustained(folder, args.sustained, args.sustained_tags)
        if args.only_sustained:
            return
        throughput(folder, args.scalars, args.reps)
        call_cost(folder, 200_000)
        reads(folder, 200_000, args.reps)
        startup(folder, 200)
        import_time(5)


if __name__ == "__main__":
    main()

"""How the cost of a new tag grows with the number of tags a run already has (issue: the tag cliff).

Per size (1k, 10k, 100k distinct tags by default): a fresh table and run, one `add_scalar` for each
of N distinct tags (`param/00000`, `param/00001`, ... -- a model's per-parameter statistics), then
`close()`, which returns once everything is committed. Printed: the seconds to log and close, the
cost per new tag, the longest single `add_scalar` call, and the ratio of the per-tag cost of the
largest size to that of the smallest (1.0 is a cost independent of how many tags exist).

Each size runs in a process of its own (no cache or sink carried from the one before), cut off
after --timeout seconds, which is then printed instead of its figures.

    python bench/tags.py [--sizes 1000,10000,100000] [--timeout 600]
                         [--postgres postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import tallyboard as tb


def measure(count: int, url: str) -> dict[str, float]:
    """Log one scalar for each of `count` new tags into a fresh run at `url`, then close it."""
    table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("bench-tags", unique=False)
    tags = [f"param/{index:06d}" for index in range(count)]
    longest = 0.0
    start = time.perf_counter()
    for tag in tags:
        before = time.perf_counter()
        run.add_scalar(tag, 1.0)
        longest = max(longest, time.perf_counter() - before)
    logged = time.perf_counter() - start
    run.close()
    total = time.perf_counter() - start
    table.close()
    return {"logged": logged, "total": total, "longest": longest}


def one_size(count: int, postgres: str | None, timeout: float) -> dict[str, float] | None:
    """`measure` in a child process; None if it did not finish within `timeout` seconds."""
    command = [sys.executable, __file__, "--one", str(count)]
    if postgres:
        command += ["--postgres", postgres]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def in_fresh_table(count: int, postgres: str | None) -> dict[str, float]:
    """`measure` into a new SQLite file, or into a schema of the PostgreSQL database `postgres`
    made for it and dropped after."""
    if not postgres:
        with tempfile.TemporaryDirectory() as folder:
            return measure(count, str(Path(folder) / "tags.db"))
    import psycopg

    schema = f"bench_tags_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        return measure(count, f"{postgres}?options={quote('-csearch_path=' + schema)}")
    finally:
        with psycopg.connect(postgres, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # the child's size
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(in_fresh_table(args.one, args.postgres)))
        return
    engine = "PostgreSQL" if args.postgres else "SQLite"
    print(f"{engine}: one add_scalar per distinct tag, then close(); a process per size")
    print(f"{'tags':>8} {'log+close s':>12} {'per tag us':>11} {'longest call ms':>16}")
    per_tag: dict[int, float] = {}
    for count in (int(size) for size in args.sizes.split(",")):
        figures = one_size(count, args.postgres, args.timeout)
        if figures is None:
            print(f"{count:>8,} did not finish in {args.timeout:.0f} s")
            continue
        per_tag[count] = figures["total"] / count
        print(
            f"{count:>8,} {figures['total']:>12.2f} {per_tag[count] * 1e6:>11.1f}"
            f" {figures['longest'] * 1e3:>16.1f}"
        )
    if len(per_tag) >= 2:
        low, high = min(per_tag), max(per_tag)
        print(f"per-tag cost {high:,} / {low:,}: {per_tag[high] / per_tag[low]:.2f}x")


if __name__ == "__main__":
    main()

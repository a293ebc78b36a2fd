"""PostgreSQL benchmarks (issue 5): many writer processes into one table, and reading one long series.

Each figure is a ratio against a reference measured in the same run, on the same server, into the
same schema, so the machine's speed cancels out:

- write: 8 processes x 250,000 `add_scalar` calls (the final `close()` included), aggregate
  throughput against 8 raw psycopg binary COPY streams of the same rows. Target >= 0.5x.
- read: one series of 1,000,000 points through `LogWriter.get_scalar_arrays` (the columnar fast
  path) against a raw psycopg `fetchall` of the same rows and columns. Target <= 2x the raw time.

Reference and candidate are interleaved (raw, ours, raw, ours, ...) and the best of each is kept, so
load from other users of a shared machine hits both alike. Each write measurement starts from an
empty table (a fresh schema) in a scratch database that is dropped at the end.

    python bench/postgres.py [--url postgresql://postgres@127.0.0.1:5432/test] [--repeats 2]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import time
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import quote

import psycopg

import tallyboard as tb
from tallyboard.store import open_store
from tallyboard.store.migrations import fill_blocks

# The reference: v12's row-per-point `scalars`, as `ref_scalars` beside the table (`fresh_schema`).
ROWS_DDL = """CREATE TABLE IF NOT EXISTS ref_scalars (run_id BIGINT NOT NULL, tag_id INTEGER NOT NULL,
    rep INTEGER NOT NULL, step BIGINT NOT NULL, epoch BIGINT, walltime_ms BIGINT NOT NULL,
    value DOUBLE PRECISION, PRIMARY KEY (run_id, tag_id, rep, step))"""
SCALAR_COLUMNS = "run_id, tag_id, rep, step, epoch, walltime_ms, value"
SCALAR_TYPES = ("int8", "int4", "int4", "int8", "int8", "int8", "float8")  # binary COPY: exact types

PROCESSES = 8
SCALARS_PER_PROCESS = 250_000
SERIES_POINTS = 1_000_000


def _rows(run_id: int, tag_id: int, count: int):
    return ((run_id, tag_id, 0, step, None, step, step * 0.5) for step in range(count))


def raw_copy(url: str, run_id: int, tag_id: int, count: int) -> None:
    """The reference writer: one connection, one binary COPY of `count` rows, one commit."""
    sql = f"COPY ref_scalars ({SCALAR_COLUMNS}) FROM STDIN (FORMAT BINARY)"
    with psycopg.connect(url) as conn, conn.cursor() as cur, cur.copy(sql) as copy:
        copy.set_types(SCALAR_TYPES)
        for row in _rows(run_id, tag_id, count):
            copy.write_row(row)


def _raw_worker(url: str, index: int, barrier, done) -> None:
    barrier.wait()
    raw_copy(url, 1_000_000 + index, 1, SCALARS_PER_PROCESS)
    done.put(time.perf_counter())


def _table_worker(url: str, index: int, barrier, done) -> None:
    table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run(f"bench-{index}-{uuid.uuid4().hex[:6]}")
    add_scalar = run.add_scalar
    barrier.wait()
    for step in range(SCALARS_PER_PROCESS):
        add_scalar("train/loss", step * 0.5)
    run.close()
    done.put(time.perf_counter())


def aggregate_throughput(worker: Callable, url: str) -> float:
    """Scalars per second over all processes, from the moment all are ready to the last one's end."""
    ctx = mp.get_context("spawn")
    barrier, done = ctx.Barrier(PROCESSES + 1), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(url, i, barrier, done)) for i in range(PROCESSES)]
    for proc in procs:
        proc.start()
    barrier.wait()
    start = time.perf_counter()
    end = max(done.get(timeout=600) for _ in procs)
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"a writer process failed with exit code {proc.exitcode}")
    return PROCESSES * SCALARS_PER_PROCESS / (end - start)


@contextlib.contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    name = f"tallyboard_bench_{os.getpid()}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server_url.partition("?")[0].rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def fresh_schema(database_url: str) -> str:
    """An empty schema with our tables, and a URL that writes there."""
    schema = f"s_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    url = f"{database_url}?options={quote('-csearch_path=' + schema)}"
    tb.ResultTable(url)  # creates the tables, with the default unique columns
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ROWS_DDL)
    return url


def prepare_series(url: str) -> int:
    """A run with one tag of SERIES_POINTS points (written raw: the write path is measured above)."""
    table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("read-bench")
    run.add_scalar("train/loss", 0.0)
    run.close()
    with psycopg.connect(url) as conn:
        tag_id = conn.execute("SELECT tag_id FROM tags WHERE name = 'train/loss'").fetchone()[0]
        conn.execute("DELETE FROM scalar_blocks")
        conn.execute("DELETE FROM ref_scalars")
    raw_copy(url, run.run_id, tag_id, SERIES_POINTS)
    store = open_store(url)
    store.atomic(lambda: fill_blocks(store, "scalar_blocks", squeeze=False, rows_from="ref_scalars"))
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE ref_scalars")
        conn.execute("VACUUM ANALYZE scalar_blocks")
    raw_fetch(url, run.run_id)  # warm the server's cache, so that the first timed read is not cold
    return run.run_id


def raw_fetch(url: str, run_id: int) -> float:
    """Seconds for psycopg to fetch the series' rows (the columns the fast path reads)."""
    with psycopg.connect(url) as conn:
        start = time.perf_counter()
        rows = conn.execute(
            "SELECT rep, step, walltime_ms, value FROM ref_scalars"
            " WHERE run_id = %s AND tag_id = (SELECT tag_id FROM tags WHERE name = 'train/loss')"
            " ORDER BY rep, step",
            (run_id,),
        ).fetchall()
        elapsed = time.perf_counter() - start
    assert len(rows) == SERIES_POINTS
    return elapsed


def table_fetch(url: str, run_id: int) -> float:
    """Seconds for `get_scalar_arrays` of the same series, from an open table."""
    run = tb.ResultTable(url).load_run(run_id)
    start = time.perf_counter()
    arrays = run.get_scalar_arrays("train/loss")
    elapsed = time.perf_counter() - start
    assert len(arrays["value"]) == SERIES_POINTS
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test", help="server to use")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds; the best of each is kept")
    args = parser.parse_args()
    best: dict[str, float] = {}

    def keep(name: str, value: float, better: Callable = max) -> None:
        best[name] = value if name not in best else better(best[name], value)

    with scratch_database(args.url) as database:
        series_url = fresh_schema(database)
        run_id = prepare_series(series_url)
        for round_ in range(args.repeats):
            keep("raw_write", aggregate_throughput(_raw_worker, fresh_schema(database)))
            keep("table_write", aggregate_throughput(_table_worker, fresh_schema(database)))
            keep("raw_read", raw_fetch(series_url, run_id), min)
            keep("table_read", table_fetch(series_url, run_id), min)
            print(f"round {round_ + 1}: " + ", ".join(f"{k} {v:,.3f}" for k, v in best.items()), flush=True)

    write_ratio = best["table_write"] / best["raw_write"]
    read_ratio = best["table_read"] / best["raw_read"]
    print(f"\nwrite, {PROCESSES} processes x {SCALARS_PER_PROCESS:,} scalars (best of {args.repeats}):")
    print(f"  raw psycopg binary COPY   {best['raw_write']:>12,.0f} scalars/s")
    print(f"  tallyboard add_scalar     {best['table_write']:>12,.0f} scalars/s")
    print(f"  ratio {write_ratio:.2f}x of raw (target >= 0.5x): {'PASS' if write_ratio >= 0.5 else 'FAIL'}")
    print(f"read, one series of {SERIES_POINTS:,} points:")
    print(f"  raw psycopg fetchall      {best['raw_read']:>8.3f} s")
    print(f"  get_scalar_arrays         {best['table_read']:>8.3f} s")
    print(f"  ratio {read_ratio:.2f}x of raw (target <= 2x): {'PASS' if read_ratio <= 2 else 'FAIL'}")


if __name__ == "__main__":
    main()

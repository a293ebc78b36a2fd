"""Scalars as blocks (issue 27): logging, reading, bytes and migration against row-per-point references
measured in the same run.

    python bench/blocks.py                       # SQLite and PostgreSQL, 300,000 scalars (~2 min)
    python bench/blocks.py --scalars 100000 --no-postgres
    python bench/blocks.py --migrate 1000000 10000000   # the v13 -> v14 migration at two sizes

References, each measured here: the floor (a bare method call appending a tuple to a list), raw
`sqlite3.executemany` of the rows into a row-per-point table (v12's `scalars`: WITHOUT ROWID, keyed
(run, tag, rep, step)) in one transaction, the same rows by binary COPY on PostgreSQL, and a raw
`SELECT step, value ... ORDER BY step` of a series from that table. tallyboard's figures are the
durable end-to-end path (`add_scalar` in the loop, then `close()`, which waits for the commit) and
`get_scalar_arrays`. CPU is the process's (every thread: the sink's included).
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

import tallyboard as tb

# Values as a loss curve has them: every mantissa bit in use (nothing for a compressor to find).
VALUES = [math.exp(-i / 1000) + 0.01 * math.sin(i * 12.9898) for i in range(4096)]
ROW_TABLE = """CREATE TABLE IF NOT EXISTS ref_scalars (
    run_id BIGINT NOT NULL, tag_id INTEGER NOT NULL, rep INTEGER NOT NULL, step BIGINT NOT NULL,
    epoch BIGINT, walltime_ms BIGINT NOT NULL, value DOUBLE PRECISION,
    PRIMARY KEY (run_id, tag_id, rep, step)){without_rowid}"""


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = clocks()
    return wall - start[0], cpu - start[1]


def floor(n: int, tags: list[str]) -> float:
    """CPU seconds of n bare method calls that append a tuple to a list."""

    class Floor:
        def __init__(self) -> None:
            self.rows: list[tuple[object, ...]] = []

        def add_scalar(self, tag: str, value: float, step: int) -> None:
            self.rows.append((tag, step, value))

    logger = Floor()
    start = clocks()
    for step in range(n // len(tags)):
        for tag in tags:
            logger.add_scalar(tag, 0.5, step)
    return since(start)[1]


def raw_sqlite(path: str, n: int, tags: list[str]) -> tuple[float, float]:
    """(wall, cpu) to build the rows in a loop and executemany them in one transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(ROW_TABLE.format(without_rowid=" WITHOUT ROWID"))
    start = clocks()
    rows = []
    for step in range(n // len(tags)):
        for tag_id in range(len(tags)):
            rows.append(
                (1, tag_id, 0, step, None, int((time.perf_counter() - start[0]) * 1000), VALUES[step % 4096])
            )
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO ref_scalars VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    figures = since(start)
    conn.close()
    return figures


def raw_copy(url: str, n: int, tags: list[str]) -> tuple[float, float]:
    """(wall, cpu) to build the rows in a loop and binary-COPY them in one transaction."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(ROW_TABLE.format(without_rowid=""))
        start = clocks()
        with conn.cursor() as cursor, cursor.copy("COPY ref_scalars FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(("int8", "int4", "int4", "int8", "int8", "int8", "float8"))
            for step in range(n // len(tags)):
                for tag_id in range(len(tags)):
                    copy.write_row(
                        (1, tag_id, 0, step, None, int((time.perf_counter() - start[0]) * 1000), 0.5)
                    )
        conn.commit()
        return since(start)


def tallyboard_run(location: str, n: int, tags: list[str]) -> tuple[float, float, int]:
    """(wall, cpu, run_id) of the durable path: add_scalar in the loop, then close()."""
    table = tb.ResultTable(location, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("bench", comment=f"{len(tags)} tags, {time.time()}", auto_log_plt=False)
    start = clocks()
    for step in range(n // len(tags)):
        for tag in tags:
            run.add_scalar(tag, VALUES[step % len(VALUES)], step=step)
    run.close()
    wall, cpu = since(start)
    table.close()
    return wall, cpu, run.run_id


def raw_select(read: object, sql: str) -> float:
    start = clocks()
    rows = read(sql)  # type: ignore[operator]
    assert rows
    return since(start)[0]


def sqlite_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    found = conn.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE '%scalar_blocks%'").fetchone()[0]
    conn.close()
    return int(found)


def ingest(engine: str, location: str, ref: str, n: int, floor_cpu: dict[int, float]) -> None:
    for tags in ([f"train/m{i}" for i in range(1)], [f"train/m{i}" for i in range(10)]):
        raw = raw_sqlite(ref, n, tags) if engine == "sqlite" else raw_copy(ref, n, tags)
        wall, cpu, _ = tallyboard_run(location, n, tags)
        print(
            f"{engine:8} {len(tags):2} tag(s): durable {n / wall:>10,.0f}/s = {raw[0] / wall:4.1f}x raw "
            f"{'executemany' if engine == 'sqlite' else 'COPY'} ({n / raw[0]:,.0f}/s); CPU "
            f"{cpu / n * 1e6:.2f} us/scalar = {cpu / floor_cpu[len(tags)]:.1f}x the floor "
            f"({floor_cpu[len(tags)] / n * 1e6:.2f} us)"
        )
        if engine == "sqlite":
            conn = sqlite3.connect(ref)
            conn.execute("DELETE FROM ref_scalars")
            conn.commit()
            conn.close()
        else:
            import psycopg

            with psycopg.connect(ref) as conn:
                conn.execute("TRUNCATE ref_scalars")


def reads(engine: str, location: str, ref: str, n: int) -> None:
    """A series of n points read back: get_scalar_arrays against a raw SELECT of its rows."""
    tags = ["read/series"]
    if engine == "sqlite":
        raw_sqlite(ref, n, tags)
        conn = sqlite3.connect(ref)
        raw = min(
            raw_select(
                lambda sql: conn.execute(sql).fetchall(), "SELECT step, value FROM ref_scalars ORDER BY step"
            )
            for _ in range(3)
        )
        conn.close()
    else:
        import psycopg

        raw_copy(ref, n, tags)
        with psycopg.connect(ref) as conn:
            raw = min(
                raw_select(
                    lambda sql: conn.execute(sql).fetchall(),
                    "SELECT step, value FROM ref_scalars ORDER BY step",
                )
                for _ in range(3)
            )
    _, _, run_id = tallyboard_run(location, n, tags)
    table = tb.ResultTable(location, read_only=True)
    run = table.load_run(run_id)
    times = []
    for _ in range(3):
        start = clocks()
        arrays = run.get_scalar_arrays("read/series")
        times.append(since(start)[0])
        assert len(arrays["value"]) == n
    best = min(times)
    table.close()
    print(
        f"{engine:8} read {n:,} points: get_scalar_arrays {best * 1e3:.1f} ms"
        f" = {best / raw:.2f}x raw SELECT ({raw * 1e3:.1f} ms)"
    )


def migrate(points: int, folder: str) -> None:
    """Seconds and peak memory of the v13 -> v14 migration of a file of `points` scalars (in a child
    process, so that its peak RSS is the migration's)."""
    path = os.path.join(folder, f"v12-{points}.db")
    subprocess.run([sys.executable, __file__, "--make-v12", path, str(points)], check=True)
    code = (
        "import resource, sys, time; from tallyboard.store import open_store;"
        "s = open_store(sys.argv[1]); t = time.perf_counter(); s.ready_for_writing();"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, path], check=True, capture_output=True, text=True
    ).stdout
    seconds, rss = map(float, out.split())
    print(
        f"migrate  {points:>12,} points: {seconds:6.1f} s = {points / seconds:>10,.0f} points/s,"
        f" peak RSS {rss:.0f} MiB"
    )


def make_v12(path: str, points: int) -> None:
    """A v12 file of one run of 10 series holding `points` scalars (v12's `scalars` rows, built by SQL)."""
    from tallyboard.store import open_store
    from tallyboard.store.schema import BACKFILL_BLOCKS, SCALAR_BLOCKS

    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("old", auto_log_plt=False)
    for i in range(10):
        run.add_scalar(f"train/m{i}", 0.0, step=0)
    run.close()
    table.close()
    store = open_store(path)
    store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("DROP VIEW IF EXISTS scalar_points")
    conn.execute("DROP TABLE scalar_blocks")
    conn.execute(
        ROW_TABLE.format(without_rowid=" WITHOUT ROWID")
        .replace("ref_scalars", "scalars")
        .replace(" IF NOT EXISTS", "")
    )
    per_tag = points // 10
    conn.execute(
        "WITH RECURSIVE s(step) AS (SELECT 0 UNION ALL SELECT step + 1 FROM s WHERE step + 1 < ?)"
        " INSERT INTO scalars SELECT 1, t.tag_id, 0, s.step, NULL, s.step * 3, (s.step % 1000) * 0.37"
        " FROM s CROSS JOIN tags t",
        (per_tag,),
    )
    conn.execute(SCALAR_BLOCKS.format(without_rowid="WITHOUT ROWID"))
    conn.execute(BACKFILL_BLOCKS)
    conn.execute("UPDATE meta SET value = '12' WHERE key = 'schema_version'")
    conn.execute("COMMIT")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scalars", type=int, default=300_000)
    parser.add_argument("--read-points", type=int, default=200_000)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--migrate", type=int, nargs="*", default=[])
    parser.add_argument("--make-v12", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_v12:
        make_v12(args.make_v12[0], int(args.make_v12[1]))
        return
    with tempfile.TemporaryDirectory() as folder:
        if args.migrate:
            for points in args.migrate:
                migrate(points, folder)
            return
        n = args.scalars
        floor_cpu = {tags: floor(n, [f"t{i}" for i in range(tags)]) for tags in (1, 10)}
        db, ref = os.path.join(folder, "results.db"), os.path.join(folder, "rows.db")
        ingest("sqlite", db, ref, n, floor_cpu)
        reads("sqlite", db, ref, args.read_points)
        conn = sqlite3.connect(db)
        stored = conn.execute("SELECT SUM(n) FROM scalar_blocks").fetchone()[0]
        conn.close()
        print(
            f"sqlite   bytes per scalar: {sqlite_bytes(db) / stored:.1f}"
            f" (blocks and their index, {stored:,} points)"
        )
        if not args.no_postgres:
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
            from pg_support import scratch_database, scratch_schema

            with scratch_database() as database, scratch_schema(database) as url:
                ingest("postgres", url, url, n, floor_cpu)
                reads("postgres", url, url, args.read_points)
                import psycopg

                with psycopg.connect(url) as conn:
                    size = conn.execute("SELECT pg_total_relation_size('scalar_blocks')").fetchone()[0]
                    stored = conn.execute("SELECT SUM(n) FROM scalar_blocks").fetchone()[0]
                    ref = conn.execute("SELECT pg_total_relation_size('ref_scalars')").fetchone()[0]
                    ref_points = conn.execute("SELECT count(*) FROM ref_scalars").fetchone()[0]
                print(
                    f"postgres bytes per scalar: {size / stored:.1f} (table, TOAST and index; rows per point:"
                    f" {ref / ref_points:.1f})"
                )


if __name__ == "__main__":
    main()

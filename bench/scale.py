"""How the cost of writing, charting and browsing grows with the size of the table (issue 20).

Sizes (one row of the printed table each): 10^6, 10^7 and 10^8 scalars, with 10^3, 10^4 and 10^5
runs (20 hparams and 5 results each). Per size:
- write: throughput of the LAST 1,000,000 scalars appended to the table, through the public API
  (`ResultTable.new_run` / `add_scalar` / `close`, which returns once they are durable), and
  disk bytes per scalar (pages in use of the whole file / scalars; PostgreSQL: the scalar_blocks
  relation, TOAST and index included);
- chart: the first /api/series of that 1,000,000-point series from a fresh app (COLD: wall and
  CPU time, bench/dashboard.py's `cold_chart_ms`), then a zoomed range of 1,000 steps (warm);
- runs: one page of /api/runs sorted by a result and filtered by an hparam, from a fresh app
  (cold: nothing read yet), the next pages (each by the `next` cursor of the one before, as the
  dashboard pages), new views (another threshold each), and the exact count the dashboard asks
  for after a page (/api/runs/count). The issue's query (`r1` descending, `h05 < 0.5`) has a
  filter that the sort order meets late: the data make h05 = (r1 + 0.644) mod 1, so the 14 %
  highest r1 all fail it and the walk of r1 skips them. The same is measured for a pair that is
  not so related (`h01 > 64`: half the runs, spread evenly along r1);
- query API (`ResultTable.query` runs DataFrame, `ResultTable.series` one series) when the tree
  has it; a note says so when it does not;
- export of the appended run (`export_table`, what `tallyboard export --runs ID` runs) and copy of
  the whole table into a new SQLite file (`copy_table`, what `tallyboard copy` runs), in scalars/s;
  copy is skipped above --copy-max scalars (it is linear: minutes at 10^8);
- RSS of a real server process (`python -m tallyboard serve`) after it served 100 charts.
Then the ratios largest / smallest size against the issue's targets. Each size is measured in
--rounds ladders (smallest first, then largest first, ...) and the best round of each figure kept,
so that load from other users of a shared machine does not decide a ratio.

How the tables are built: everything but the measured million is bulk content written inside the
database by plain SQL into the real schema: runs, repetitions, tags, hparams and results (with
their typed copies: store/typed_values.py) and the column list by INSERTs, each series by one
INSERT ... SELECT over a recursive CTE of its steps (100 runs x 100 tags, every 10th run with 3
repetitions) into a `scalars` table of rows, which the v13 -> v14 migration's own code then packs
into `scalar_blocks` (`migrations.fill_blocks`) before it is dropped. No ANALYZE is
run: the tables are measured as the store left them.
SQLite tables are cached under --cache (default bench/.scale-cache/, gitignored) and reused;
the appended run is deleted again afterwards, so the cached file stays the bulk content.

    python bench/scale.py [--sizes 6,7,8] [--repeats 5] [--copy-max 10000000]
                          [--postgres postgresql://postgres@127.0.0.1:5432/test [--no-sqlite] [--vacuum]]
                          [--rounds 2] [--append 1000000] [--cache DIR] [--only-write | --only-runs]
                          [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from starlette.testclient import TestClient

import tallyboard as tb
from dashboard import BASE, NOP, WIDTH, cold_chart_ms, median_ms  # bench/dashboard.py
from tallyboard.dashboard import create_app
from tallyboard.exchange.export import export_table
from tallyboard.store import Store, open_store
from tallyboard.store.copy import copy_table
from tallyboard.store.indexed_values import UPSERT_VALUE, with_types
from tallyboard.store.migrations import fill_blocks
from tallyboard.store.tables import RUN_TABLES

BULK_RUNS = 100  # runs that hold the bulk scalars
BULK_TAGS = 100
HPARAMS = 20
RESULTS = 5
APPENDED = "scale-append"  # experiment of the measured run
RUNS_QUERY = {"limit": 100, "sort": "r1", "desc": 1, "filter": "h05 < 0.5"}
UNCORRELATED = {**RUNS_QUERY, "filter": "h01 > 64"}  # h01 = 32 * (i % 4 + 1): every other run along r1
CHARTS_FOR_RSS = 100


@dataclass(frozen=True)
class Size:
    scalars: int  # in the table once the measured series is appended
    runs: int

    @property
    def label(self) -> str:
        return f"{self.scalars:.0e} sc / {self.runs:.0e} runs".replace("e+0", "e")


@dataclass
class Figures:
    """One row of the printed table (None: not measured)."""

    size: Size
    scalars: int = 0
    write_per_s: float = 0.0
    bytes_per_scalar: float = 0.0
    chart_ms: float = 0.0
    chart_cpu_ms: float = 0.0
    zoom_ms: float = 0.0
    runs_cold_ms: float = 0.0
    runs_warm_ms: float = 0.0
    runs_view_ms: float = 0.0
    count_ms: float = 0.0
    uncorrelated_cold_ms: float = 0.0
    uncorrelated_warm_ms: float = 0.0
    uncorrelated_view_ms: float = 0.0
    query_runs_ms: float | None = None
    query_series_ms: float | None = None
    export_per_s: float = 0.0
    copy_per_s: float | None = None
    rss_mb: float = 0.0
    notes: list[str] = field(default_factory=list)


# -- building the bulk content --------------------------------------------------------------------
class Bulk:
    """Plain SQL into the real schema, on either engine (`?` placeholders)."""

    def __init__(self, url: str) -> None:
        self.postgres = url.startswith(("postgresql://", "postgres://"))
        if self.postgres:
            self.conn = psycopg.connect(url)
        else:
            self.conn = sqlite3.connect(url, isolation_level=None)
            # Building only: no journal to write twice; switched back to WAL by `finish`.
            self.conn.executescript("PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF;"
                                    " PRAGMA cache_size=-200000; BEGIN")  # fmt: skip

    def execute(self, sql: str, params: tuple = ()) -> None:
        self.conn.execute(_for_psycopg(sql) if self.postgres else sql, params)

    def many(self, sql: str, rows: list[tuple]) -> None:
        if self.postgres:
            with self.conn.cursor() as cursor:
                cursor.executemany(_for_psycopg(sql), rows)
        else:
            self.conn.executemany(sql, rows)

    def finish(self) -> None:
        if self.postgres:
            self.conn.commit()
        else:
            self.conn.execute("COMMIT")
            self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.close()


def _for_psycopg(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


# The rows of the bulk series before they become blocks (v12's `scalars`, without its key: the
# series are written in key order).
ROWS_DDL = """CREATE TABLE scalars (run_id BIGINT, tag_id INTEGER, rep INTEGER, step BIGINT, epoch BIGINT,
    walltime_ms BIGINT, value DOUBLE PRECISION, PRIMARY KEY (run_id, tag_id, rep, step))"""


def _series_sql(postgres: bool) -> str:
    """One series of `count` steps (value: a deterministic saw-tooth, epoch every 100 steps)."""
    first = "CAST(0 AS BIGINT)" if postgres else "0"
    return f"""WITH RECURSIVE s(step) AS (SELECT {first} UNION ALL SELECT step + 1 FROM s WHERE step + 1 < ?)
        INSERT INTO scalars (run_id, tag_id, rep, step, epoch, walltime_ms, value)
        SELECT ?, ?, ?, step, step / 100, step * 10, ((step * 7919 + ?) % 1000) / 1000.0 FROM s"""


def build(url: str, size: Size, appended: int) -> int:
    """Bulk content of `size` less the `appended` scalars measured later; returns scalars written."""
    tb.ResultTable(url, nocommit_action=NOP).close()  # the schema, exactly as the store creates it
    bulk = Bulk(url)
    now = time.time()
    bulk.many(
        "INSERT INTO runs (run_id, experiment, cli, comment, status, start_time, end_time, hidden,"
        " unique_key, updated_at) VALUES (?, 'scale-bulk', ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (i, json.dumps({"i": i}), None if i % 3 else f"run {i}", "running" if i % 10 == 0 else "finished",
             now - 1e5 + i, None if i % 10 == 0 else now - 1e5 + i + 60, int(i % 20 == 0),
             json.dumps(["scale-bulk", None, json.dumps({"i": i})]), now - 1e5 + i)
            for i in range(1, size.runs + 1)
        ],
    )  # fmt: skip
    bulk.many(
        UPSERT_VALUE.format(table="hparams"),
        with_types([
            (i, f"h{k:02d}", json.dumps(_hparam(i, k)))
            for i in range(1, size.runs + 1)
            for k in range(HPARAMS)
        ]),
    )  # fmt: skip
    bulk.many(
        UPSERT_VALUE.format(table="results"),
        with_types([(i, f"r{k}", json.dumps((i * 7919 + k) % 1000 / 1000)) for i in range(1, size.runs + 1)
                    if i % 10 for k in range(RESULTS)]),
    )  # fmt: skip
    names = [(f"h{k:02d}", "hparam") for k in range(HPARAMS)] + [(f"r{k}", "result") for k in range(RESULTS)]
    bulk.many(
        "INSERT INTO columns (name, kind, alias, position) VALUES (?, ?, ?, ?)",
        [(name, kind, name, 100 + n) for n, (name, kind) in enumerate(names)],
    )
    reps = [
        (i, rep) for i in range(1, size.runs + 1) for rep in range(3 if i % 10 == 0 and i <= BULK_RUNS else 1)
    ]
    bulk.many("INSERT INTO repetitions (run_id, rep, start_time) VALUES (?, ?, ?)", [(*r, now) for r in reps])
    bulk.many(
        "INSERT INTO tags (tag_id, name) VALUES (?, ?)",
        [(t + 1, f"{('train', 'val')[t % 2]}/metric{t // 2:02d}") for t in range(BULK_TAGS)],
    )
    steps = (size.scalars - appended) // (BULK_RUNS * BULK_TAGS)
    written = 0
    bulk.execute(ROWS_DDL)  # rows first, by SQL; packed into blocks below as the v14 migration packs them
    if steps > 0:
        sql = _series_sql(bulk.postgres)
        for run_id in range(1, BULK_RUNS + 1):
            rep_count = 3 if run_id % 10 == 0 else 1
            for tag_id in range(1, BULK_TAGS + 1):
                for rep in range(rep_count):
                    count = steps // rep_count + (steps % rep_count if rep == 0 else 0)
                    bulk.execute(sql, (count, run_id, tag_id, rep, tag_id))
                    written += count
    if bulk.postgres:  # ids were given explicitly: move the sequences past them
        for table, column in (("runs", "run_id"), ("tags", "tag_id")):
            sequence = f"pg_get_serial_sequence('{table}', '{column}')"
            bulk.execute(f"SELECT setval({sequence}, (SELECT MAX({column}) FROM {table}))")
    bulk.finish()
    store = open_store(url)
    store.atomic(lambda: _rows_into_blocks(store))
    store.close()
    return written


def _rows_into_blocks(store: Store) -> None:
    fill_blocks(store, "scalar_blocks", squeeze=not store.url.is_postgres)
    store.execute("DROP TABLE scalars")


def _hparam(i: int, k: int) -> object:
    if k == 0:
        return 10.0 ** -(i % 5)
    if k == 1:
        return 32 * (i % 4 + 1)
    if k == 2:
        return ("adam", "sgd", "lamb")[i % 3]
    return (i * 7919 + k * 104729) % 1000 / 1000


@contextlib.contextmanager
def cached_table(cache: Path, size: Size, appended: int) -> Iterator[tuple[str, int]]:
    """A SQLite table of `size`'s bulk content (built once, kept in `cache`), and its scalar count."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"scale-{size.scalars}-{size.runs}-{appended}.db"
    count_file = path.with_suffix(".json")
    if not path.exists() or not count_file.exists():
        partial = path.with_suffix(".partial")
        for stale in cache.glob(partial.name + "*"):
            stale.unlink()
        start = time.perf_counter()
        written = build(str(partial), size, appended)
        partial.rename(path)
        count_file.write_text(json.dumps({"bulk_scalars": written}))
        print(f"  built {path.name}: {written:,} bulk scalars in {time.perf_counter() - start:.0f} s")
    drop_appended(str(path))  # a run an interrupted benchmark left behind
    store = open_store(str(path))  # a table cached by an older tallyboard: migrated, as its first write would
    store.ready_for_writing()
    store.close()
    try:
        yield str(path), json.loads(count_file.read_text())["bulk_scalars"]
    finally:
        drop_appended(str(path))


@contextlib.contextmanager
def postgres_table(server: str, size: Size, appended: int, vacuum: bool) -> Iterator[tuple[str, int]]:
    """A PostgreSQL table of `size`'s bulk content in a scratch database; with `vacuum`, then
    VACUUM ANALYZE'd, as autovacuum leaves it on a server with default settings (the planner's
    statistics and the visibility map that index-only scans need; the test server runs without)."""
    from postgres import fresh_schema, scratch_database  # bench/postgres.py

    with scratch_database(server) as database:
        url = fresh_schema(database)
        start = time.perf_counter()
        written = build(url, size, appended)
        if vacuum:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
        seconds = time.perf_counter() - start
        print(f"  built PostgreSQL {size.label}: {written:,} bulk scalars in {seconds:.0f} s")
        yield url, written


def drop_appended(path: str) -> None:
    """Delete the measured runs (experiment APPENDED) from a cached SQLite table."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        ids = [row[0] for row in conn.execute("SELECT run_id FROM runs WHERE experiment = ?", (APPENDED,))]
        if ids:
            conn.execute("BEGIN")
            for table in RUN_TABLES:
                conn.executemany(f"DELETE FROM {table} WHERE run_id = ?", [(i,) for i in ids])
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# -- the measurements -----------------------------------------------------------------------------
def append_series(url: str, points: int) -> tuple[int, float]:
    """The measured write: a new run with one `points`-step series, until `close()` made it durable."""
    table = tb.ResultTable(url, nocommit_action=NOP)
    start = time.perf_counter()
    run = table.new_run(APPENDED, cli={"points": points, "at": time.time()}, auto_log_plt=False)
    for step in range(points):
        run.add_scalar("train/loss", math.sin(step / 1000), step=step, epoch=step // 10_000)
    run.close()
    seconds = time.perf_counter() - start
    table.close()
    return run.run_id, seconds


def disk_bytes(url: str) -> int:
    if url.startswith("postgres"):
        with psycopg.connect(url) as conn:
            sql = "SELECT pg_total_relation_size('scalar_blocks')"
            return conn.execute(sql).fetchone()[0]
    with contextlib.closing(sqlite3.connect(url)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, free, page_size = (
            conn.execute(f"PRAGMA {pragma}").fetchone()[0]
            for pragma in ("page_count", "freelist_count", "page_size")
        )
        return (pages - free) * page_size


def chart_figures(url: str, run_id: int, points: int, repeats: int, figures: Figures) -> None:
    figures.chart_ms, figures.chart_cpu_ms = cold_chart_ms(url, run_id, repeats)
    with TestClient(create_app(url), base_url=BASE) as client:
        client.get(f"/api/series?runs={run_id}&metric=loss&width={WIDTH}").raise_for_status()

        def zoom(i: int) -> None:  # 1,000 steps at a new place each time: no answer from a cache
            lo = (points // 2 + i * 7919) % max(1, points - 1000)
            query = f"runs={run_id}&metric=loss&width={WIDTH}&step_min={lo}&step_max={lo + 999}"
            client.get(f"/api/series?{query}").raise_for_status()

        figures.zoom_ms = median_ms(zoom, repeats)
        client.app.state.dashboard.queries.close()


def runs_figures(url: str, repeats: int, figures: Figures) -> None:
    """The issue's query and the uncorrelated pair, each: cold, next pages, new views; then the
    exact count of a new view (a request of its own, as the dashboard makes after a page)."""
    figures.runs_cold_ms, figures.runs_warm_ms, figures.runs_view_ms = view_figures(
        url, RUNS_QUERY, lambda i: f"h05 < 0.{i + 1}", repeats
    )
    figures.uncorrelated_cold_ms, figures.uncorrelated_warm_ms, figures.uncorrelated_view_ms = view_figures(
        url, UNCORRELATED, lambda i: f"h01 > {64 + i}", repeats
    )
    with TestClient(create_app(url), base_url=BASE) as client:

        def count(i: int) -> None:
            client.get("/api/runs/count", params={"filter": f"h05 < 0.{i + 5}"}).raise_for_status()

        figures.count_ms = median_ms(count, repeats)
        client.app.state.dashboard.queries.close()


def view_figures(url: str, query: dict, view: Callable[[int], str], repeats: int) -> tuple[float, ...]:
    """Cold: the first page of a fresh app (nothing read yet), median of 3; then, on the last
    app, its next pages and new views (`warm_figures`)."""
    cold = []
    for attempt in range(3):
        with TestClient(create_app(url), base_url=BASE) as client:
            start = time.perf_counter()
            page = client.get("/api/runs", params=query)
            cold.append((time.perf_counter() - start) * 1000)
            page.raise_for_status()
            if attempt == 2:
                warm = warm_figures(client, query, page.json()["next"], view, repeats)
            client.app.state.dashboard.queries.close()
    return statistics.median(cold), *warm


def warm_figures(
    client: TestClient, query: dict, after: str, view: Callable[[int], str], repeats: int
) -> tuple[float, float]:
    """Next: the pages after the first, each by the cursor of the one before. New view: another
    filter (`view(i)`) each time, so the view's runs are found anew."""
    cursor = [after]

    def next_page(_: int) -> None:
        response = client.get("/api/runs", params={**query, "after": cursor[0]})
        response.raise_for_status()
        cursor[0] = response.json()["next"]

    def new_view(i: int) -> None:
        client.get("/api/runs", params={**query, "filter": view(i)}).raise_for_status()

    return median_ms(next_page, repeats), median_ms(new_view, repeats)


def query_figures(url: str, run_id: int, repeats: int, figures: Figures) -> None:
    """The query API, when this tree has it (another change adds `ResultTable.query` / `series`)."""
    missing = [name for name in ("query", "series") if not hasattr(tb.ResultTable, name)]
    if missing:
        figures.notes.append(f"query API skipped: ResultTable has no {' or '.join(missing)} in this tree")
        return
    table = tb.ResultTable(url, nocommit_action=NOP)
    try:
        figures.query_runs_ms = median_ms(lambda _: table.query(), repeats)
        figures.query_series_ms = median_ms(lambda _: table.series(run_id, "train/loss"), repeats)
    except TypeError as error:  # a signature this benchmark does not know yet
        figures.notes.append(f"query API skipped: {error}")
    finally:
        table.close()


def exchange_figures(url: str, run_id: int, points: int, copy_max: int, figures: Figures) -> None:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        export_table(url, Path(folder) / "export", "csv", run_ids=[run_id])
        figures.export_per_s = points / (time.perf_counter() - start)
        if figures.scalars > copy_max:
            figures.notes.append(f"copy skipped: {figures.scalars:,} scalars > --copy-max {copy_max:,}")
            return
        start = time.perf_counter()
        copy_table(url, str(Path(folder) / "copy.db"), progress=False)
        figures.copy_per_s = figures.scalars / (time.perf_counter() - start)


def server_rss_mb(url: str, run_id: int, points: int) -> float:
    """Resident set of a real `tallyboard serve` process after it served CHARTS_FOR_RSS charts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "tallyboard", "serve", url, "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        server.stdout.readline()  # the URL line: the socket is listening
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            for i in range(CHARTS_FOR_RSS):
                lo = i * points // CHARTS_FOR_RSS
                client.get(
                    f"/api/series?runs={run_id}&metric=loss&width={500 + i}&step_min={lo}"
                ).raise_for_status()
        with open(f"/proc/{server.pid}/status") as status:
            return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))
    finally:
        server.terminate()
        server.wait(30)


def measure(url: str, size: Size, bulk_scalars: int, args: argparse.Namespace) -> Figures:
    figures = Figures(size)
    if args.only_runs:
        runs_figures(url, args.repeats, figures)
        return figures
    run_id, seconds = append_series(url, args.append)
    figures.scalars = bulk_scalars + args.append
    figures.write_per_s = args.append / seconds
    figures.bytes_per_scalar = disk_bytes(url) / figures.scalars
    if args.only_write:
        return figures
    chart_figures(url, run_id, args.append, args.repeats, figures)
    runs_figures(url, args.repeats, figures)
    query_figures(url, run_id, args.repeats, figures)
    exchange_figures(url, run_id, args.append, args.copy_max, figures)
    figures.rss_mb = server_rss_mb(url, run_id, args.append)
    return figures


HIGHER_IS_BETTER = ("write_per_s", "export_per_s", "copy_per_s")


def best(rounds: list[Figures]) -> Figures:
    """The best of each figure over the rounds of one size (the least disturbed by other load)."""
    kept = Figures(
        rounds[0].size, scalars=rounds[0].scalars, notes=sorted({n for f in rounds for n in f.notes})
    )
    for name in Figures.__dataclass_fields__:
        values = [getattr(f, name) for f in rounds]
        if name in ("size", "scalars", "notes") or None in values:
            continue
        setattr(kept, name, (max if name in HIGHER_IS_BETTER else min)(values))
    return kept


# -- the report -----------------------------------------------------------------------------------
COLUMNS: tuple[tuple[str, Callable[[Figures], float | None], str], ...] = (
    ("scalars", lambda f: f.scalars, "{:>12,}"),
    ("write k/s", lambda f: f.write_per_s / 1000, "{:>9.1f}"),
    ("B/scalar", lambda f: f.bytes_per_scalar, "{:>8.1f}"),
    ("chart ms", lambda f: f.chart_ms, "{:>8.1f}"),
    ("(cpu ms)", lambda f: f.chart_cpu_ms, "{:>8.1f}"),
    ("zoom ms", lambda f: f.zoom_ms, "{:>7.1f}"),
    ("runs cold ms", lambda f: f.runs_cold_ms, "{:>12.0f}"),
    ("runs warm ms", lambda f: f.runs_warm_ms, "{:>12.1f}"),
    ("runs new view ms", lambda f: f.runs_view_ms, "{:>16.1f}"),
    ("count ms", lambda f: f.count_ms, "{:>8.1f}"),
    ("uncorr. cold ms", lambda f: f.uncorrelated_cold_ms, "{:>15.1f}"),
    ("uncorr. next ms", lambda f: f.uncorrelated_warm_ms, "{:>15.1f}"),
    ("uncorr. view ms", lambda f: f.uncorrelated_view_ms, "{:>15.1f}"),
    ("query runs ms", lambda f: f.query_runs_ms, "{:>13.1f}"),
    ("query series ms", lambda f: f.query_series_ms, "{:>15.1f}"),
    ("export k/s", lambda f: f.export_per_s / 1000, "{:>10.1f}"),
    ("copy k/s", lambda f: None if f.copy_per_s is None else f.copy_per_s / 1000, "{:>8.1f}"),
    ("RSS MB", lambda f: f.rss_mb, "{:>6.1f}"),
)

# (label, column value, bound on largest / smallest, higher is better, absolute budget at the largest)
TARGETS: tuple[tuple[str, Callable[[Figures], float | None], float, bool, float | None], ...] = (
    ("write throughput", lambda f: f.write_per_s, 0.8, True, None),
    ("bytes per scalar", lambda f: f.bytes_per_scalar, 1.1, False, None),
    ("first chart (cold, wall)", lambda f: f.chart_ms, 1.5, False, 50.0),
    ("first chart (cold, CPU)", lambda f: f.chart_cpu_ms, 1.5, False, 50.0),
    ("zoomed chart", lambda f: f.zoom_ms, 1.5, False, 50.0),
    ("runs page (cold)", lambda f: f.runs_cold_ms, 1.5, False, 1000.0),
    ("runs page (warm)", lambda f: f.runs_warm_ms, 1.5, False, 200.0),
    ("runs page (new view)", lambda f: f.runs_view_ms, 1.5, False, 200.0),
    ("uncorrelated pair (cold)", lambda f: f.uncorrelated_cold_ms, 1.5, False, 1000.0),
    ("uncorrelated pair (next)", lambda f: f.uncorrelated_warm_ms, 1.5, False, 200.0),
    ("uncorrelated pair (view)", lambda f: f.uncorrelated_view_ms, 1.5, False, 200.0),
    ("query: runs DataFrame", lambda f: f.query_runs_ms, 1.5, False, None),
    ("query: one series", lambda f: f.query_series_ms, 1.5, False, None),
    ("server RSS after 100 charts", lambda f: f.rss_mb, 1.2, False, None),
)


def print_table(engine: str, rows: list[Figures]) -> None:
    print(f"\n{engine}: one row per size (times are medians; chart/runs cold = a fresh app)")
    print(f"  {'size':<22}" + " ".join(f"{name:>{len(fmt.format(0))}}" for name, _, fmt in COLUMNS))
    for figures in rows:
        cells = []
        for _, value, fmt in COLUMNS:
            number = value(figures)
            width = len(fmt.format(0))
            cells.append(f"{'-':>{width}}" if number is None else fmt.format(number))
        print(f"  {figures.size.label:<22}" + " ".join(cells))
    for figures in rows:
        for note in figures.notes:
            print(f"  {figures.size.label}: {note}")
    if len(rows) < 2:
        return
    small, large = rows[0], rows[-1]
    print(f"  largest / smallest ({large.size.label} vs {small.size.label}):")
    for label, value, bound, higher_better, budget in TARGETS:
        a, b = value(small), value(large)
        if a is None or b is None or not a:
            continue
        ratio = b / a
        ok = ratio >= bound if higher_better else ratio <= bound
        within = (
            "" if budget is None else f", {b:.1f} vs budget {budget:.0f}: {'ok' if b < budget else 'MISS'}"
        )
        sign = ">=" if higher_better else "<="
        print(f"    {label:<28} ratio {ratio:6.2f} (target {sign} {bound}): {'ok' if ok else 'MISS'}{within}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="6,7,8", help="powers of ten of scalars (runs: 1,000x fewer)")
    parser.add_argument("--append", type=int, default=1_000_000, help="scalars appended and measured")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--copy-max", type=int, default=10**7, help="skip `copy` above this many scalars")
    parser.add_argument("--cache", type=Path, default=Path(__file__).parent / ".scale-cache")
    parser.add_argument("--postgres", metavar="URL", help="also build and measure on this PostgreSQL server")
    parser.add_argument("--no-sqlite", action="store_true", help="only PostgreSQL (with --postgres)")
    parser.add_argument(
        "--vacuum",
        action="store_true",
        help="VACUUM ANALYZE PostgreSQL tables once built (as autovacuum would)",
    )
    parser.add_argument(
        "--only-write", action="store_true", help="only the write figures (use more --rounds)"
    )
    parser.add_argument(
        "--only-runs", action="store_true",
        help="only the runs-table figures, on tables of each size's runs without its scalars",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2, help="ladders measured, alternating order")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI: it works, no figures")
    args = parser.parse_args()
    if args.smoke:
        sizes = [Size(20_000, 100), Size(40_000, 200)]
        args.append, args.repeats, args.rounds = 10_000, 1, 1
    else:
        sizes = [Size(10**e, 10 ** (e - 3)) for e in map(int, args.sizes.split(","))]
    args.cache = args.cache.resolve()
    os.chdir(tempfile.mkdtemp())  # no git checkout here: runs start without capturing a diff
    print(f"load average at start: {os.getloadavg()}")
    built = (lambda s: Size(0, s.runs)) if args.only_runs else (lambda s: s)  # the runs page reads no scalars
    engines: list[tuple[str, Callable]] = []
    if not args.no_sqlite:
        engines.append(("SQLite", lambda s: cached_table(args.cache, built(s), args.append)))
    if args.postgres:
        engines.append(
            ("PostgreSQL", lambda s: postgres_table(args.postgres, built(s), args.append, args.vacuum))
        )
    for engine, table_of in engines:
        measured: dict[Size, list[Figures]] = {size: [] for size in sizes}
        for round_ in range(args.rounds):  # smallest first, then largest first: load hits all alike
            for size in sizes if round_ % 2 == 0 else sizes[::-1]:
                print(f"{engine} {size.label} (round {round_ + 1}) ...", flush=True)
                with table_of(size) as (url, bulk_scalars):
                    measured[size].append(measure(url, size, bulk_scalars, args))
        print_table(engine, [best(measured[size]) for size in sizes])
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()

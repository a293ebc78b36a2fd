"""Cluster benchmarks (issue 19): many jobs through PgBouncer, and the node-local spool.

Every figure is a ratio against a reference measured in the same run on the same machine, on a
PostgreSQL server of the benchmark's own (initdb in a temporary folder, tests/own_postgres.py) and
Debian's pgbouncer (tests/bouncer_support.py), so both can be stopped and sized freely:

- jobs: `--processes` short runs (scalars, images, texts each), started `--wave` at a time, through
  one PgBouncer with a server pool of `--pool` connections to a server with max_connections 50,
  against the same jobs connected directly to a server that can take them all. Aggregate rows per
  second, both printed. Target >= 0.5x. Also: how many direct jobs a server with max_connections 50
  refuses, and that the error names PgBouncer.
- spool add_scalar: the training thread's cost per `add_scalar` with `spool=` against the SQLite
  engine's, at a training loop's pace (bursts of 1,000 calls, 50,000 a second). Target <= 1.2x.
  Also printed: both flat out, where back-pressure makes it the writer thread's throughput.
- shipping: rows per second a spool ships to PostgreSQL (`tallyboard sync`) against the same rows
  logged directly (`ResultTable(url)`, `close()` included). Target >= 0.8x.
- outage (`--outage SECONDS`, 0 to skip): a run logs through a spool while the server is stopped
  that long; it prints the rows logged meanwhile, the growth of the process's memory, and the time
  to ship everything once the server is back, and checks every row arrived once.

    python bench/cluster.py [--processes 200] [--wave 50] [--pool 20] [--outage 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the servers' helpers

import tallyboard as tb
from bouncer_support import bouncer
from own_postgres import own_server
from tallyboard.store import open_store
from tallyboard.store.spool_shipper import ship_all

JOB = """
import io, sys, tallyboard as tb
from PIL import Image
url, name, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
buffer = io.BytesIO()
Image.new("RGB", (16, 16), (0, 90, 200)).save(buffer, format="PNG")
table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run(name, auto_log_plt=False)
for step in range(steps):
    run.add_scalar("train/loss", step * 0.5, step=step)
    run.add_scalar("train/acc", step * 0.25, step=step)
    if step % 100 == 0:
        run.add_text(f"step {step}", tag="log", step=step)
        run.add_image(buffer.getvalue(), tag="sample", step=step)
run.write_result(steps=steps)
"""


def rows_per_job(steps: int) -> int:
    return 2 * steps + 2 * len(range(0, steps, 100))


def run_jobs(url: str, count: int, wave: int, steps: int) -> tuple[float, list[str]]:
    """Seconds for `count` jobs started `wave` at a time, and the stderr of those that failed."""
    start, running, failures = time.perf_counter(), [], []

    def reap(process: subprocess.Popen) -> None:
        _, err = process.communicate(timeout=900)
        if process.returncode:
            failures.append(err)

    for index in range(count):
        if len(running) >= wave:
            reap(running.pop(0))
        command = [sys.executable, "-c", JOB, url, f"job-{index}", str(steps)]
        running.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        )
    for process in running:
        reap(process)
    return time.perf_counter() - start, failures


def stored_rows(url: str) -> int:
    store = open_store(url)
    try:
        count = 0
        for run in store.runs():
            if run.run_id > 0:
                count += sum(len(store.scalars(run.run_id, tag)) for tag in ("train/loss", "train/acc"))
                count += len(store.texts(run.run_id)) + len(store.media(run.run_id))
        return count
    finally:
        store.close()


def fresh_database(server, name: str) -> str:
    import psycopg

    with psycopg.connect(server.url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = server.url.rsplit("/", 1)[0] + "/" + name
    tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP).new_debug_run("schema").close()
    return url


def bench_jobs(args: argparse.Namespace) -> None:
    expected = args.processes * rows_per_job(args.steps)
    with own_server(max_connections=args.processes + 20) as server:
        direct_url = fresh_database(server, "direct")
        direct_s, failed = run_jobs(direct_url, args.processes, args.wave, args.steps)
        assert not failed and stored_rows(direct_url) == expected, failed[:1]
        server.stop()
        server.settings["max_connections"] = 50
        server.start()
        pooled_db = fresh_database(server, "pooled")
        with bouncer(server.url, pool_size=args.pool) as pooler:
            pooled_s, failed = run_jobs(pooler.url_for(pooled_db), args.processes, args.wave, args.steps)
        assert not failed and stored_rows(pooled_db) == expected, failed[:1]
        refused_db = fresh_database(server, "refused")
        _, refused = run_jobs(refused_db, args.processes, args.wave, args.steps)
    names = sum("PgBouncer" in err for err in refused)
    direct, pooled = f"max_connections {args.processes + 20}", f"pool {args.pool}, max_connections 50"
    print(f"jobs: {args.processes} processes x {rows_per_job(args.steps)} rows, {args.wave} at a time")
    print(f"  direct, {direct}: {expected / direct_s:,.0f} rows/s ({direct_s:.1f} s)")
    print(f"  PgBouncer, {pooled}: {expected / pooled_s:,.0f} rows/s ({pooled_s:.1f} s)")
    print(f"  ratio PgBouncer / direct: {direct_s / pooled_s:.2f}x (target >= 0.5x); every row once in both")
    print(f"  direct, max_connections 50: {len(refused)}/{args.processes} refused, {names} naming PgBouncer")


PACE = 0.02  # seconds between bursts of 1,000 calls: 50,000 scalars/s, a pace the writer keeps up with


def add_scalar_costs(table: tb.ResultTable, count: int) -> tuple[float, float]:
    """(median seconds per `add_scalar` in bursts of 1,000 at a training loop's pace, seconds for
    `count` calls as fast as they go, close() included: the writer's throughput, back-pressure)."""
    run = table.new_run(f"cost-{time.monotonic_ns()}", auto_log_plt=False)
    add_scalar, bursts = run.add_scalar, []
    for burst in range(100):
        start = time.perf_counter()
        for step in range(burst * 1000, burst * 1000 + 1000):
            add_scalar("paced", step * 0.5)
        bursts.append((time.perf_counter() - start) / 1000)
        time.sleep(PACE)
    start = time.perf_counter()
    for step in range(count):
        add_scalar("flat out", step * 0.5)
    run.close()
    return statistics.median(bursts), time.perf_counter() - start


def bench_spool_cost(url: str, folder: str, count: int, repeats: int) -> None:
    nop = tb.NoCommitAction.NOP
    sqlite = tb.ResultTable(os.path.join(folder, "engine.db"), nocommit_action=nop)
    spooled = tb.ResultTable(url, spool=os.path.join(folder, "cost-spool.db"), nocommit_action=nop)
    engine, spool = [], []
    for _ in range(repeats):  # interleaved: load from other users of the machine hits both alike
        engine.append(add_scalar_costs(sqlite, count))
        spool.append(add_scalar_costs(spooled, count))
    spooled.ship(timeout=600)
    paced = [min(cost for cost, _ in costs) * 1e6 for costs in (engine, spool)]
    flat = [count / min(seconds for _, seconds in costs) for costs in (engine, spool)]
    print(
        f"spool add_scalar at a training pace: {paced[1]:.2f} us/call vs SQLite engine {paced[0]:.2f} us:"
        f" {paced[1] / paced[0]:.2f}x (target <= 1.2x; median of 100 bursts of 1,000, best of {repeats})"
    )
    print(f"  flat out, close() included: {flat[1]:,.0f} vs {flat[0]:,.0f} scalars/s:"
          f" {flat[1] / flat[0]:.2f}x (the spool's writer also journals each batch)")  # fmt: skip


SPOOL_WRITER = """
import sys, tallyboard as tb
table = tb.ResultTable(sys.argv[1], spool=sys.argv[2], nocommit_action=tb.NoCommitAction.NOP)
run = table.new_run("shipped", auto_log_plt=False)
for step in range(int(sys.argv[3])):
    run.add_scalar("train/loss", step * 0.5)
run.close()
"""


def bench_shipping(server, folder: str, count: int, repeats: int) -> None:
    direct, shipping = [], []
    for attempt in range(repeats):
        url = fresh_database(server, f"ship_{attempt}")
        start = time.perf_counter()
        table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
        run = table.new_run("direct", auto_log_plt=False)
        for step in range(count):
            run.add_scalar("train/loss", step * 0.5)
        run.close()
        direct.append(time.perf_counter() - start)
        spool = os.path.join(folder, f"ship-{attempt}.db")
        server.stop()  # the spool fills while the database is away; the writer exits without shipping
        subprocess.run([sys.executable, "-c", SPOOL_WRITER, url, spool, str(count)], check=True)
        server.start()
        start = time.perf_counter()
        ship_all(spool)
        shipping.append(time.perf_counter() - start)
        store = open_store(url)
        assert sum(len(store.scalars(r.run_id, "train/loss")) for r in store.runs()) == 2 * count
        store.close()
    rates = [count / min(times) for times in (direct, shipping)]
    print(f"shipping: {rates[1]:,.0f} rows/s vs direct PostgreSQL logging {rates[0]:,.0f} rows/s:"
          f" {rates[1] / rates[0]:.2f}x (target >= 0.8x; best of {repeats} x {count:,} scalars)")  # fmt: skip


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_outage(server, folder: str, seconds: float) -> None:
    url = fresh_database(server, "outage")
    table = tb.ResultTable(
        url, spool=os.path.join(folder, "outage.db"), nocommit_action=tb.NoCommitAction.NOP
    )
    run = table.new_run("outage", auto_log_plt=False)
    steps, stop, costs = [0], threading.Event(), []

    def train() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            for _ in range(100):
                run.add_scalar("train/loss", float(steps[0]), step=steps[0])
                steps[0] += 1
            costs.append((time.perf_counter() - start) / 100)
            time.sleep(0.001)

    trainer = threading.Thread(target=train)
    trainer.start()
    time.sleep(2)
    before_costs, before_rss, at_stop = len(costs), rss_bytes(), steps[0]
    server.stop()
    peak = before_rss
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, rss_bytes())
        time.sleep(0.2)
    during = steps[0] - at_stop
    outage_costs = costs[before_costs:]
    server.start()
    back = time.perf_counter()
    stop.set()
    trainer.join()
    run.close()
    assert table.ship(timeout=600)
    shipped_s = time.perf_counter() - back
    store = open_store(url)
    scalars = store.scalars(table.database_run_id(run.run_id), "train/loss")
    assert [row[1] for row in scalars] == list(range(steps[0])), "a row lost or doubled"
    store.close()
    print(f"outage {seconds:.0f} s: {during:,} rows logged while the server was down,"
          f" add_scalar median {statistics.median(costs[:before_costs]) * 1e6:.2f} us before vs"
          f" {statistics.median(outage_costs) * 1e6:.2f} us during,"
          f" RSS +{(peak - before_rss) / 2**20:.1f} MiB;"
          f" all {steps[0]:,} rows in the database once, {shipped_s:.1f} s after it returned")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=200)
    parser.add_argument("--wave", type=int, default=50, help="jobs started at a time")
    parser.add_argument("--pool", type=int, default=20, help="PgBouncer's server connections")
    parser.add_argument("--steps", type=int, default=500, help="steps per job (2 scalars each)")
    parser.add_argument("--scalars", type=int, default=200_000, help="scalars for the spool figures")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--outage", type=float, default=60.0, help="seconds (0: skip)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tallyboard-cluster-") as folder:
        bench_jobs(args)
        with own_server() as server:
            bench_spool_cost(fresh_database(server, "cost"), folder, args.scalars, args.repeats)
            bench_shipping(server, folder, args.scalars, args.repeats)
            if args.outage:
                bench_outage(server, folder, args.outage)


if __name__ == "__main__":
    main()

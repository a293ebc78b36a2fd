"""Remote logging (issue 30): many client processes through one `tallyboard serve --accept-writes`.

Every figure is a ratio against a reference measured in the same run on the same machine, on a
SQLite file and on a PostgreSQL server of the benchmark's own (tests/own_postgres.py):

- ingest: `--processes` client processes at once, each logging `--steps` steps (2 scalars a step,
  a text every 100) to `ResultTable("http://...")` with a spool of its own, until `ship()` says the
  server holds it all; against the same processes logging straight into the same store
  (`ResultTable(path_or_url)`, `close()` included). Rows per second, both printed, every row
  checked to be there once. Target >= 0.5x.
- dashboard while ingesting: the p50/p99 of `GET /api/runs` (the runs page's first call), asked
  over and over while the clients ship, against the same call on the idle server afterwards; and
  again while threads of the benchmark post ready-made shipments, so that the server is as busy
  but the CPUs are not taken by the client processes too.
- client add_scalar: the training thread's cost per `add_scalar` through a server against the
  SQLite engine's, at a training loop's pace (bench/cluster.py's measure). Target <= 1.2x.

    python bench/remote_ingest.py [--processes 50] [--steps 2000]

On a small machine (the CPUs fewer than `processes / 25`), it says so and runs fewer processes:
each process is a Python interpreter of its own, and what it measures then is the CPUs' queue.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the servers' helpers

from cluster import add_scalar_costs, fresh_database  # the same measures, not a copy

import tallyboard as tb
from own_postgres import own_server
from remote_server import READ_TOKEN, WRITE_TOKEN
from remote_server import own_server as own_tallyboard_server
from tallyboard.store import open_store
from tallyboard.store.http_shipping import entries_document
from tallyboard.store.records import Batch
from tallyboard.store.spool import SpoolStore
from tallyboard.store.spool_shipper import stop_shippers

CLIENT = """
import os, sys, tallyboard as tb
url, name, steps, spool = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
options = {"spool": spool} if spool else {}
table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP, **options)
run = table.new_run(name, auto_log_plt=False)
for step in range(steps):
    run.add_scalar("train/loss", step * 0.5, step=step)
    run.add_scalar("train/acc", step * 0.25, step=step)
    if step % 100 == 0:
        run.add_text(f"step {step}", tag="log", step=step)
run.close()
if not table.ship(timeout=600):
    sys.exit("not shipped")
"""
PER_CPU = 25  # client processes a CPU runs at once before the figure is the CPUs' queue's


def rows_per_job(steps: int) -> int:
    return 2 * steps + len(range(0, steps, 100))


def run_clients(url: str, count: int, steps: int, spools: str | None) -> float:
    """Seconds for `count` clients started at once to log (and, through a server, ship) everything."""
    env = {**os.environ, "TALLYBOARD_TOKEN": WRITE_TOKEN}
    start = time.perf_counter()

    def spool(index: int) -> str:
        return os.path.join(spools, f"spool-{index}.db") if spools else ""

    commands = [[sys.executable, "-c", CLIENT, url, f"job-{i}", str(steps), spool(i)] for i in range(count)]
    processes = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        for command in commands
    ]
    failures = []
    for process in processes:
        _, err = process.communicate(timeout=1800)
        if process.returncode:
            failures.append(err)
    assert not failures, failures[0][-2000:]
    return time.perf_counter() - start


def every_row_once(location: str, count: int, steps: int) -> None:
    with open_store(location) as store:
        runs = [run for run in store.runs() if run.experiment.startswith("job-")]
        assert len(runs) == count, f"{len(runs)} runs, not {count}"
        for run in runs:
            for tag in ("train/loss", "train/acc"):
                assert [row[1] for row in store.scalars(run.run_id, tag)] == list(range(steps)), run
            assert len(store.texts(run.run_id)) == len(range(0, steps, 100))


class PageTimer:
    """`GET /api/runs` over and over in a thread of its own; the seconds each answer took."""

    def __init__(self, url: str) -> None:
        self.url = url + "/api/runs?limit=50"
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PageTimer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        request = urllib.request.Request(self.url, headers={"Authorization": f"Bearer {READ_TOKEN}"})
        while not self._stop.is_set():
            start = time.perf_counter()
            with urllib.request.urlopen(request, timeout=60) as answer:
                answer.read()
            self.times.append(time.perf_counter() - start)
            self._stop.wait(0.05)


def percentiles(times: list[float]) -> str:
    ordered = sorted(times)
    p50, p99 = ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms ({len(ordered)} requests)"


def bench_engine(name: str, direct: str, served: str, folder: str, args: argparse.Namespace) -> None:
    rows = args.processes * rows_per_job(args.steps)
    direct_s = run_clients(direct, args.processes, args.steps, None)
    every_row_once(direct, args.processes, args.steps)
    spools = os.path.join(folder, f"spools-{name}")
    os.makedirs(spools)
    with own_tallyboard_server(served, "--token", READ_TOKEN) as server:
        with PageTimer(server.url) as busy:
            remote_s = run_clients(server.url, args.processes, args.steps, spools)
            load = os.getloadavg()[0]
        with PageTimer(server.url) as idle:
            time.sleep(5)
    every_row_once(served, args.processes, args.steps)
    print(f"{name}: {args.processes} processes x {rows_per_job(args.steps):,} rows at once")
    print(f"  direct ResultTable(store): {rows / direct_s:,.0f} rows/s ({direct_s:.1f} s)")
    print(f"  through the server: {rows / remote_s:,.0f} rows/s ({remote_s:.1f} s, ship() included)")
    print(f"  ratio server / direct: {direct_s / remote_s:.2f}x (target >= 0.5x); every row once in both")
    print(f"  GET /api/runs while ingesting: {percentiles(busy.times)}; idle: {percentiles(idle.times)}")
    print(f"  (load average {load:.1f} on {os.cpu_count()} CPUs at the end of the ingest: the clients,"
          " the server and the dashboard share them)")  # fmt: skip


def shipment(folder: str, steps: int) -> bytes:
    """One client's first request as it sends it: a run's start and `steps` steps, gzip'd JSON."""
    location = tb.ResultTable("http://127.0.0.1:9", spool=os.path.join(folder, "made.db")).location
    spool = SpoolStore(location.spool_path or "")
    run_id = spool.create_run({"experiment": "job-made", "start_time": time.time(), "status": "running"})
    batch = Batch()
    for tag, scale in (("train/loss", 0.5), ("train/acc", 0.25)):
        rows = [(0, step, None, step * 1e-3, step * scale) for step in range(steps)]
        batch.scalars.append((run_id, tag, rows))
    spool.write_batch(batch)
    body = gzip.compress(entries_document(spool.pending(0, 64, 2**30)), 1)
    spool.close()
    stop_shippers(timeout=0)
    return body


def bench_page_while_the_server_ingests(folder: str, steps: int) -> None:
    """The dashboard's p99 with the server busy ingesting but the CPUs not taken by 50 clients:
    threads of this process post ready-made shipments (each a new spool) as fast as it takes them."""
    body, stop, posted = shipment(folder, steps), threading.Event(), [0]
    with own_tallyboard_server(os.path.join(folder, "pages.db"), "--token", READ_TOKEN) as server:

        def post() -> None:
            while not stop.is_set():
                request = urllib.request.Request(
                    f"{server.url}/api/ingest/v1/spools/{uuid.uuid4().hex}/entries", data=body, method="POST",
                    headers={"Authorization": f"Bearer {WRITE_TOKEN}", "Content-Encoding": "gzip"},
                )  # fmt: skip
                urllib.request.urlopen(request, timeout=60).read()
                posted[0] += 1

        posters = [threading.Thread(target=post) for _ in range(4)]
        for thread in posters:
            thread.start()
        with PageTimer(server.url) as busy:
            time.sleep(10)
        stop.set()
        for thread in posters:
            thread.join()
        with PageTimer(server.url) as idle:
            time.sleep(5)
    rows = posted[0] * 2 * steps
    print(f"GET /api/runs while 4 threads post shipments of {2 * steps:,} rows ({rows / 10:,.0f} rows/s"
          f" ingested): {percentiles(busy.times)}; idle afterwards: {percentiles(idle.times)}")  # fmt: skip


def bench_client_cost(folder: str, count: int, repeats: int) -> None:
    nop = tb.NoCommitAction.NOP
    with own_tallyboard_server(os.path.join(folder, "cost-served.db")) as server:
        sqlite = tb.ResultTable(os.path.join(folder, "engine.db"), nocommit_action=nop)
        remote = tb.ResultTable(server.url, token=WRITE_TOKEN, spool=os.path.join(folder, "cost.db"),
                                nocommit_action=nop)  # fmt: skip
        engine, client = [], []
        for _ in range(repeats):  # interleaved: load from other users of the machine hits both alike
            engine.append(add_scalar_costs(sqlite, count))
            client.append(add_scalar_costs(remote, count))
        assert remote.ship(timeout=600)
    paced = [min(cost for cost, _ in costs) * 1e6 for costs in (engine, client)]
    print(
        f"client add_scalar at a training pace: {paced[1]:.2f} us/call vs SQLite engine {paced[0]:.2f} us:"
        f" {paced[1] / paced[0]:.2f}x (target <= 1.2x; median of 100 bursts of 1,000, best of {repeats})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=50)
    parser.add_argument("--steps", type=int, default=2000, help="steps per process (2 scalars each)")
    parser.add_argument("--scalars", type=int, default=100_000, help="scalars for the client's cost")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--engines", default="sqlite,postgres")
    args = parser.parse_args()
    cpus = os.cpu_count() or 1
    if args.processes > cpus * PER_CPU:
        print(f"{cpus} CPUs: {args.processes} processes at once would measure the CPUs' queue, not the"
              f" server; running {cpus * PER_CPU} ({PER_CPU} a CPU)")  # fmt: skip
        args.processes = cpus * PER_CPU
    with tempfile.TemporaryDirectory(prefix="tallyboard-remote-") as folder:
        if "sqlite" in args.engines:
            direct, served = os.path.join(folder, "direct.db"), os.path.join(folder, "served.db")
            bench_engine("SQLite", direct, served, folder, args)
        if "postgres" in args.engines:
            with own_server(max_connections=args.processes + 20) as pg:
                direct, served = fresh_database(pg, "direct"), fresh_database(pg, "served")
                bench_engine("PostgreSQL", direct, served, folder, args)
        bench_page_while_the_server_ingests(folder, args.steps)
        bench_client_cost(folder, args.scalars, args.repeats)


if __name__ == "__main__":
    main()

"""The dashboard's performance figures (issue 4), each next to a reference measured in this run.

1. Chart of one 1,000,000-point series: server time and payload of /api/series at a chart width,
   against shipping every point (what DeepBoard does on each refresh). Targets: < 100 ms, < 100 kB.
   KEPT: the same request again while nothing committed, answered from dashboard/answer_cache.py.
   The first request of a fresh server (COLD) reads the series' `scalar_blocks` summaries, not its
   points; with --postgres it is measured again on a PostgreSQL server (a scratch database).
2. Runs table of 10,000 runs: first screen (page + first page of rows, cold cache) and sort/filter
   server time, against encoding the whole table for the browser. Targets: < 1 s and < 200 ms.
3. Live poll of 10 running runs (4 series each): only points after the client's last ones, against
   re-sending their whole series. Target: < 20 ms per poll.
4. Memory: resident-set growth while serving hundreds of chart requests and streaming the
   1,000,000-point CSV, next to the size of the table. Target: bounded (no growth with data size).
6. Live stream: 50 open charts (event streams, one run and metric each) following 10 running runs
   that log 5 series at 10 points/s, served by `serve` in a process of its own: that process's CPU
   over --live-seconds, against the same 50 charts polling /api/live every 2 s (the way before),
   alternated in one run. Target: < 5% of one core, and bytes sent ~ the new points only.
5. Runs table of --browser-runs (100,000) runs in headless Chromium: first screen (navigation to
   the first row drawn) from a fresh server each time, against the way before it (every row
   loaded before the first page), alternated in one run. Target: < 1 s. Needs playwright and
   /usr/bin/chromium; skipped with a message when they are missing, or with --browser-runs 0.

All data is logged through the public API (ResultTable / LogWriter) into SQLite files in a temporary
folder; requests go through the real ASGI app in-process (starlette's TestClient), so "server time"
includes routing, JSON encoding and the security middleware. Times are medians of --repeats.

    python bench/dashboard.py [--points 1000000] [--runs 10000] [--repeats 7] [--only-chart]
                              [--postgres postgresql://postgres@127.0.0.1:5432/test]
                              [--browser-runs 100000] [--browser-table FILE] [--only-browser]
                              [--live-seconds 20] [--only-live]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from starlette.testclient import TestClient

import tallyboard as tb
from tallyboard.dashboard import create_app
from tallyboard.store import block_reads

BASE = "http://127.0.0.1"
WIDTH = 1000  # a wide chart, in pixels
NOP = tb.NoCommitAction.NOP


def median_ms(action: Callable[[int], object], repeats: int) -> float:
    """Median wall time of `action(i)` in ms (i lets an action vary its request to dodge caches)."""
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        action(i)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def line(label: str, ours: float, reference: float, unit: str, target: str) -> None:
    ratio = ours / reference if reference else float("nan")
    figures = f"{ours:>10.1f} {unit:<3} reference {reference:>10.1f} {unit:<3} ratio {ratio:6.3f}"
    print(f"  {label:<44} {figures}  {target}")


# -- 1. one long series -------------------------------------------------------------------------
def log_long_series(path: Path | str, points: int) -> int:
    table = tb.ResultTable(path, nocommit_action=NOP)
    with table.new_run("long", cli={"points": points}, auto_log_plt=False) as run:
        for step in range(points):
            spike = 50.0 if step == points * 7 // 9 else 0.0
            run.add_scalar("train/loss", math.sin(step / 1000) + spike, step=step, epoch=step // 10_000)
    table.close()
    return run.run_id


def cold_chart_ms(path: Path | str, run_id: int, repeats: int) -> tuple[float, float]:
    """Median wall and CPU time of the first chart request of a fresh server (nothing cached)."""
    wall, cpu = [], []
    for _ in range(repeats):
        with TestClient(create_app(str(path)), base_url=BASE) as client:
            start, start_cpu = time.perf_counter(), time.process_time()
            client.get(f"/api/series?runs={run_id}&metric=loss&width={WIDTH}").raise_for_status()
            wall.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)
            client.app.state.dashboard.queries.close()  # its page caches would weigh on section 4
    return statistics.median(wall), statistics.median(cpu)


def bench_chart(path: Path | str, points: int, repeats: int, engine: str = "SQLite") -> None:
    run_id = log_long_series(path, points)
    cold_ms, cold_cpu_ms = cold_chart_ms(path, run_id, repeats)
    client = TestClient(create_app(str(path)), base_url=BASE)
    client.get(f"/api/series?runs={run_id}&metric=loss&width={WIDTH}")
    queries = client.app.state.dashboard.queries
    key_rows = queries.tags_of_runs([run_id])

    def every_point(_: int) -> bytes:
        rows = queries.points(_series_key(key_rows[0]), 0, 2**62)
        return json.dumps({"step": [r[0] for r in rows], "value": [r[3] for r in rows]}).encode()

    reference_ms = median_ms(every_point, max(3, repeats // 2))
    reference_bytes = len(every_point(0))
    key = _series_key(key_rows[0])
    ids = (key.run_id, key.tag_id, key.rep)  # a scan of every point: each block decoded
    scan_ms = median_ms(lambda _: [max(points.values) for points in block_reads.blocks(queries._all, ids)], 3)
    sizes = []

    def chart(i: int) -> None:  # a new width each time: no answer comes from the cache
        response = client.get(f"/api/series?runs={run_id}&metric=loss&width={WIDTH + i}")
        sizes.append(len(response.content))
        chart.last = response.json()

    ours_ms = median_ms(chart, repeats)
    again = f"/api/series?runs={run_id}&metric=loss&width={WIDTH}"
    kept_ms = median_ms(lambda _: client.get(again), repeats)  # the table unchanged since
    series = chart.last["series"][0]
    buckets = len(series["value"])
    print(f"1. chart of one {points:,}-point series at {WIDTH} px on {engine} ({buckets} buckets returned)")
    line("server time, COLD: first request, fresh server", cold_ms, reference_ms, "ms", "target < 100 ms")
    print(
        f"  (cold: {cold_cpu_ms:.1f} ms of CPU, median of {repeats} fresh servers; one SQL scan of the"
        f" series for MIN and MAX, what any read of the points costs, takes {scan_ms:.1f} ms)"
    )
    line("server time, WARM: any later width/range/growth", ours_ms, reference_ms, "ms", "target < 100 ms")
    line("server time, KEPT: same request, no commit", kept_ms, reference_ms, "ms", "(answer_cache)")
    line("payload", statistics.median(sizes) / 1000, reference_bytes / 1000, "kB", "target < 100 kB")
    highest = max(v for v in series["max"] if v is not None)
    print(f"  spike kept: max of bucket maxima = {highest:.1f} (logged 50 + sin)")
    lo, hi = points // 2, points // 2 + 999
    zoom = client.get(
        f"/api/series?runs={run_id}&metric=loss&width={WIDTH}&step_min={lo}&step_max={hi}"
    ).json()
    zoom_ms = median_ms(lambda i: client.get(f"/api/series?runs={run_id}&metric=loss&width={WIDTH - i}"
                                             f"&step_min={lo}&step_max={hi}"), repeats)  # fmt: skip
    shown = len(zoom["series"][0]["value"])
    print(f"  zoom to 1,000 steps: {shown} raw points in {zoom_ms:.1f} ms (full resolution)")
    client.close()


def _series_key(row: tuple):
    from tallyboard.store.dashboard_reads import SeriesKey

    return SeriesKey(row[0], row[1], row[3])


# -- 2. many runs -------------------------------------------------------------------------------
def log_many_runs(path: Path, runs: int) -> None:
    table = tb.ResultTable(path, nocommit_action=NOP)
    for i in range(runs):
        run = table.new_run("sweep", cli={"i": i}, comment=None if i % 3 else f"run {i}", auto_log_plt=False)
        hparams = {
            "lr": 10.0 ** -(i % 5),
            "batch_size": 32 * (i % 4 + 1),
            "optimizer": ("adam", "sgd")[i % 2],
        }
        if i % 7 == 0:
            hparams["lr"] = "auto"  # a mixed-type column
        run.add_hparams(**hparams)
        if i % 10:
            run.write_result(accuracy=(i * 7919 % 1000) / 1000, loss=1 / (i + 1))
        else:
            run.close()  # finished without results: empty cells
    table.close()


def bench_table(path: Path, runs: int, repeats: int) -> None:
    log_many_runs(path, runs)
    cold = []
    for _ in range(3):  # a new app each time: the first page finds its view from nothing
        client = TestClient(create_app(str(path)), base_url=BASE)
        start = time.perf_counter()
        client.get("/")
        first = client.get("/api/runs?limit=100")
        cold.append((time.perf_counter() - start) * 1000)
    assert first.json()["total"] == runs
    queries = client.app.state.dashboard.queries

    def whole_table(_: int) -> bytes:
        rows = queries.runs()
        return json.dumps(rows, default=str).encode()

    reference_ms = median_ms(whole_table, 3)
    print(f"2. runs table of {runs:,} runs (100 rows per page)")
    line(
        "first screen (page + rows, cold cache)",
        statistics.median(cold),
        reference_ms,
        "ms",
        "target < 1000 ms",
    )
    sort_ms = median_ms(lambda i: client.get(f"/api/runs?limit=100&sort=lr&desc={i % 2}"), repeats)
    line("sort by a mixed-type hparam", sort_ms, reference_ms, "ms", "target < 200 ms")
    expression = 'lr < 1e-2 and optimizer == "adam" or accuracy == null'
    filter_ms = median_ms(lambda i: client.get("/api/runs", params={"limit": 100, "filter": expression,
                                                                     "offset": i}), repeats)  # fmt: skip
    line("filter expression", filter_ms, reference_ms, "ms", "target < 200 ms")
    page_bytes = len(first.content)
    line(
        "first page payload",
        page_bytes / 1000,
        len(whole_table(0)) / 1000,
        "kB",
        "(whole table for reference)",
    )
    client.close()


# -- 3. live runs -------------------------------------------------------------------------------
def bench_live(path: Path, repeats: int) -> None:
    table = tb.ResultTable(path, nocommit_action=NOP)
    writers = [table.new_run("live", cli={"i": i}, auto_log_plt=False) for i in range(10)]
    tags = ("train/loss", "train/accuracy", "val/loss", "val/accuracy")
    for writer in writers:
        for step in range(5000):
            for tag in tags:
                writer.add_scalar(tag, 1 / (step + 1), step=step)
        writer.flush()
    client = TestClient(create_app(str(path)), base_url=BASE)
    ids = ",".join(str(w.run_id) for w in writers)
    full = client.get(f"/api/live?runs={ids}").json()["series"]  # no cursors: everything
    cursors = {(s["run_id"], s["tag_id"], s["rep"]): s["last_step"] for s in full}
    step = [5000]

    def poll(_: int) -> None:
        for writer in writers:  # a new point per series since the last poll (logged off the clock)
            for tag in tags:
                writer.add_scalar(tag, 0.5, step=step[0])
            writer.flush()
        step[0] += 1
        start = time.perf_counter()
        after = [f"{r}:{t}:{p}:{s}" for (r, t, p), s in cursors.items()]
        reply = client.get("/api/live", params={"runs": ids, "after": after}).json()
        poll.times.append((time.perf_counter() - start) * 1000)
        for series in reply["series"]:
            cursors[(series["run_id"], series["tag_id"], series["rep"])] = series["last_step"]
        poll.sizes.append(sum(len(s["value"]) for s in reply["series"]))

    poll.times, poll.sizes = [], []
    for i in range(repeats):
        poll(i)

    def resend_everything(_: int) -> None:
        client.get(f"/api/live?runs={ids}")

    reference_ms = median_ms(resend_everything, max(3, repeats // 2))
    print(f"3. live poll of 10 running runs x {len(tags)} series (5,000 points each so far)")
    line("incremental poll", statistics.median(poll.times), reference_ms, "ms", "target < 20 ms")
    print(f"  points sent per poll: {statistics.median(poll.sizes):.0f} (one new per series; "
          f"re-sending would be {sum(len(s['step']) for s in full):,})")  # fmt: skip
    for writer in writers:
        writer.close()
    table.close()
    client.close()


# -- 4. memory ----------------------------------------------------------------------------------
def bench_memory(path: Path) -> None:
    client = TestClient(create_app(str(path)), base_url=BASE)
    run_id = 1
    client.get(f"/api/series?runs={run_id}&metric=loss&width={WIDTH}")
    rss = [rss_mb()]
    for _ in range(2):  # two rounds: growth in the second shows whether memory keeps climbing
        for i in range(300):  # charts at many widths and zoom ranges
            client.get(f"/api/series?runs={run_id}&metric=loss&width={500 + i}&step_min={i * 1000}")
        with client.stream("GET", f"/api/runs/{run_id}/scalars.csv?tag=train/loss") as response:
            rows = sum(chunk.count(b"\n") for chunk in response.iter_bytes())
        rss.append(rss_mb())
    size = sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())
    print("4. memory: two rounds of 300 chart requests + streaming the full CSV")
    print(
        f"  table on disk {size / 1e6:.1f} MB, CSV rows streamed {rows - 1:,} per round; resident set "
        f"{rss[0]:.1f} -> {rss[1]:.1f} -> {rss[2]:.1f} MB (round 2 adds {rss[2] - rss[1]:+.1f} MB: bounded)"
    )
    client.close()


# -- 5. the runs table in a real browser --------------------------------------------------------
@contextmanager
def served(path: Path) -> Iterator[str]:
    """`serve` in a process of its own, as `tallyboard serve` runs (a server thread in this process
    would share its interpreter lock with the browser's driver); yields the base URL."""
    with served_process(path) as (url, _):
        yield url


@contextmanager
def served_process(path: Path, src: Path | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """`served`, also yielding the server's process (whose CPU time section 6 reads); with `src`,
    the package of that folder serves (bench/dashboard_ab.py: another revision's code)."""
    code = f"from tallyboard.dashboard import serve; serve({str(path)!r}, port=0)"
    env = None if src is None else {**os.environ, "PYTHONPATH": str(src)}
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        found = re.search(r"(http://[^/\s]+)/", server.stdout.readline() if server.stdout else "")
        assert found, f"the dashboard of {src or 'this checkout'} did not start"
        yield found.group(1), server
    finally:
        server.terminate()
        server.wait(30)


def bench_browser(path: Path, runs: int, repeats: int) -> None:
    """Cold first screen in Chromium: a fresh server per trial, ours and the reference alternated."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from e2e.browser import browser_page, chromium_available

    if not chromium_available():
        print("5. runs table in Chromium: skipped (playwright or /usr/bin/chromium missing)")
        return
    if not path.exists():
        log_many_runs(path, runs)
    ours, reference = [], []
    with browser_page(1600, 900) as page:
        for trial in range(2 * repeats):
            load_everything_first = trial % 2 == 1
            with served(path) as url:
                page.context.clear_cookies()
                start = time.perf_counter()
                if load_everything_first:  # what the first page cost before: every row, then a page
                    page.request.get(f"{url}/api/runs", params={"q": "run", "limit": 1})  # search: loads all
                before = (time.perf_counter() - start) * 1000
                page.goto(f"{url}/?trial={trial}")  # a new URL: nothing comes from the cache
                page.wait_for_selector("#runs tbody tr[data-run]", timeout=120_000)
                # Read in the page (the driver's own wait lags on a loaded machine): ms from the
                # start of the navigation to the first rows drawn.
                drawn = page.evaluate("performance.getEntriesByName('tallyboard:first-rows')[0].startTime")
                elapsed = before + drawn
                shown = page.inner_text("#count")
            (reference if load_everything_first else ours).append(elapsed)
    print(f"5. runs table of {shown} in headless Chromium (a fresh server each time)")
    line("first screen: navigation to first row drawn", statistics.median(ours),
         statistics.median(reference), "ms", "target < 1000 ms")  # fmt: skip
    print(f"  (reference: every row loaded before the first page, as before; trials alternated,"
          f" {repeats} each: ours {', '.join(f'{t:.0f}' for t in ours)} ms)")  # fmt: skip


# -- 6. live stream ------------------------------------------------------------------------------
LIVE_TAGS = ("train/loss", "train/accuracy", "val/loss", "val/accuracy", "sys/cpu")


def bench_stream(path: Path, seconds: float) -> None:
    table = tb.ResultTable(path, nocommit_action=NOP)
    writers = [table.new_run("live", cli={"i": i}, auto_log_plt=False) for i in range(10)]
    step = [0]

    def log_points(count: int) -> None:
        for _ in range(count):
            for writer in writers:
                for tag in LIVE_TAGS:
                    writer.add_scalar(tag, 1 / (step[0] + 1), step=step[0])
            step[0] += 1
        for writer in writers:
            writer.flush()

    log_points(1000)
    charts = [(writers[i % 10].run_id, LIVE_TAGS[i // 10].partition("/")[2]) for i in range(50)]
    results = {}
    with served_process(path) as (url, server):
        cpu = psutil_process(server.pid)
        for way in ("poll", "stream", "poll", "stream"):  # alternated: the load of the machine drifts
            stop = threading.Event()
            sent = [0]
            clients = [
                threading.Thread(target=follow_chart, args=(url, way, run, metric, stop, sent))
                for run, metric in charts
            ]
            for client in clients:
                client.start()
            time.sleep(2)  # connected, first answers sent
            before, started, logged = sum(cpu.cpu_times()[:2]), time.perf_counter(), step[0]
            while time.perf_counter() - started < seconds:
                log_points(1)
                time.sleep(0.1)
            used = sum(cpu.cpu_times()[:2]) - before
            wall = time.perf_counter() - started
            stop.set()
            for client in clients:
                client.join(10)
            results.setdefault(way, []).append((used / wall * 100, sent[0] / wall, (step[0] - logged) / wall))
    for writer in writers:
        writer.close()
    table.close()
    print("6. live: 50 charts following 10 running runs (5 series each, 10 points/s per series)")
    stream = min(r[0] for r in results["stream"])
    poll = min(r[0] for r in results["poll"])
    line(
        "server CPU, % of one core (event streams)", stream, poll, "%", "target < 5% (reference: 2-s polling)"
    )
    for way, rows in results.items():
        print(f"  {way}: bytes/s sent {statistics.median(r[1] for r in rows):,.0f}")


def psutil_process(pid: int):
    import psutil  # present wherever the dashboard's tests run; only this benchmark uses it

    return psutil.Process(pid)


def follow_chart(
    url: str, way: str, run_id: int, metric: str, stop: threading.Event, sent: list[int]
) -> None:
    """One chart: an event stream of its run and metric, or /api/live every 2 s with its cursors."""
    import httpx

    with httpx.Client(base_url=url, timeout=30) as http:
        if way == "stream":
            with http.stream("GET", "/api/stream", params={"runs": run_id, "metric": metric}) as response:
                for chunk in response.iter_bytes():
                    sent[0] += len(chunk)
                    if stop.is_set():
                        return
            return
        cursors: dict[tuple, int] = {}
        while not stop.is_set():
            after = [f"{r}:{t}:{p}:{s}" for (r, t, p), s in cursors.items()]
            reply = http.get("/api/live", params={"runs": run_id, "metric": metric, "after": after})
            sent[0] += len(reply.content)
            for series in reply.json()["series"]:
                cursors[(series["run_id"], series["tag_id"], series["rep"])] = series["last_step"]
            stop.wait(2)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only-chart", action="store_true", help="just section 1 (the long series)")
    parser.add_argument("--postgres", metavar="URL", help="also run section 1 on this PostgreSQL server")
    parser.add_argument("--browser-runs", type=int, default=100_000, help="runs of section 5 (0: skip it)")
    parser.add_argument("--browser-table", type=Path, help="section 5 on this table (made if missing)")
    parser.add_argument("--only-browser", action="store_true", help="just section 5")
    parser.add_argument("--live-seconds", type=float, default=20, help="measured time per way in section 6")
    parser.add_argument("--only-live", action="store_true", help="just section 6")
    args = parser.parse_args()
    if args.browser_table is not None:
        args.browser_table = args.browser_table.resolve()
    from postgres import fresh_schema, scratch_database  # bench/postgres.py, before leaving bench/

    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # no git checkout here: runs start without capturing a diff
        start = time.perf_counter()
        if args.only_live:
            bench_stream(Path(folder) / "stream.db", args.live_seconds)
            return
        if args.browser_runs:
            table = args.browser_table or Path(folder) / "browser.db"
            bench_browser(table, args.browser_runs, max(3, args.repeats // 2))
        if args.only_browser:
            return
        if args.postgres:
            with scratch_database(args.postgres) as database:
                bench_chart(fresh_schema(database), args.points, args.repeats, "PostgreSQL")
        bench_chart(Path(folder) / "long.db", args.points, args.repeats)
        if args.only_chart:
            return
        bench_memory(Path(folder) / "long.db")
        bench_table(Path(folder) / "many.db", args.runs, args.repeats)
        bench_live(Path(folder) / "live.db", args.repeats)
        bench_stream(Path(folder) / "stream.db", args.live_seconds)
        print(f"(total {time.perf_counter() - start:.0f} s including logging the data)")


if __name__ == "__main__":
    main()

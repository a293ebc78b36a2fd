"""The dashboard in headless Chromium against bare pages measured in the same run (issue 32).

1. First chart of a 1,000,000-point series: the run page, from navigation to its first chart drawn
   (uPlot's first `draw`), against a reference page that loads the uPlot copy the package ships
   (static/vendor/uplot) from a plain static server and draws the same downsampled series (the
   one the run page drew: the answer of /api/series the server inlined into the page, at
   first_view.FIRST_CHART_WIDTH; value, min/max band) from data inline in the page.
   Target: <= 1.5x.
2. First rows of a 100,000-run table: the runs page, from navigation to its first rows drawn,
   against a reference page that builds a table of the same rows and columns from inline data.
   Target: <= 1.5x.
3. Compare page of 20 runs x 50 metrics: bytes transferred (compressed, headers included, as the
   browser's resource timing counts them) by the requests started before its first chart was
   drawn, and the charts' series requests made before and after scrolling to the bottom (charts
   below the fold load as they come into view). Target: <= 0.5 MB.

Every trial is a fresh browser context (nothing cached, as on a first visit), ours and the reference
alternated; figures are medians of --repeats. Sections 1 and 2 time each page twice: arriving from a
page of another site (`http://localhost:...`: a user comes from another site or a new tab), the
figure the targets are judged on, and from the context's first `about:blank`, shown because it is
not the same for both: Chromium's first navigation from `about:blank` stays in the blank page's
renderer process unless the page sends `Cross-Origin-Opener-Policy`, which ours does
(dashboard/security.py) and the bare reference does not; ours then waits for a new process (~80 ms
here), which both pay when arriving from another site. The server is started once per section and
keeps its answers while the table is unchanged (dashboard/answer_cache.py): ours' first trial is
answered without them, the others from them, as a reload or a second visitor is. The dashboard runs
as `tallyboard serve` does, in a process of its own; the reference pages are served by `python -m
http.server`, also a process of its own. The 1M-point series and the compare sweep are logged
through the public API; the 100,000 runs are bench/scale.py's bulk content (20 hparams and 5
results each). The tables are cached under --cache (default bench/.scale-cache/, gitignored). Needs
playwright and /usr/bin/chromium (Debian's), as the browser tests do.

    python bench/dashboard_chromium.py [--points 1000000] [--runs 100000] [--repeats 5]
                                       [--cache DIR] [--only chart,table,compare]
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import tallyboard as tb

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "tests"))
from scale import Size, build  # noqa: E402 (bench/scale.py)

from dashboard import line, log_long_series, served  # noqa: E402 (bench/dashboard.py)
from e2e.browser import chromium_available, launched_chromium, page_in  # noqa: E402

STATIC = BENCH.parent / "src" / "tallyboard" / "dashboard" / "static"
NOP = tb.NoCommitAction.NOP
VIEWPORT = (1440, 900)
WAIT_MS = 120_000


# -- the reference pages ------------------------------------------------------------------------
REFERENCE_CHART = """<!doctype html><html><head><meta charset="utf-8"><title>reference chart</title>
<link rel="stylesheet" href="uPlot.min.css"><script src="uPlot.iife.min.js"></script></head>
<body><div id="chart"></div><script>
const data = DATA;
const edge = { stroke: "transparent", points: { show: false } };
const drawn = () => {
  const mark = "reference:first-chart";
  if (!performance.getEntriesByName(mark).length) performance.mark(mark);
};
new uPlot({ width: WIDTH, height: 250, legend: { show: false },
  series: [{}, edge, edge, { stroke: "#5b9cff", width: 1.75, spanGaps: true }],
  bands: [{ series: [2, 1], fill: "rgba(91,156,255,0.16)" }], hooks: { draw: [drawn] },
}, data, document.getElementById("chart"));
</script></body></html>"""

REFERENCE_TABLE = """<!doctype html><html><head><meta charset="utf-8"><title>reference table</title></head>
<body><table id="runs"></table><script>
const page = DATA;
const table = document.getElementById("runs");
const head = table.createTHead().insertRow();
for (const c of page.columns) head.insertCell().textContent = c.alias;
const body = table.createTBody();
for (const row of page.rows) {
  const tr = body.insertRow();
  for (const c of page.columns) {
    const v = c.kind === "run" ? row[c.name] : row.cells[c.name];
    tr.insertCell().textContent = v === null || v === undefined ? "" : String(v);
  }
}
performance.mark("reference:first-rows");
</script></body></html>"""


@contextmanager
def reference_server(pages: dict[str, str]) -> Iterator[str]:
    """`pages` (name -> HTML) and the shipped uPlot files served by `python -m http.server`."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in ("uPlot.iife.min.js", "uPlot.min.css"):
            (root / name).write_bytes((STATIC / "vendor" / "uplot" / name).read_bytes())
        for name, html in {**pages, "blank.html": "<!doctype html><title>elsewhere</title>"}.items():
            (root / name).write_text(html, encoding="utf-8")
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", folder],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_for(url)
            yield url
        finally:
            server.terminate()
            server.wait(30)


def _wait_for(url: str) -> None:
    import httpx

    for _ in range(500):
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            import time

            time.sleep(0.02)
    raise RuntimeError(f"{url} did not start")


# -- measuring ----------------------------------------------------------------------------------
def elsewhere(reference: str) -> str:
    """A page of another site than both the dashboard's and the reference's (127.0.0.1)."""
    return reference.replace("127.0.0.1", "localhost") + "/blank.html"


def mark_ms(browser, url: str, mark: str, ready: str, start: str | None = None) -> float:
    """ms from the start of the navigation to `mark`, in a fresh context (cold cache), arriving
    from `start` (else from the context's first about:blank)."""
    with page_in(browser, *VIEWPORT) as page:
        if start:
            page.goto(start)
        page.goto(url)
        wait_for_mark(page, mark)
        page.wait_for_selector(ready, timeout=WAIT_MS)
        assert not page.errors, page.errors
        return float(page.evaluate(f"performance.getEntriesByName({mark!r})[0].startTime"))


def wait_for_mark(page, mark: str) -> None:
    """Until the page has set `mark` (polled from outside: the pages' CSP forbids the evaluated
    predicate of `wait_for_function`; the figure is the mark's own time, so polling adds nothing)."""
    for _ in range(WAIT_MS // 20):
        if page.evaluate(f"performance.getEntriesByName({mark!r}).length > 0"):
            return
        page.wait_for_timeout(20)
    raise TimeoutError(f"{mark} was not set within {WAIT_MS} ms")


def alternated(repeats: int, ours: Callable[[], float], reference: Callable[[], float]) -> tuple[list, list]:
    mine, theirs = [], []
    for _ in range(repeats):
        mine.append(ours())
        theirs.append(reference())
    return mine, theirs


def both_starts(browser, repeats: int, reference: str, ours: tuple, theirs: tuple, what: str) -> None:
    """Ours and the reference (each a URL, its mark and a selector that shows it drew) alternated,
    arriving from another site (the figure the target is on), then from about:blank."""
    for start in (elsewhere(reference), None):
        mine, bare = alternated(
            repeats,
            partial(mark_ms, browser, *ours, start=start),
            partial(mark_ms, browser, *theirs, start=start),
        )
        label = f"{what}, {'from another site' if start else 'from about:blank'}"
        report(label, mine, bare, "target <= 1.5x" if start else "shown")


def report(label: str, mine: list[float], theirs: list[float], target: str) -> None:
    line(label, statistics.median(mine), statistics.median(theirs), "ms", target)
    print(f"    (trials, ms: ours {', '.join(f'{t:.0f}' for t in mine)};"
          f" reference {', '.join(f'{t:.0f}' for t in theirs)})")  # fmt: skip


def decoded_columns(series: dict) -> list[list]:
    """[steps, min, max, value] of one compact series (dashboard/downsample.py `Series.to_json`)."""
    steps = series["step"]
    if isinstance(steps, dict):
        steps = [steps["first"] + i * steps["stride"] for i in range(steps["count"])]
    value = [None if isinstance(v, str) else v for v in series["value"]]
    return [steps, series.get("min", value), series.get("max", value), value]


FIRST_SERIES = """(() => {
  const node = document.getElementById('first-view');
  const inlined = Object.entries(node ? JSON.parse(node.textContent) : {});
  const found = inlined.find(([url]) => url.startsWith('/api/series?'));
  return found ? found[1] : null;
})()"""


# -- 1. the first chart -------------------------------------------------------------------------
def bench_chart(browser, path: Path, points: int, repeats: int) -> None:
    if not path.exists():
        log_long_series(path, points)
    with served(path) as url:
        with page_in(browser, *VIEWPORT) as page:  # the chart's width, as the run page lays it out
            page.goto(f"{url}/runs/1?live=0")
            wait_for_mark(page, "tallyboard:first-chart")
            width = int(page.evaluate("document.querySelector('.chart-card .plot').clientWidth"))
            inlined = page.evaluate(FIRST_SERIES)  # the series the page drew: inlined, else fetched
            asked = [r for r in page.evaluate("performance.getEntriesByType('resource').map((e) => e.name)")
                     if "/api/series" in r]  # fmt: skip
        answer = inlined or json.loads(_get(asked[0]))
        data = decoded_columns(answer["series"][0])
        html = REFERENCE_CHART.replace("DATA", json.dumps(data)).replace("WIDTH", str(width))
        with reference_server({"chart.html": html}) as reference:
            buckets = len(data[0])
            print(f"1. first chart of a {points:,}-point series ({buckets} buckets, {width} px) in Chromium")
            ours = (f"{url}/runs/1", "tallyboard:first-chart", ".chart-card .uplot")
            theirs = (f"{reference}/chart.html", "reference:first-chart", ".uplot")
            both_starts(browser, repeats, reference, ours, theirs, "first chart drawn")


def _get(url: str) -> bytes:
    import httpx

    return httpx.get(url, timeout=60).content


# -- 2. the runs table --------------------------------------------------------------------------
# each page's mark of its first rows, and what shows they are drawn
FIRST_ROWS = ("tallyboard:first-rows", "#runs tbody tr[data-run]")
REFERENCE_ROWS = ("reference:first-rows", "#runs tbody tr")


def bench_table(browser, path: Path, runs: int, repeats: int) -> None:
    if not path.exists():
        build(str(path), Size(scalars=0, runs=runs), appended=0)
    with served(path) as url:
        total = json.loads(_get(f"{url}/api/runs/count"))["total"]
        with reference_server({"table.html": reference_table(url)}) as reference:
            print(f"2. first rows of a {total:,}-run table in Chromium")
            ours = (f"{url}/", *FIRST_ROWS)
            theirs = (f"{reference}/table.html", *REFERENCE_ROWS)
            both_starts(browser, repeats, reference, ours, theirs, "first rows drawn")


def reference_table(url: str) -> str:
    """The bare page building the first 100 rows of the table `url` serves, from inline data."""
    page = json.loads(_get(f"{url}/api/runs?limit=100"))
    page["columns"] = [c for c in page["columns"] if c["position"] is not None]
    return REFERENCE_TABLE.replace("DATA", json.dumps(page))


# -- 3. the compare page ------------------------------------------------------------------------
def log_sweep(path: Path, runs: int, metrics: int, steps: int) -> None:
    table = tb.ResultTable(path, nocommit_action=NOP)
    for i in range(runs):
        with table.new_run("sweep", cli={"i": i}, auto_log_plt=False) as run:
            run.add_hparams(lr=10.0 ** -(i % 4), seed=i)
            for step in range(steps):
                for m in range(metrics):
                    value = (step * 7919 + m * 31 + i) % 1000 / 1000 + 1 / (step + 1)
                    run.add_scalar(
                        f"{('train', 'val')[m % 2]}/metric{m:02d}", value, step=step, epoch=step // 100
                    )
    table.close()


SERIES_REQUESTS = (
    "performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/series?')).length"
)
BYTES_BEFORE_CHART = """(() => {
  const drawn = performance.getEntriesByName('tallyboard:first-chart')[0].startTime;
  const entries = [...performance.getEntriesByType('navigation'),
    ...performance.getEntriesByType('resource')];
  return entries.filter((e) => e.startTime <= drawn).reduce((n, e) => n + e.transferSize, 0);
})()"""


def bench_compare(
    browser, path: Path, repeats: int, runs: int = 20, metrics: int = 50, steps: int = 1000
) -> None:
    if not path.exists():
        log_sweep(path, runs, metrics, steps)
    sizes, before, after, charts = [], [], [], 0
    with served(path) as url:
        for _ in range(repeats):
            with page_in(browser, *VIEWPORT) as page:
                page.goto(f"{url}/compare?runs={','.join(str(i) for i in range(1, runs + 1))}&live=0")
                wait_for_mark(page, "tallyboard:first-chart")
                page.wait_for_load_state("networkidle")
                sizes.append(page.evaluate(BYTES_BEFORE_CHART))
                before.append(page.evaluate(SERIES_REQUESTS))
                charts = page.locator(".chart-card").count()
                for _ in range(60):  # to the bottom, a screen at a time, as a reader scrolls
                    page.mouse.wheel(0, VIEWPORT[1])
                    page.wait_for_timeout(50)
                page.wait_for_load_state("networkidle")
                after.append(page.evaluate(SERIES_REQUESTS))
                assert not page.errors, page.errors
    print(
        f"3. compare page of {runs} runs x {metrics} metrics ({steps:,} steps each, {charts} charts)"
        " in Chromium"
    )
    kb = statistics.median(sizes) / 1000
    print(f"  {'transferred until the first chart is drawn':<44} {kb:>10.1f} kB  target <= 500 kB")
    first, last = statistics.median(before), statistics.median(after)
    print(f"  series requests: {first:.0f} before scrolling, {last:.0f} after scrolling to the bottom")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=BENCH / ".scale-cache")
    parser.add_argument("--only", default="chart,table,compare")
    args = parser.parse_args()
    if not chromium_available():
        sys.exit("needs playwright and /usr/bin/chromium")
    args.cache.mkdir(parents=True, exist_ok=True)
    only = set(re.split(r"[, ]+", args.only))
    with launched_chromium() as browser:
        if "chart" in only:
            bench_chart(browser, args.cache / f"chromium-chart-{args.points}.db", args.points, args.repeats)
        if "table" in only:
            bench_table(browser, args.cache / f"chromium-runs-{args.runs}.db", args.runs, args.repeats)
        if "compare" in only:
            bench_compare(browser, args.cache / "chromium-compare-20x50.db", args.repeats)


if __name__ == "__main__":
    main()

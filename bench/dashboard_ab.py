"""Paired A/B of the runs page's first rows in headless Chromium: the code of a git revision (A)
against the working tree (B), with the bare reference page of bench/dashboard_chromium.py.

Why paired: on this 2-core machine the medians of one run of dashboard_chromium.py move by ±0.3x
between runs of the same code, far more than most changes are worth. Here A, B and the reference
are alternated trial by trial (each a fresh browser context arriving from another site), so a trial
of each sees the same load, and the figure is the median of the per-round differences A - B.

    python bench/dashboard_ab.py [--base HEAD] [--repeats 30] [--cache DIR]

A runs from `git archive <base> src` in a temporary folder, B from src/; both serve the 100,000-run
table dashboard_chromium.py builds and caches (its section 2).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dashboard_chromium as chromium  # bench/dashboard_chromium.py
from scale import Size, build  # bench/scale.py

from dashboard import served_process  # bench/dashboard.py
from e2e.browser import chromium_available, launched_chromium  # tests/e2e/browser.py

ROOT = Path(__file__).resolve().parent.parent
RUNS = 100_000


@contextmanager
def source_of(revision: str) -> Iterator[Path]:
    """src/ as it is at `revision`, in a temporary folder."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(
            ["git", "archive", revision, "src"], cwd=ROOT, check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        yield Path(folder) / "src"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", default="HEAD", help="the git revision A runs (default HEAD)")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--cache", type=Path, default=chromium.BENCH / ".scale-cache")
    args = parser.parse_args()
    if not chromium_available():
        sys.exit("needs playwright and /usr/bin/chromium")
    table = args.cache / f"chromium-runs-{RUNS}.db"
    if not table.exists():
        args.cache.mkdir(parents=True, exist_ok=True)
        build(str(table), Size(scalars=0, runs=RUNS), appended=0)
    with source_of(args.base) as base, served_process(table, base) as (a, _), served_process(table) as (b, _):
        html = chromium.reference_table(a)
        with launched_chromium() as browser, chromium.reference_server({"table.html": html}) as reference:
            start = chromium.elsewhere(reference)
            trials: dict[str, list[float]] = {"A": [], "B": [], "reference": []}
            for _ in range(args.repeats):
                trials["A"].append(chromium.mark_ms(browser, f"{a}/", *chromium.FIRST_ROWS, start=start))
                trials["B"].append(chromium.mark_ms(browser, f"{b}/", *chromium.FIRST_ROWS, start=start))
                bare_page = f"{reference}/table.html"
                trials["reference"].append(
                    chromium.mark_ms(browser, bare_page, *chromium.REFERENCE_ROWS, start=start)
                )
    bare = statistics.median(trials["reference"])
    print(f"first rows: A = {args.base}, B = the working tree, {args.repeats} rounds from another site")
    for label, times in trials.items():
        median = statistics.median(times)
        print(f"  {label:9s} median {median:6.1f} ms  ratio {median / bare:.3f}")
    differences = [x - y for x, y in zip(trials["A"], trials["B"], strict=True)]
    print(f"  A - B, paired: median {statistics.median(differences):+.1f} ms (B faster when positive)")


if __name__ == "__main__":
    main()

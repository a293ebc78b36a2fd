"""A chart's buckets (`DashboardQueries.buckets_of`: whole blocks from their summaries, the blocks
a bucket's edge cuts folded by numpy in store/chart_cuts.py) against the same buckets folded in
plain Python (store/bucket_reference.py) from the points read back as rows, on series of several
blocks with gaps, negative and extreme steps, NaN, infinities and epochs, for grids that cut
blocks anywhere."""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tallyboard as tb
from store.bucket_reference import brute_buckets
from tallyboard.store import open_queries
from tallyboard.store.dashboard_reads import SeriesKey

SHAPES = ("dense", "strided", "gaps", "extreme")


def log_series(path: Path, seed: int, shape: str) -> list[tuple[int, float, int | None]]:
    """(step, value, epoch) of a series of about 3,000 points (three blocks and more), logged."""
    rng = random.Random(seed)
    start = {"dense": 0, "strided": -5_000, "gaps": 17, "extreme": -(2**62)}[shape]
    steps, step = [], start
    for _ in range(3_000 + rng.randrange(500)):
        steps.append(step)
        step += {"dense": 1, "strided": 10, "gaps": rng.choice((1, 1, 1, 3, 700)), "extreme": 2**50}[shape]
    specials = (math.nan, math.inf, -math.inf)
    points = [
        (s, rng.choice(specials) if rng.random() < 0.05 else rng.uniform(-1, 1), rng.choice((None, s // 100)))
        for s in steps
    ]
    if shape == "gaps":  # a stretch of NaN only: buckets without extremes
        points = [(s, math.nan if 900 <= i < 1_400 else v, e) for i, (s, v, e) in enumerate(points)]
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("cuts", auto_log_plt=False) as run:
        for s, v, e in points:
            run.add_scalar("loss", v, step=s, epoch=e)
    table.close()
    return points


@pytest.fixture(scope="module")
def series():
    with tempfile.TemporaryDirectory() as folder:
        made = {}
        for i, shape in enumerate(SHAPES):
            path = Path(folder) / f"{shape}.db"
            points = log_series(path, i, shape)
            queries = open_queries(path)
            made[shape] = (queries, SeriesKey(1, queries.tag_id("loss"), 0), points)
        yield made
        for queries, _, _ in made.values():
            queries.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.sampled_from(SHAPES),
    cut=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    buckets=st.integers(1, 900),
    shift=st.integers(0, 5_000),
)
def test_buckets_are_the_points_folded(series, shape, cut, buckets, shift):
    queries, key, points = series[shape]
    first, last = points[0][0], points[-1][0]
    lo, hi = sorted(first + int((last - first) * c) for c in cut)
    span = max(1, (hi - lo) // buckets + shift)
    origin = lo - shift % span
    rows = queries.points(key, lo, hi)
    assert [row[0] for row in rows] == [s for s, _, _ in points if lo <= s <= hi]
    assert queries.buckets_of([key], lo, hi, span, origin)[key] == brute_buckets(rows, lo, hi, span, origin)


def test_the_rows_read_back_are_the_points_logged(series):
    """What `brute_buckets` is given is what was logged: NaN as None, epochs as logged."""
    queries, key, points = series["gaps"]
    rows = queries.points(key, points[0][0], points[-1][0])
    assert [(s, None if v != v else v, e) for s, e, _, v in rows] == [
        (s, None if v != v else v, e) for s, v, e in points
    ]

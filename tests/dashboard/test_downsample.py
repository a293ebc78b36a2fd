"""Downsampling keeps spikes, bounds the payload, and returns raw points when they fit, on both
engines (`db_url` runs each test on SQLite and on PostgreSQL)."""

from __future__ import annotations

import math

import pytest

import tallyboard as tb
from tallyboard.dashboard.downsample import Downsampler, bucket_width, raw_after
from tallyboard.store import open_queries
from tallyboard.store.dashboard_reads import DashboardQueries, SeriesKey

POINTS = 20_000
SPIKE_AT = 12_345


@pytest.fixture
def long_series(db_url):
    """One run with a 20,000-point series holding a single spike, plus NaN and infinities."""
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("long", auto_log_plt=False) as run:
        for step in range(POINTS):
            run.add_scalar("train/loss", 100.0 if step == SPIKE_AT else 1.0 + (step % 7) * 1e-3, step=step)
        for step, value in enumerate([1.0, math.nan, math.inf, -math.inf, 2.0]):
            run.add_scalar("train/odd", value, step=step)
    table.close()
    queries = open_queries(db_url)
    yield queries
    queries.close()


def key_of(queries: DashboardQueries, tag: str) -> SeriesKey:
    return SeriesKey(1, queries.tag_id(tag), 0)


def test_bucket_width():
    assert bucket_width(0, 999, 1000) == 1
    assert bucket_width(0, 1000, 1000) == 2
    assert bucket_width(10, 10, 5) == 1


@pytest.mark.parametrize("width", [300, 2000])  # answered from the summary, and read directly
def test_a_spike_survives_downsampling(long_series, width):
    key = key_of(long_series, "train/loss")
    series = Downsampler(long_series).series(key, 0, POINTS - 1, width, 0, POINTS - 1)
    assert len(series.step) <= width and series.bucket == math.ceil(POINTS / width)
    assert max(series.high) == 100.0  # the one spike is in some bucket's max
    spike_bucket = next(i for i, high in enumerate(series.high) if high == 100.0)
    assert series.step[spike_bucket - 1] < SPIKE_AT <= series.step[spike_bucket]
    assert min(series.low) == 1.0 and series.step[-1] == POINTS - 1  # last bucket ends at the last point
    assert series.value[-1] == 1.0 + ((POINTS - 1) % 7) * 1e-3


def test_the_summary_follows_a_growing_series(db_url):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("grow", auto_log_plt=False)
    for step in range(10_000):
        run.add_scalar("loss", 1.0, step=step)
    run.flush()
    queries = open_queries(db_url)
    downsampler = Downsampler(queries)
    key = key_of(queries, "loss")
    assert max(downsampler.series(key, 0, 9_999, 100, 0, 9_999).high) == 1.0
    for step in range(10_000, 10_500):
        run.add_scalar("loss", 7.0 if step == 10_400 else 1.0, step=step)
    run.close()
    table.close()
    grown = downsampler.series(key, 0, 10_499, 100, 0, 10_499)
    assert max(grown.high) == 7.0 and grown.step[-1] == 10_499
    queries.close()


def test_buckets_hold_the_min_max_and_last_point_of_their_steps(db_url):
    """Buckets without points are left out; a bucket of NaN only has no min or max."""
    values = {**{step: float(step % 4) for step in range(0, 10)}, 10: math.nan, 11: math.nan}
    values |= {step: -float(step) for step in range(30, 37)}  # steps 12-29 have no points
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("gaps", auto_log_plt=False) as run:
        for step, value in values.items():
            run.add_scalar("loss", value, step=step, epoch=step // 10)
    table.close()
    queries = open_queries(db_url)
    rows = queries.buckets(key_of(queries, "loss"), 0, 39, 5)  # buckets of 5 steps from step 0
    queries.close()
    assert [(step, epoch, value, low, high) for step, epoch, _, value, low, high in rows] == [
        (4, 0, 0.0, 0.0, 3.0),
        (9, 0, 1.0, 0.0, 3.0),
        (11, 1, None, None, None),  # steps 10-14: NaN only (NaN is stored as NULL)
        (34, 3, -34.0, -34.0, -30.0),
        (36, 3, -36.0, -36.0, -35.0),
    ]


def test_zoomed_range_is_full_resolution(long_series):
    key = key_of(long_series, "train/loss")
    series = Downsampler(long_series).series(key, 12_300, 12_399, 300, 0, POINTS - 1)
    assert series.bucket == 1 and series.step == list(range(12_300, 12_400))
    assert series.value[SPIKE_AT - 12_300] == 100.0


def test_nan_and_infinity_travel_as_json_safe_values(long_series):
    series = Downsampler(long_series).series(key_of(long_series, "train/odd"), 0, 4, 100, 0, 4)
    assert series.to_json()["value"] == [1.0, "NaN", "Infinity", "-Infinity", 2.0]


def test_raw_after_is_incremental_and_bounded(long_series):
    key = key_of(long_series, "train/loss")
    points, more = raw_after(long_series, key, POINTS - 4, limit=10)
    assert points.step == [POINTS - 3, POINTS - 2, POINTS - 1] and not more
    points, more = raw_after(long_series, key, -1, limit=10)
    assert points.step == list(range(10)) and more

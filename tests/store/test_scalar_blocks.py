"""`scalar_blocks`: the per-block min/max the writer keeps, and the bucketed reads built on it, equal a
brute-force computation over the `scalars` rows -- after overwrites, with NaN and infinities, gaps,
negative steps, several repetitions and ranges that do not align with blocks -- on both engines."""

from __future__ import annotations

import math

import pytest

import tallyboard as tb
from store.schema_versions import downgrade
from tallyboard.dashboard.downsample import Downsampler, grid
from tallyboard.store import open_queries, open_store
from tallyboard.store.dashboard_reads import DashboardQueries, SeriesKey
from tallyboard.store.schema import BLOCK_BITS, BLOCK_STEPS, SCHEMA_VERSION

# Steps of repetition 0: a gap of whole blocks, a partly filled block, negative steps.
STEPS = [*range(-1500, 3000), *range(6000, 9100, 3), *range(20_000, 20_040)]
NAN_ONLY = range(4096, 4100)  # one block whose every value is NaN


def value_at(step: int, rep: int) -> float:
    if step % 997 == 0:
        return math.nan
    if step == 6003:
        return math.inf
    if step == -7:
        return -math.inf
    return math.sin(step / 50) + rep + (40.0 if step == 2500 else 0.0)


@pytest.fixture
def logged(db_url: str):
    """A run with two repetitions of 'train/loss', logged in several batches (flushes), where later
    batches overwrite steps, including the one that held a block's maximum."""
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("blocks", auto_log_plt=False)
    for i, step in enumerate(STEPS):
        run.add_scalar("train/loss", value_at(step, 0), step=step, epoch=step // 1000)
        if i % 1700 == 0:
            run.flush()
    for step in NAN_ONLY:
        run.add_scalar("train/loss", math.nan, step=step)
    run.flush()
    run.add_scalar("train/loss", 0.5, step=2500)  # the spike of block 2 is gone: its max must drop
    run.add_scalar("train/loss", 7.0, step=100)
    run.add_scalar("train/loss", 8.0, step=100)  # twice in one batch: the last one wins
    run.flush()
    run.new_repetition()
    for step in range(0, 5000, 2):
        run.add_scalar("train/loss", value_at(step, 1), step=step)
    run.close()
    table.close()
    queries = open_queries(db_url)
    yield queries
    queries.close()


def series_rows(queries: DashboardQueries, rep: int) -> list[tuple]:
    """Every (step, epoch, walltime_ms, value) of one repetition, straight from `scalars`."""
    return queries.points(SeriesKey(1, queries.tag_id("train/loss"), rep), -(2**62), 2**62)


def brute_blocks(queries: DashboardQueries) -> list[tuple]:
    blocks: dict[tuple[int, int], list[float]] = {}
    for rep in (0, 1):
        for step, _, _, value in series_rows(queries, rep):
            values = blocks.setdefault((rep, step >> BLOCK_BITS), [])
            if value is not None:
                values.append(value)
    return [
        (rep, block, min(v, default=None), max(v, default=None)) for (rep, block), v in sorted(blocks.items())
    ]


def brute_buckets(rows: list[tuple], lo: int, hi: int, span: int, origin: int) -> list[tuple]:
    buckets: dict[int, list[tuple]] = {}
    for row in rows:
        if lo <= row[0] <= hi:
            buckets.setdefault((row[0] - origin) // span, []).append(row)
    out = []
    for k in sorted(buckets):
        values = [row[3] for row in buckets[k] if row[3] is not None]
        out.append((*buckets[k][-1], min(values, default=None), max(values, default=None)))
    return out


def test_blocks_equal_min_and_max_of_their_scalars(logged):
    stored = logged._all("SELECT rep, block, lowest, highest FROM scalar_blocks ORDER BY rep, block")
    assert stored == brute_blocks(logged)
    by_block = {(rep, block): (low, high) for rep, block, low, high in stored}
    assert by_block[(0, 4096 >> BLOCK_BITS)] == (None, None)  # NaN only: a row with no extremes
    assert by_block[(0, 2500 >> BLOCK_BITS)][1] < 40  # the overwritten spike left no trace
    assert by_block[(0, 100 >> BLOCK_BITS)][1] == 8.0
    assert by_block[(0, -1)][0] == -math.inf and by_block[(0, 6003 >> BLOCK_BITS)][1] == math.inf


@pytest.mark.parametrize(
    ("lo", "hi", "span", "origin"),
    [
        (-1500, 20_039, BLOCK_STEPS, -2048),  # whole blocks, the first one cut by lo
        (-1500, 20_039, 3 * BLOCK_STEPS, -2048),
        (100, 8_999, 2 * BLOCK_STEPS, 0),  # a zoomed range: both ends cut a block
        (1_030, 1_060, BLOCK_STEPS, 1_024),  # inside one block: read from the points alone
        (-1500, 20_039, 700, -1500),  # buckets that do not align with blocks
        (-3, 9_000, 5_000, -3),
        (4_096, 4_099, 4, 4_096),  # NaN only
    ],
)
def test_buckets_equal_a_brute_force_computation(logged, lo, hi, span, origin):
    for rep in (0, 1):
        key = SeriesKey(1, logged.tag_id("train/loss"), rep)
        assert logged.buckets(key, lo, hi, span, origin) == brute_buckets(
            series_rows(logged, rep), lo, hi, span, origin
        )


@pytest.mark.parametrize(("lo", "hi", "width"), [(-1500, 20_039, 30), (333, 9_050, 7), (0, 4_999, 3)])
def test_the_chart_grid_is_block_aligned_and_exact(logged, lo, hi, width):
    origin, span = grid(lo, hi, width)
    assert origin % BLOCK_STEPS == 0 and span % BLOCK_STEPS == 0 and origin <= lo
    assert math.ceil((hi - origin + 1) / span) <= width
    for rep in (0, 1):
        key = SeriesKey(1, logged.tag_id("train/loss"), rep)
        series = Downsampler(logged).series(key, lo, hi, width, -(2**62), 2**62)
        rows = brute_buckets(series_rows(logged, rep), lo, hi, span, origin)
        assert series.bucket == span and series.step == [row[0] for row in rows]
        assert (series.value, series.low, series.high) == tuple([row[i] for row in rows] for i in (3, 4, 5))


def test_a_version_1_table_is_backfilled_by_the_first_write(logged, db_url):
    expected = brute_blocks(logged)
    downgrade(db_url, 1)  # what tallyboard 1 left
    store = open_store(db_url)
    try:
        assert store.meta("schema_version") == "1"  # opening alone migrates nothing
        store.ready_for_writing()  # what every write does first
        assert store.meta("schema_version") == str(SCHEMA_VERSION)
        blocks = store.execute("SELECT rep, block, lowest, highest FROM scalar_blocks ORDER BY rep, block")
        assert blocks == expected
    finally:
        store.close()


def test_a_replaced_debug_run_leaves_no_blocks(db_url):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_debug_run("debug") as run:
        run.add_scalar("loss", 1.0, step=5000)
    with table.new_debug_run("debug") as run:
        run.add_scalar("loss", 2.0, step=0)
    table.close()
    store = open_store(db_url)
    try:
        assert store.execute("SELECT run_id, block, lowest, highest FROM scalar_blocks") == [
            (-1, 0, 2.0, 2.0)
        ]
    finally:
        store.close()


# The first and last steps a 64-bit integer holds, with a neighbour each: their blocks end at the
# edge of the range, where `(block + 1) << BLOCK_BITS` would not fit in a BIGINT.
EDGE_STEPS = {-(2**63): 1.0, -(2**63) + 1: -2.0, 2**63 - 2: 3.0, 2**63 - 1: math.nan}


def test_steps_at_the_ends_of_the_64_bit_range_are_logged_and_summarised(db_url):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("edges", auto_log_plt=False)
    for step, value in EDGE_STEPS.items():
        run.add_scalar("train/loss", value, step=step)
    run.close()
    table.close()
    queries = open_queries(db_url)
    try:
        key = SeriesKey(run.run_id, queries.tag_id("train/loss"), 0)
        points = queries.points(key, -(2**63), 2**63 - 1)
        assert [(step, value) for step, _, _, value in points] == [
            (step, None if math.isnan(value) else value) for step, value in EDGE_STEPS.items()
        ]
        blocks = queries._all("SELECT block, lowest, highest FROM scalar_blocks ORDER BY block")
        assert blocks == [(-(2**63) >> BLOCK_BITS, -2.0, 1.0), ((2**63 - 1) >> BLOCK_BITS, 3.0, 3.0)]
        first_block = range(-(2**63), -(2**63) + BLOCK_STEPS)
        assert queries.buckets(key, first_block[0], first_block[-1], BLOCK_STEPS) == [(*points[1], -2.0, 1.0)]
    finally:
        queries.close()


def test_batches_adding_to_a_block_merge_with_its_extremes_and_nan_changes_none(db_url):
    """Each batch adds new steps to the blocks of the one before (PostgreSQL merges the batch's
    extremes then): NaN-only additions keep the extremes, values after NaN-only ones set them."""
    batches = [
        {0: 1.0, 1: -1.0, 256: math.nan},  # block 1 is NaN only
        {2: math.nan, 3: math.nan, 257: math.nan},  # NaN only, into both blocks
        {4: 0.5, 258: 2.0, 259: math.inf},  # inside block 0's extremes; block 1's first values
        {5: -3.0, 260: -math.inf},
    ]
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("merges", auto_log_plt=False)
    expected = [[(0, 1.0, -1.0), (1, None, None)], [(0, 1.0, -1.0), (1, None, None)]]
    expected += [[(0, 1.0, -1.0), (1, math.inf, 2.0)], [(0, 1.0, -3.0), (1, math.inf, -math.inf)]]
    for batch, blocks in zip(batches, expected, strict=True):
        for step, value in batch.items():
            run.add_scalar("loss", value, step=step)
        run.flush()
        store = open_store(db_url)
        try:
            stored = store.execute("SELECT block, highest, lowest FROM scalar_blocks ORDER BY block")
        finally:
            store.close()
        assert stored == blocks
    run.close()
    table.close()

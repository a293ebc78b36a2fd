"""`scalar_blocks` (schema v14): a series' blocks never overlap, their summaries equal their points,
the points are the last value logged at each step, and the bucketed reads built on them equal a
brute-force computation over the points -- after overwrites, out-of-order steps, with NaN and
infinities, gaps, negative steps, several repetitions and ranges that do not align with blocks --
on both engines."""

from __future__ import annotations

import math
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing

import pytest

import tallyboard as tb
from store.bucket_reference import brute_buckets
from store.schema_versions import downgrade
from tallyboard.dashboard.downsample import Downsampler, grid
from tallyboard.store import open_queries, open_store
from tallyboard.store.block_codec import (
    Points,
    last_epoch,
    last_of_deltas,
    pack_deltas,
    unpack,
    unpack_deltas,
)
from tallyboard.store.block_codec import pack as pack_block
from tallyboard.store.dashboard_reads import DashboardQueries, SeriesKey
from tallyboard.store.points_view import materialise
from tallyboard.store.schema import BLOCK_STEPS, SCHEMA_VERSION

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


def stored_blocks(read, run_id: int, rep: int) -> list[tuple]:
    """(first_step, last_step, n, lowest, highest, first_value, last_value, points) of each block."""
    rows = read(
        "SELECT first_step, last_step, n, lowest, highest, first_value, last_value,"
        " step_data, walltime_data, value_data, epoch_data FROM scalar_blocks"
        " WHERE run_id = ? AND rep = ? ORDER BY first_step",
        (run_id, rep),
    )
    return [(*row[:7], unpack(*row[7:])) for row in rows]


def assert_well_formed(blocks: list[tuple]) -> None:
    """Blocks that never overlap, steps that strictly increase, summaries that equal the points."""
    previous_last = None
    for first, last, n, lowest, highest, first_value, last_value, points in blocks:
        steps, values = points.steps, points.values
        assert steps == sorted(set(steps)) and (first, last, n) == (steps[0], steps[-1], len(steps))
        assert previous_last is None or first > previous_last
        finite = [v for v in values if not math.isnan(v)]
        assert (lowest, highest) == (min(finite, default=None), max(finite, default=None))
        assert (first_value, last_value) == tuple(
            None if math.isnan(v) else v for v in (values[0], values[-1])
        )
        previous_last = last


def expected_points(rep: int) -> dict[int, float | None]:
    """{step: value} the `logged` fixture leaves: the last value logged at each step."""
    points = {step: value_at(step, rep) for step in (STEPS if rep == 0 else range(0, 5000, 2))}
    if rep == 0:
        points.update(dict.fromkeys(NAN_ONLY, math.nan))
        points.update({2500: 0.5, 100: 8.0})
    return {step: None if math.isnan(value) else value for step, value in sorted(points.items())}


def test_blocks_are_well_formed_and_hold_the_last_value_of_each_step(logged):
    for rep in (0, 1):
        assert_well_formed(stored_blocks(logged._all, 1, rep))
        assert {step: value for step, _, _, value in series_rows(logged, rep)} == expected_points(rep)
    assert [row[0] for row in series_rows(logged, 0)] == sorted(expected_points(0))


def test_out_of_order_sparse_and_repeated_steps_read_back_in_step_order(db_url):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("shuffled", auto_log_plt=False)
    steps = [*range(3000, 0, -7), *range(5000, 9000, 3), *range(0, 5000, 11), 4, 4, 10**12, -(10**12)]
    logged: dict[int, float] = {}
    for i, step in enumerate(steps):
        run.add_scalar("loss", float(i), step=step)
        logged[step] = float(i)
        if i % 333 == 0:
            run.flush()
    run.close()
    assert [(p.step, p.value) for p in run.get_scalar("loss")] == sorted(logged.items())
    store = open_store(db_url)
    try:
        assert_well_formed(stored_blocks(store.execute, run.run_id, 0))
    finally:
        store.close()
    table.close()


@pytest.mark.parametrize("squeeze", [True, False])
@pytest.mark.parametrize(
    "numbers",
    [[5], [0, 3, 3, 10**15], [2**62, -(2**62), 2**63 - 1], [-(2**63), 1]],  # the last two: stored as they are
)
def test_the_last_number_of_a_column_is_read_without_the_list(numbers, squeeze):
    assert last_of_deltas(pack_deltas(numbers, squeeze)) == unpack_deltas(pack_deltas(numbers, squeeze))[-1]
    for epochs in ([None] * (len(numbers) - 1) + [7], [7] * (len(numbers) - 1) + [None]):
        _, packed = pack_block(
            Points(list(range(len(numbers))), epochs, numbers, [0.0] * len(numbers)), squeeze
        )
        if packed.epoch_data is not None:
            assert last_epoch(packed.epoch_data) == epochs[-1]


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


def test_a_version_1_table_is_migrated_to_blocks_by_the_first_write(logged, db_url):
    expected = [series_rows(logged, rep) for rep in (0, 1)]
    downgrade(db_url, 1)  # what tallyboard 1 left
    store = open_store(db_url)
    try:
        assert store.meta("schema_version") == "1"  # opening alone migrates nothing
        store.ready_for_writing()  # what every write does first
        assert store.meta("schema_version") == str(SCHEMA_VERSION)
        for rep in (0, 1):
            assert_well_formed(stored_blocks(store.execute, 1, rep))
    finally:
        store.close()
    assert [series_rows(logged, rep) for rep in (0, 1)] == expected


def test_a_replaced_debug_run_leaves_no_blocks(db_url):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_debug_run("debug") as run:
        run.add_scalar("loss", 1.0, step=5000)
    with table.new_debug_run("debug") as run:  # its writer forgets the first one's open block
        run.add_scalar("loss", 2.0, step=0)
    table.close()
    store = open_store(db_url)
    try:
        assert store.execute("SELECT run_id, first_step, n, lowest, highest FROM scalar_blocks") == [
            (-1, 0, 1, 2.0, 2.0)
        ]
    finally:
        store.close()


# The first and last steps a 64-bit integer holds, with a neighbour each: one block, whose deltas no
# int64 holds (it keeps its steps as they are: block_codec.pack_deltas).
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
        blocks = queries._all("SELECT first_step, last_step, lowest, highest FROM scalar_blocks")
        assert blocks == [(-(2**63), 2**63 - 1, -2.0, 3.0)]
        first_block = range(-(2**63), -(2**63) + BLOCK_STEPS)
        assert queries.buckets(key, first_block[0], first_block[-1], BLOCK_STEPS) == [(*points[1], -2.0, 1.0)]
    finally:
        queries.close()


def test_batches_adding_to_a_block_keep_its_extremes_and_nan_changes_none(db_url):
    """Each batch adds steps to the open block of the one before, some before its last step: NaN-only
    additions keep the extremes, values after NaN-only ones set them."""
    batches = [
        {0: 1.0, 1: -1.0, 256: math.nan},
        {2: math.nan, 3: math.nan, 257: math.nan},  # NaN only, before and after the last step
        {4: 0.5, 258: 2.0, 259: math.inf},
        {5: -3.0, 260: -math.inf},
    ]
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("merges", auto_log_plt=False)
    expected = [
        (256, 3, 1.0, -1.0),
        (257, 6, 1.0, -1.0),
        (259, 9, math.inf, -1.0),
        (260, 11, math.inf, -math.inf),
    ]
    for batch, block in zip(batches, expected, strict=True):
        for step, value in batch.items():
            run.add_scalar("loss", value, step=step)
        run.flush()
        store = open_store(db_url)
        try:
            stored = store.execute("SELECT last_step, n, highest, lowest FROM scalar_blocks")
            assert_well_formed(stored_blocks(store.execute, run.run_id, 0))
        finally:
            store.close()
        assert stored == [block]
    run.close()
    table.close()


def test_sql_users_see_the_points_as_rows_exactly(db_url):
    """PostgreSQL's `scalar_points` view and SQLite's TEMP table of that name give every point as
    its row, bit for bit: NaN as NULL, infinities, -0.0, subnormals, epochs where logged."""
    values = [0.0, -0.0, 1.5, -math.inf, math.inf, math.nan, 5e-324, -3.3e-310, 1.7976931348623157e308]
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("points", auto_log_plt=False)
    for i, value in enumerate(values):
        run.add_scalar("a/b", value, step=i * 3 - 4, epoch=None if i % 2 else i)
    run.add_scalar("a/b", 2.0, step=2**63 - 1)  # a delta no int64 holds: steps kept as they are
    run.close()
    expected = [
        (p.step, p.epoch, round(p.wall_time * 1000), None if math.isnan(p.value) else p.value)
        for p in run.get_scalar("a/b")
    ]
    sql = "SELECT step, epoch, walltime_ms, value FROM scalar_points WHERE tag = 'a/b' ORDER BY step"
    if db_url.startswith("postgresql"):
        store = open_store(db_url)
        rows = store.execute(sql)
        store.close()
    else:
        with table.cursor as cursor:
            assert materialise(cursor.connection) == len(expected)
            rows = cursor.execute(sql).fetchall()
    table.close()
    assert rows == expected
    assert [math.copysign(1, row[3]) for row in rows[:2]] == [1.0, -1.0]


def test_sigkill_during_the_migration_leaves_a_whole_old_or_whole_new_file_and_opening_again_finishes(
    tmp_path,
):
    path = str(tmp_path / "v12.db")
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("old", auto_log_plt=False)
    for step in range(200_000):
        run.add_scalar("train/loss", step * 0.25, step=step, epoch=step // 1000)
    run.close()
    expected = [(p.step, p.epoch, p.value) for p in run.get_scalar("train/loss")]
    table.close()
    downgrade(path, 12)
    migrate = (
        "import sys; from tallyboard.store import open_store; open_store(sys.argv[1]).ready_for_writing()"
    )
    for delay in (0.2, 0.6):
        child = subprocess.Popen([sys.executable, "-c", migrate, path])
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        with closing(sqlite3.connect(path)) as conn:
            (version,) = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if version == "12":  # whole old: every row, nothing of the new table
                assert "scalar_blocks_v14" not in names
                assert conn.execute("SELECT COUNT(*) FROM scalars").fetchone() == (200_000,)
            else:  # whole new
                assert version == str(SCHEMA_VERSION) and "scalars" not in names
                assert conn.execute("SELECT SUM(n) FROM scalar_blocks").fetchone() == (200_000,)
    store = open_store(path)
    store.ready_for_writing()  # opening again migrates what is left to migrate
    store.close()
    reopened = tb.ResultTable(path, read_only=True)
    assert [
        (p.step, p.epoch, p.value) for p in reopened.load_run(run.run_id).get_scalar("train/loss")
    ] == expected
    reopened.close()

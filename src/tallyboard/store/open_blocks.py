"""The sink's scalar rows turned into `scalar_blocks` rows: each series' open block, kept in memory.

Why an open block in memory: a series grows by a few points per commit, and its last block must be
durable on the same schedule as the rows were (the SIGKILL window). Keeping the block's points
here lets a commit rewrite it in place (one UPSERT per series, keyed by its `first_step`) without
reading it back; a block is closed (left as it is) when it holds BLOCK_POINTS points, after
MAX_WRITES rewrites (so a series of one point per commit costs a bounded rewrite per point, and
gets blocks of MAX_WRITES points) or when the open blocks of the store together hold more than
OPEN_POINTS points (memory stays bounded whatever the number of tags).

The layout's rule (schema.py): the blocks of a series never overlap and steps strictly increase in
each. A point after its series' last step extends the open block (or starts one); a point inside
the open block's range is put in its place there (a step logged again replaces the old point: the
last value wins). Any other point (a step before the open block, or of a series this process has
not written yet at a step it already holds) is rare: it is merged into the stored blocks around it,
which are read, merged and cut again (`merge_points`).

One writer per series at a time: two processes appending to the same (run, tag, rep) at once would
each rewrite their own open block. A run whose row was replaced (the debug run, id -1, is replaced
by the next one) is told apart by its start time, and its open blocks are forgotten.

Transactions: `plan` never changes the state it is given; it returns the state after the batch,
which the caller keeps only once the batch's transaction committed (a retried transaction plans
again from the same state).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter, lt
from typing import TYPE_CHECKING, Any

from tallyboard.store.block_codec import BLOCK_COLUMNS, NAN, Points, consecutive, pack, unpack, walltime_ms
from tallyboard.store.records import ScalarColumns, ScalarRow
from tallyboard.store.schema import BLOCK_POINTS

if TYPE_CHECKING:
    from tallyboard.store.engine import Engine

MAX_WRITES = 32  # rewrites of one open block before it is closed
OPEN_POINTS = 1 << 19  # points of all open blocks together (~50 MB of Python lists) before all are closed

SeriesId = tuple[int, int, int]  # (run_id, tag_id, rep)
Point = tuple[int, "int | None", int, float]  # (step, epoch, walltime_ms, value), value NaN for NaN

INSERT_BLOCK = (
    f"INSERT INTO {{table}} (run_id, tag_id, rep, first_step, {', '.join(BLOCK_COLUMNS)})"
    f" VALUES (?, ?, ?, ?{', ?' * len(BLOCK_COLUMNS)})"
)
UPSERT_BLOCK = (
    INSERT_BLOCK.format(table="scalar_blocks")
    + " ON CONFLICT (run_id, tag_id, rep, first_step) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in BLOCK_COLUMNS)
)
_KEY = "run_id = ? AND tag_id = ? AND rep = ?"
# The stored blocks a merge of steps [lo, hi] rewrites: those that hold a step of it, and the one
# before its first step (the points in a gap join the block before them).
_AROUND = (
    "SELECT first_step, step_data, walltime_data, value_data, epoch_data FROM scalar_blocks"
    f" WHERE {_KEY} AND first_step <= ? AND last_step >= COALESCE("
    f"(SELECT MAX(first_step) FROM scalar_blocks WHERE {_KEY} AND first_step <= ?), ?)"
    " ORDER BY first_step"
)
LAST_STEPS = "SELECT tag_id, rep, MAX(last_step) FROM scalar_blocks WHERE run_id = ? GROUP BY tag_id, rep"


@dataclass
class OpenBlock:
    """The points of a series' last block, as this process last wrote it."""

    points: Points
    writes: int = 0

    def copy(self) -> OpenBlock:
        steps, epochs, walltimes, values = self.points
        return OpenBlock(Points(steps[:], epochs[:], walltimes[:], values[:]), self.writes)

    def add(self, point: Point) -> None:
        """Append a point after the last step, or put it in its place inside the block."""
        steps = self.points.steps
        step = point[0]
        if not steps or step > steps[-1]:
            for column, item in zip(self.points, point, strict=True):
                column.append(item)  # type: ignore[attr-defined]
            return
        at = bisect_left(steps, step)
        replace = steps[at] == step
        for column, item in zip(self.points, point, strict=True):
            if replace:
                column[at] = item  # type: ignore[index]
            else:
                column.insert(at, item)  # type: ignore[attr-defined]


@dataclass
class SeriesState:
    """What a store's writer knows of the series it writes: their open blocks, the last stored
    step of the others (None: none stored), and the start time of each run it loaded them for."""

    open: dict[SeriesId, OpenBlock] = field(default_factory=dict)
    last: dict[SeriesId, int | None] = field(default_factory=dict)
    runs: dict[int, float] = field(default_factory=dict)

    def forget_run(self, run_id: int) -> None:
        self.runs.pop(run_id, None)
        for table in (self.open, self.last):
            for key in [key for key in table if key[0] == run_id]:
                del table[key]


@dataclass
class Plan:
    """A batch's block writes: rows for UPSERT_BLOCK, points to merge, and the state after."""

    upserts: list[tuple[Any, ...]]
    merges: dict[SeriesId, list[Point]]
    state: SeriesState


def block_row(key: SeriesId, points: Points, squeeze: bool) -> tuple[Any, ...]:
    """UPSERT_BLOCK's parameters for a block (`squeeze`: zlib'd integer columns, as block_codec.pack)."""
    first_step, packed = pack(points, squeeze)
    return (*key, first_step, *packed)


def load_runs(engine: Engine, state: SeriesState, run_ids: Iterable[int]) -> SeriesState:
    """`state` with the last stored step of every series of `run_ids` it does not know (or whose run
    was replaced): one grouped read per such run, once per process."""
    run_ids = sorted(set(run_ids))
    marks = ", ".join("?" * len(run_ids))
    starts = dict(engine.execute(f"SELECT run_id, start_time FROM runs WHERE run_id IN ({marks})", run_ids))
    if all(run_id in state.runs and state.runs[run_id] == starts.get(run_id) for run_id in run_ids):
        return state
    state = SeriesState(dict(state.open), dict(state.last), dict(state.runs))
    for run_id in run_ids:
        if run_id not in state.runs or state.runs[run_id] != starts.get(run_id):
            state.forget_run(run_id)
            for tag_id, rep, last in engine.execute(LAST_STEPS, (run_id,)):
                state.last[(run_id, tag_id, rep)] = last
            state.runs[run_id] = starts.get(run_id, NAN)  # NaN equals nothing: a run without a row
    return state


def _empty() -> Points:
    """A new open block's columns: arrays, which the sink's columns extend at C speed."""
    return Points(array("q"), [], array("q"), array("d"))


def _after_last(last: int | None, step: int) -> bool:
    return last is None or step > last


def _increasing(steps: array[int]) -> bool:
    """Whether `steps` strictly increase; consecutive steps (a training loop's) told by one compare."""
    return consecutive(steps) or all(map(lt, steps, islice(steps, 1, None)))


def _milliseconds(seconds: Sequence[float]) -> list[int]:
    """`walltime_ms` of each walltime, inlined for the usual case (none before the repetition)."""
    if min(seconds) >= 0:
        return [int(second * 1000 + 0.5) for second in seconds]
    return list(map(walltime_ms, seconds))


def _in_order(rows: Sequence[ScalarRow]) -> tuple[int, Points] | None:
    """(rep, columns) of rows of one repetition whose steps strictly increase (what a training loop
    logs: the sink's columns as they are, other rows taken apart at C speed), else None."""
    if isinstance(rows, ScalarColumns):
        if not _increasing(rows.steps):
            return None
        ms = array("q", _milliseconds(rows.walltimes))
        return rows.rep, Points(rows.steps, rows.epochs_or_none(), ms, rows.values)
    reps, steps, epochs, walltimes, values = (list(map(itemgetter(at), rows)) for at in range(5))
    if reps.count(reps[0]) != len(reps) or not all(map(lt, steps, islice(steps, 1, None))):
        return None
    walltimes = _milliseconds(walltimes)
    if None in values:
        values = [NAN if value is None else value for value in values]
    return reps[0], Points(steps, epochs, walltimes, values)


class _Planner:
    """The state of one `plan` as it goes."""

    def __init__(self, state: SeriesState, squeeze: bool) -> None:
        self.after = SeriesState(dict(state.open), dict(state.last), state.runs)
        self.touched: dict[SeriesId, OpenBlock] = {}
        self.upserts: list[tuple[Any, ...]] = []
        self.merges: dict[SeriesId, list[Point]] = {}
        self.squeeze = squeeze

    def block(self, key: SeriesId) -> OpenBlock | None:
        block = self.touched.get(key)
        if block is None and key in self.after.open:
            block = self.touched[key] = self.after.open[key].copy()
        return block

    def appends(self, key: SeriesId, first_step: int) -> bool:
        """Whether a point at `first_step` goes after the last one of the series' open block or
        starts one."""
        block = self.block(key)
        if block is not None:
            return first_step > block.points.steps[-1]
        return key not in self.merges and _after_last(self.after.last.get(key), first_step)

    def close_if_full(self, key: SeriesId, block: OpenBlock) -> None:
        if len(block.points.steps) >= BLOCK_POINTS:  # full: written once more, then closed
            self.upserts.append(block_row(key, block.points, self.squeeze))
            self.after.last[key] = block.points.steps[-1]
            self.after.open.pop(key, None)
            del self.touched[key]

    def extend(self, key: SeriesId, columns: Points) -> None:
        """Append points whose steps increase, after the series' last (`appends`)."""
        at, count = 0, len(columns.steps)
        while at < count:
            block = self.block(key)
            if block is None:
                block = self.touched[key] = OpenBlock(_empty())
            room = BLOCK_POINTS - len(block.points.steps)
            for column, new in zip(block.points, columns, strict=True):
                column.extend(new[at : at + room])  # type: ignore[attr-defined, index]
            at += room
            self.close_if_full(key, block)

    def add(self, key: SeriesId, point: Point) -> None:
        """One point wherever its step goes: the open block, a new one, or a merge."""
        block = self.block(key)
        step = point[0]
        if block is not None and step >= block.points.steps[0]:
            block.add(point)
        elif block is None and key not in self.merges and _after_last(self.after.last.get(key), step):
            block = self.touched[key] = OpenBlock(_empty())
            block.add(point)
        else:
            self.merges.setdefault(key, []).append(point)
            return
        self.close_if_full(key, block)


def plan(state: SeriesState, series: Sequence[tuple[int, int, Sequence[ScalarRow]]], squeeze: bool) -> Plan:
    """The block writes of `series` ((run_id, tag_id, rows) each), from `state` (left unchanged);
    `squeeze` as in `block_row`."""
    planner = _Planner(state, squeeze)
    for run_id, tag_id, rows in series:
        in_order = _in_order(rows) if rows else None
        if in_order is not None and planner.appends((run_id, tag_id, in_order[0]), in_order[1].steps[0]):
            planner.extend((run_id, tag_id, in_order[0]), in_order[1])
            continue
        for rep, step, epoch, walltime, value in rows:
            planner.add(
                (run_id, tag_id, rep), (step, epoch, walltime_ms(walltime), NAN if value is None else value)
            )
    after, touched, upserts, merges = planner.after, planner.touched, planner.upserts, planner.merges
    for key, block in touched.items():
        upserts.append(block_row(key, block.points, squeeze))
        block.writes += 1
        after.last[key] = block.points.steps[-1]
        if block.writes >= MAX_WRITES or key in merges:  # a merge may rewrite it: never open again
            after.open.pop(key, None)
        else:
            after.open[key] = block
    for key, points in merges.items():
        after.open.pop(key, None)
        steps = [point[0] for point in points]
        last = after.last.get(key)
        after.last[key] = max(steps) if last is None else max(last, *steps)
    if sum(len(block.points.steps) for block in after.open.values()) > OPEN_POINTS:
        after.open.clear()
    return Plan(upserts, merges, after)


def merge_points(engine: Engine, key: SeriesId, points: Sequence[Point], squeeze: bool) -> None:
    """Put `points` (in the order they were logged: a later one at a step wins) into the stored
    blocks of the series `key`: the blocks around their steps are read, merged and cut again."""
    lo, hi = min(point[0] for point in points), max(point[0] for point in points)
    stored = engine.execute(_AROUND, (*key, hi, *key, lo, lo))
    merged: dict[int, Point] = {}
    for _, *data in stored:
        merged.update((p[0], p) for p in zip(*unpack(*data), strict=True))
    merged.update((point[0], point) for point in points)
    engine.executemany(
        f"DELETE FROM scalar_blocks WHERE {_KEY} AND first_step = ?", [(*key, row[0]) for row in stored]
    )
    ordered = [merged[step] for step in sorted(merged)]
    cut = (ordered[at : at + BLOCK_POINTS] for at in range(0, len(ordered), BLOCK_POINTS))
    engine.executemany(UPSERT_BLOCK, [block_row(key, _columns(piece), squeeze) for piece in cut])


def _columns(points: Sequence[Point]) -> Points:
    steps, epochs, walltimes, values = (list(column) for column in zip(*points, strict=True))
    return Points(steps, epochs, walltimes, values)

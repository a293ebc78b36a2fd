"""Reading logged series in bulk, for the query API (tallyboard/query.py): SQL only, named records out.

Why pages per series: a series is one range of the `scalars` primary key, so "the next
`chunk_rows` points after step s" is one index range scan on both engines (keyset pagination,
like store/copy.py), and a query of ten million points never has more than one page of raw row
tuples in memory. A page never spans two series, so its run, tag and repetition are stated once
and its points come as columns (`SeriesChunk`), ready to become typed arrays.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from tallyboard.store.base import Store
from tallyboard.values import check_text

DEFAULT_CHUNK_ROWS = 100_000
_POINT = "SELECT step, epoch, walltime_ms, value FROM scalars WHERE run_id = ? AND tag_id = ? AND rep = ?"


class SeriesKey(NamedTuple):
    """One logged series: a tag of a repetition of a run."""

    run_id: int
    tag_id: int
    tag: str
    rep: int


class SeriesChunk(NamedTuple):
    """Consecutive points of one series as columns: `epochs` hold None where none was given,
    `walltimes` are seconds since the repetition started, `values` NaN where NaN was logged."""

    run_id: int
    tag: str
    rep: int
    steps: Sequence[int]
    epochs: Sequence[int | None]
    walltimes: Sequence[float]
    values: Sequence[float]


class SeriesSummary(NamedTuple):
    """The end of one series: its last step and value, and min, max and mean of its last `points`
    points (`last_n`, or fewer in a shorter series; NaN points are skipped, NaN when all are)."""

    run_id: int
    tag: str
    rep: int
    points: int
    last_step: int
    last: float
    min: float
    max: float
    mean: float


def _select(store: Store, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    return store.execute(sql, params)


def _marks(items: Sequence[object]) -> str:
    return ", ".join("?" * len(items))


def series_keys(
    store: Store, run_ids: Sequence[int], tags: Sequence[str] | None = None, reps: Sequence[int] | None = None
) -> list[SeriesKey]:
    """The series of these runs (of these tags and repetitions; None = all), ordered by run, tag
    name and repetition. Read from `scalar_blocks`, which has a row per 256 points, not per point."""
    if not run_ids or tags == [] or reps == []:
        return []
    sql = (
        "SELECT DISTINCT b.run_id, b.tag_id, t.name, b.rep"
        " FROM scalar_blocks b JOIN tags t ON t.tag_id = b.tag_id"
        f" WHERE b.run_id IN ({_marks(run_ids)})"
    )
    params: list[object] = list(run_ids)
    if tags is not None:
        sql += f" AND t.name IN ({_marks(tags)})"
        params += [check_text("a tag", tag) for tag in tags]
    if reps is not None:
        sql += f" AND b.rep IN ({_marks(reps)})"
        params += list(reps)
    rows = _select(store, sql + " ORDER BY b.run_id, t.name, b.rep", params)
    return [SeriesKey(*row) for row in rows]


def _chunk(key: SeriesKey, rows: list[tuple[Any, ...]]) -> SeriesChunk:
    steps, epochs, walltimes_ms, values = zip(*rows, strict=True)
    return SeriesChunk(
        key.run_id,
        key.tag,
        key.rep,
        steps,
        epochs,
        [ms / 1000 for ms in walltimes_ms],
        [math.nan if value is None else value for value in values],
    )


def _range(step_range: tuple[int | None, int | None] | None) -> tuple[str, list[int]]:
    """SQL and parameters for an inclusive step range (None = open)."""
    low, high = step_range if step_range is not None else (None, None)
    sql, params = "", list[int]()
    if low is not None:
        sql, params = sql + " AND step >= ?", [*params, int(low)]
    if high is not None:
        sql, params = sql + " AND step <= ?", [*params, int(high)]
    return sql, params


def iter_chunks(
    store: Store,
    keys: Sequence[SeriesKey],
    step_range: tuple[int | None, int | None] | None = None,
    downsample: int | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator[SeriesChunk]:
    """The points of each series in step order, at most `chunk_rows` per chunk. With `downsample`
    = n, a longer series is cut into n equal step buckets and each gives its last point."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be 1 or more, got {chunk_rows}")
    in_range, range_params = _range(step_range)
    for key in keys:
        where = (key.run_id, key.tag_id, key.rep)
        if downsample is not None:
            rows = _downsampled(store, where, in_range, range_params, downsample)
            for start in range(0, len(rows), chunk_rows):
                yield _chunk(key, rows[start : start + chunk_rows])
            continue
        page = f" ORDER BY step LIMIT {int(chunk_rows)}"
        rows = _select(store, _POINT + in_range + page, (*where, *range_params))
        while rows:
            last_step = rows[-1][0]
            done = len(rows) < chunk_rows
            yield _chunk(key, rows)
            if done:
                break
            rows = []  # let the page go before the next one is read
            rows = _select(
                store, _POINT + in_range + " AND step > ?" + page, (*where, *range_params, last_step)
            )


def _downsampled(
    store: Store, where: tuple[int, int, int], in_range: str, range_params: list[int], buckets: int
) -> list[tuple[Any, ...]]:
    if buckets < 1:
        raise ValueError(f"downsample must be 1 or more, got {buckets}")
    bounds = "SELECT MIN(step), MAX(step), COUNT(*) FROM scalars WHERE run_id = ? AND tag_id = ? AND rep = ?"
    first, last, count = _select(store, bounds + in_range, (*where, *range_params))[0]
    if count <= buckets:
        return _select(store, _POINT + in_range + " ORDER BY step", (*where, *range_params))
    width = -(-(last - first + 1) // buckets)  # ceil: the buckets cover [first, last]
    # Trusted ints inlined: integer division on both engines, whatever type a parameter would get.
    last_of_bucket = (
        "SELECT MAX(step) FROM scalars WHERE run_id = ? AND tag_id = ? AND rep = ?"
        f"{in_range} GROUP BY (step - {int(first)}) / {int(width)}"
    )
    sql = f"{_POINT} AND step IN ({last_of_bucket}) ORDER BY step"
    return _select(store, sql, (*where, *where, *range_params))


def summaries(store: Store, keys: Sequence[SeriesKey], last_n: int) -> list[SeriesSummary]:
    """A `SeriesSummary` per series, each computed by the database from an index seek to the
    series' end (its last `last_n` points), so the cost does not grow with the series' length."""
    if last_n < 1:
        raise ValueError(f"last_n must be 1 or more, got {last_n}")
    key_sql = "run_id = ? AND tag_id = ? AND rep = ?"
    sql = (
        "SELECT COUNT(*), MAX(tail.step), MIN(tail.value), MAX(tail.value), AVG(tail.value),"
        f" (SELECT value FROM scalars WHERE {key_sql} ORDER BY step DESC LIMIT 1)"
        f" FROM (SELECT step, value FROM scalars WHERE {key_sql} ORDER BY step DESC LIMIT {int(last_n)}) tail"
    )
    out = []
    for key in keys:
        where = (key.run_id, key.tag_id, key.rep)
        points, last_step, low, high, mean, last = _select(store, sql, where * 2)[0]
        figures = map(_nan, (last, low, high, mean))
        out.append(SeriesSummary(key.run_id, key.tag, key.rep, points, last_step, *figures))
    return out


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)

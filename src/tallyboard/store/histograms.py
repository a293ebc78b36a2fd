"""The SQL of the `histograms` table (schema v5): writing a batch's histograms, reading them back.

Rows cross the sink flat (`queued_row`): the record's position, the stats, and the edges and counts
already packed into bytes (a few microseconds for 64 buckets), so the sink's bounded queue sees
their true size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tallyboard.histogram import (
    Histogram,
    HistogramRecord,
    pack_floats,
    pack_ints,
    unpack_floats,
    unpack_ints,
)
from tallyboard.store.records import QueuedHistogram

if TYPE_CHECKING:
    from tallyboard.store.engine import Engine

STATS = "count, nonfinite, minimum, maximum, total, total_squares, edges, counts"


def queued_row(
    run_id: int, tag: str, rep: int, step: int, epoch: int | None, walltime: float, h: Histogram
) -> QueuedHistogram:
    """The `Batch.histograms` row of `h`: flat, its edges and counts already packed, so the sink's
    bounded queue counts their bytes (`sink.record_bytes`) as it does an image's PNG."""
    return QueuedHistogram(run_id, tag, rep, step, epoch, walltime, *stored(h))


def insert(
    store: Engine, rows: list[QueuedHistogram], tag_id: Callable[[str], int], walltime_sql: str
) -> None:
    """Insert `Batch.histograms` rows (`queued_row`) inside the caller's transaction."""
    store.executemany(
        f"INSERT INTO histograms (run_id, tag_id, rep, step, epoch, walltime_ms, {STATS})"
        f" VALUES (?, ?, ?, ?, ?, {walltime_sql}, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(row[0], tag_id(row[1]), *row[2:]) for row in rows],
    )


def stored(h: Histogram) -> tuple[Any, ...]:
    """The column values of `h` after `walltime_ms`, in the order of `STATS`."""
    return (h.count, h.nonfinite, h.minimum, h.maximum, h.total, h.total_squares,
            pack_floats(h.edges), pack_ints(h.counts))  # fmt: skip


def from_columns(row: tuple[Any, ...] | list[Any]) -> Histogram:
    """The `Histogram` of the eight `STATS` columns of a row."""
    count, nonfinite, minimum, maximum, total, squares, edges, counts = row
    return Histogram(
        count, nonfinite, minimum, maximum, total, squares, unpack_floats(edges), unpack_ints(counts)
    )


def read(
    store: Engine, run_id: int, tag: str | None = None, repetition: int | None = None
) -> list[HistogramRecord]:
    """The histograms of a run (one tag, one repetition, or all), by tag, repetition, step; none
    from a table older than v5, which reading commands (export) read as it is, unmigrated."""
    if not store.table_exists("histograms"):
        return []
    where, params = ["h.run_id = ?"], list[int | str]([run_id])
    for column, value in (("t.name", tag), ("h.rep", repetition)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    rows = store.execute(
        f"SELECT h.histogram_id, t.name, h.rep, h.step, h.epoch, h.walltime_ms, {STATS}"
        " FROM histograms h JOIN tags t ON t.tag_id = h.tag_id"
        f" WHERE {' AND '.join(where)} ORDER BY t.name, h.rep, h.step, h.histogram_id",
        params,
    )
    return [
        HistogramRecord(row[0], row[1], row[2], row[3], row[4], row[5] / 1000, from_columns(row[6:]))
        for row in rows
    ]

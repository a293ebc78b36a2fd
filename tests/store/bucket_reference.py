"""Chart buckets folded in plain Python from raw rows: what `DashboardQueries.buckets_of` must
return, for the tests that hold it to that."""

from __future__ import annotations


def brute_buckets(rows: list[tuple], lo: int, hi: int, span: int, origin: int) -> list[tuple]:
    """The buckets of raw (step, epoch, walltime_ms, value) rows with lo <= step <= hi: each its
    last row, then the MIN and MAX of its values (None skipped)."""
    buckets: dict[int, list[tuple]] = {}
    for row in rows:
        if lo <= row[0] <= hi:
            buckets.setdefault((row[0] - origin) // span, []).append(row)
    out = []
    for k in sorted(buckets):
        values = [row[3] for row in buckets[k] if row[3] is not None]
        out.append((*buckets[k][-1], min(values, default=None), max(values, default=None)))
    return out

"""Helpers for tests that log into a real result table on disk and drive time themselves."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import tallyboard as tb


class FakeClock:
    """Monotonic nanoseconds (the ``clock=`` of Stat and Sampler) that move only when told to."""

    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def at(self, seconds: float) -> None:
        self.ns = int(seconds * 1e9)


@contextmanager
def scratch_table(folder: Path) -> Iterator[tb.ResultTable]:
    """A new SQLite result table in ``folder``; no warning about the checkout's uncommitted changes."""
    table = tb.ResultTable(folder / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    try:
        yield table
    finally:
        table.close()


def series(writer: tb.LogWriter, tag: str) -> list[tuple[int, float]]:
    """(step, value) of every point of ``tag``, once everything logged so far is on disk."""
    writer.flush()
    return [(point.step, point.value) for point in writer.get_scalar(tag)]

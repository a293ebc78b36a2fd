"""The sink's one write path: a `Batch` applied in one transaction.

Scalars go in one prepared statement per long series (short ones share one), then the
`scalar_blocks` they touched are recomputed in the same transaction; tags are interned inside it,
a batch's new scalar tags together, and remembered only once it committed. Hparams and results can
also be written at once (`put_values`), outside any batch.

Why a batch's cost must not grow per series beyond its rows: a model that logs per-parameter
statistics has 100,000 tags, and a batch may hold thousands of series of one row each (the sink
takes them together). A statement of its own costs such a series a compilation (~65 us, as much as
a dozen rows), and interning its tag two round trips.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from tallyboard.store import environments as environment_rows
from tallyboard.store import histograms as histogram_rows
from tallyboard.store.indexed_values import UPSERT_VALUE, with_types
from tallyboard.store.records import Batch, QueuedValue, ScalarRow
from tallyboard.store.run_fields import value_key
from tallyboard.store.runs import RunRows
from tallyboard.store.schema import BLOCK_BITS, BLOCK_STEPS

# Seconds -> whole milliseconds, to the nearest (halves away from zero): SQLite's ROUND adds 0.5 to
# the magnitude and truncates; `walltime_ms` does that same float arithmetic, for engines that COPY.
WALLTIME_MS_SQL = "CAST(ROUND(? * 1000) AS BIGINT)"
INSERT_SCALARS = (
    "INSERT INTO scalars (run_id, tag_id, rep, step, epoch, walltime_ms, value)"
    " VALUES ({run_id}, {tag_id}, ?, ?, ?, " + WALLTIME_MS_SQL + ", ?)"
    " ON CONFLICT (run_id, tag_id, rep, step) DO UPDATE SET epoch = excluded.epoch,"
    " walltime_ms = excluded.walltime_ms, value = excluded.value"
)
# A series of at least this many rows gets a statement of its own, its ids inlined (two parameters
# fewer per row); shorter ones share one statement with their ids as parameters (see above).
OWN_STATEMENT_ROWS = 32
TAGS_PER_QUERY = 500  # names read back per SELECT ... IN (...): far below any SQLite's variable limit


# One block of one series recomputed from its scalars. An aggregate without GROUP BY is one pass
# over the block's primary-key range: a third of the cost of grouping a batch's rows by block.
# The range is closed, [first step, last step]: the last block's end, 2**63, is no 64-bit integer.
REBUILD_BLOCK = (
    "INSERT INTO scalar_blocks (run_id, tag_id, rep, block, lowest, highest)"
    " SELECT ?, ?, ?, ?, MIN(value), MAX(value) FROM scalars"
    " WHERE run_id = ? AND tag_id = ? AND rep = ? AND step >= ? AND step <= ?"
    " ON CONFLICT (run_id, tag_id, rep, block)"
    " DO UPDATE SET lowest = excluded.lowest, highest = excluded.highest"
)


def touched_blocks(run_id: int, tag_id: int, rows: Iterable[ScalarRow]) -> list[tuple[int, ...]]:
    """`REBUILD_BLOCK`'s parameters for every block of a series that `rows` were written to."""
    return [
        (run_id, tag_id, rep, block, run_id, tag_id, rep, first, first + BLOCK_STEPS - 1)
        for rep, block in sorted({(row[0], row[1] >> BLOCK_BITS) for row in rows})
        for first in (block << BLOCK_BITS,)
    ]


def walltime_ms(seconds: float) -> int:
    """Exactly the milliseconds that WALLTIME_MS_SQL stores in SQLite for `seconds`."""
    ms = seconds * 1000
    return int(ms + 0.5) if ms >= 0 else -int(0.5 - ms)


class BatchWrites(RunRows):
    """The `Store` methods that write logged records: on the run rows (a batch's run updates, the
    runs' `updated_at`), which `RunRows` owns."""

    # ---- the sink's one write path ---------------------------------------------------------
    def write_batch(self, batch: Batch) -> None:
        """Commit everything in `batch` in one transaction (retried as a whole when busy)."""
        self.ready_for_writing()
        with self._lock:
            new_tags: dict[str, int] = {}
            self.atomic(lambda: self._write(batch, new_tags))
            self._tag_ids.update(new_tags)  # only ids whose insert was committed

    def _write(self, batch: Batch, new_tags: dict[str, int]) -> None:
        new_tags.clear()

        def tag_id(name: str) -> int:
            return self._tag_id(name, new_tags)

        if batch.scalars:
            tag_ids = self._intern_tags([tag for _, tag, _ in batch.scalars], new_tags)
            series = [(run_id, tag_ids[tag], rows) for run_id, tag, rows in batch.scalars]
            self._insert_scalars(series)
            self._rebuild_blocks(series)
        if batch.media:
            self.executemany(
                "INSERT INTO media (run_id, tag_id, rep, step, epoch, walltime_ms, kind, width, height, png)"
                f" VALUES (?, ?, ?, ?, ?, {WALLTIME_MS_SQL}, ?, ?, ?, ?)",
                [(r[0], tag_id(r[1]), *r[2:]) for r in batch.media],
            )
        if batch.texts:
            self.executemany(
                "INSERT INTO texts (run_id, tag_id, rep, step, epoch, walltime_ms, kind, content, markdown)"
                f" VALUES (?, ?, ?, ?, ?, {WALLTIME_MS_SQL}, ?, ?, ?)",
                [(r[0], tag_id(r[1]), *r[2:8], r[8] if len(r) > 8 else 0) for r in batch.texts],
            )
        if batch.histograms:
            histogram_rows.insert(self, batch.histograms, tag_id, WALLTIME_MS_SQL)
        for kind, queued in (("hparams", batch.hparams), ("results", batch.results)):
            if queued:
                self._write_values(kind, queued)
        if batch.repetitions:
            self.executemany(
                "INSERT INTO repetitions (run_id, rep, start_time) VALUES (?, ?, ?)"
                " ON CONFLICT (run_id, rep) DO UPDATE SET start_time = excluded.start_time",
                batch.repetitions,
            )
        self._write_console_and_environments(batch)
        for run_id, values in batch.run_updates:
            self._update_run(run_id, values)

    def _write_console_and_environments(self, batch: Batch) -> None:
        if batch.console:
            self.executemany(
                "INSERT INTO console (run_id, rep, walltime_ms, stream, line)"
                f" VALUES (?, ?, {WALLTIME_MS_SQL}, ?, ?)",
                batch.console,
            )
        if batch.environments:
            environment_rows.insert(self, batch.environments)

    def put_values(self, kind: str, rows: list[QueuedValue]) -> None:
        """Write hparams (`kind='hparams'`) or results (`'results'`) now, in their own transaction:
        rows of (run_id, name, json_value); a name already set is overwritten."""
        self.ready_for_writing()
        if kind not in ("hparams", "results"):
            raise ValueError(f"kind must be 'hparams' or 'results', not {kind!r}")
        with self._lock:
            self.atomic(lambda: self._write_values(kind, rows))

    def _write_values(self, kind: str, rows: list[QueuedValue]) -> None:
        """Hparams or results, each name also a column of the table, and the runs' `updated_at`."""
        self.executemany(UPSERT_VALUE.format(table=kind), with_types(rows))
        self.executemany(
            "INSERT INTO columns (name, kind, alias, position)"
            " SELECT ?, ?, ?, COALESCE(MAX(position), -1) + 1 FROM columns WHERE true"
            " ON CONFLICT (name) DO NOTHING",
            [(key, kind[:-1], key) for key in dict.fromkeys(value_key(kind, name) for _, name, _ in rows)],
        )
        now = time.time()
        touched = {run_id for run_id, _, _ in rows}
        self.executemany("UPDATE runs SET updated_at = ? WHERE run_id = ?", [(now, r) for r in touched])

    def _insert_scalars(self, series: list[tuple[int, int, list[ScalarRow]]]) -> None:
        """Insert the rows of `series` ((run_id, tag_id, rows) each); a step logged again keeps the
        last value. Ids are trusted ints, inlined so that one prepared statement serves a series."""
        short: list[tuple[Any, ...]] = []
        for run_id, tag_id, rows in series:
            if len(rows) >= OWN_STATEMENT_ROWS:
                self.executemany(INSERT_SCALARS.format(run_id=int(run_id), tag_id=int(tag_id)), rows)
            else:
                short.extend((run_id, tag_id, *row) for row in rows)
        if short:  # after the long ones: two series never share a key, so their order is free
            self.executemany(INSERT_SCALARS.format(run_id="?", tag_id="?"), short)

    def _intern_tags(self, names: list[str], new_tags: dict[str, int]) -> dict[str, int]:
        """{name: tag_id} for `names`, the missing ones inserted with one statement and read back a
        few hundred per query (remembered in `new_tags`, as `_tag_id` does)."""
        ids: dict[str, int] = {}
        missing: list[str] = []
        for name in dict.fromkeys(names):
            known = self._tag_ids.get(name) or new_tags.get(name)
            if known is None:
                missing.append(name)
            else:
                ids[name] = known
        if missing:
            insert = "INSERT INTO tags (name) VALUES (?) ON CONFLICT (name) DO NOTHING"
            self.executemany(insert, [(name,) for name in missing])
            for start in range(0, len(missing), TAGS_PER_QUERY):
                chunk = missing[start : start + TAGS_PER_QUERY]
                marks = ", ".join("?" * len(chunk))
                found = dict(self.execute(f"SELECT name, tag_id FROM tags WHERE name IN ({marks})", chunk))
                new_tags.update(found)
                ids.update(found)
        return ids

    def _tag_id(self, name: str, new_tags: dict[str, int]) -> int:
        """The id of tag `name`, interned inside the current transaction when new (and then
        remembered in `new_tags`, which the caller keeps only once the transaction committed)."""
        known = self._tag_ids.get(name) or new_tags.get(name)
        if known is None:
            self.execute("INSERT INTO tags (name) VALUES (?) ON CONFLICT (name) DO NOTHING", (name,))
            known = self.execute("SELECT tag_id FROM tags WHERE name = ?", (name,))[0][0]
            new_tags[name] = known
        return known

    def _rebuild_blocks(self, series: list[tuple[int, int, list[ScalarRow]]]) -> None:
        """Recompute, from `scalars`, the `scalar_blocks` rows of the blocks that the rows of
        `series` ((run_id, tag_id, rows) each) were written to.

        Recomputed rather than merged with the new values: a step logged again with another value
        must not leave its old value as a block's extreme, and MIN/MAX skip NaN (NULL) alike on
        both engines. It re-reads at most the rest of the first and last block a series touched."""
        self.executemany(
            REBUILD_BLOCK,
            [block for run_id, tag_id, rows in series for block in touched_blocks(run_id, tag_id, rows)],
        )

"""The sink's one write path: a `Batch` applied in one transaction.

Scalars become `scalar_blocks` rows (store/open_blocks.py: one UPSERT per series a batch touched,
of its open block packed by store/block_codec.py), in one prepared statement for the whole batch;
tags are interned inside the transaction, a batch's new scalar tags together, and remembered only
once it committed, like the series' open blocks. Hparams and results can also be written at once
(`put_values`), outside any batch.

Why a batch's cost must not grow per series beyond its points: a model that logs per-parameter
statistics has 100,000 tags, and a batch may hold thousands of series of one point each (the sink
takes them together). Interning each tag on its own would cost two round trips.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from tallyboard.store import environments as environment_rows
from tallyboard.store import histograms as histogram_rows
from tallyboard.store import open_blocks
from tallyboard.store.indexed_values import UPSERT_VALUE, with_types
from tallyboard.store.records import Batch, QueuedValue, ScalarRow
from tallyboard.store.run_fields import value_key
from tallyboard.store.runs import RunRows

# Seconds -> whole milliseconds, to the nearest (halves away from zero): SQLite's ROUND adds 0.5 to
# the magnitude and truncates; `block_codec.walltime_ms` does that same float arithmetic in Python
# (scalars, whose blocks are packed in Python).
WALLTIME_MS_SQL = "CAST(ROUND(? * 1000) AS BIGINT)"
TAGS_PER_QUERY = 500  # names read back per SELECT ... IN (...): far below any SQLite's variable limit


class BatchWrites(RunRows):
    """The `Store` methods that write logged records: on the run rows (a batch's run updates, the
    runs' `updated_at`), which `RunRows` owns."""

    # ---- the sink's one write path ---------------------------------------------------------
    _series_state = open_blocks.SeriesState()  # replaced, never changed in place: see `_write_blocks`
    _planned_state: open_blocks.SeriesState | None = None

    def write_batch(self, batch: Batch) -> None:
        """Commit everything in `batch` in one transaction (retried as a whole when busy)."""
        self.ready_for_writing()
        with self._lock:
            new_tags: dict[str, int] = {}
            self._planned_state = None
            try:
                self.atomic(lambda: self._write(batch, new_tags))
            except BaseException:  # committed or not, nobody knows: the stored blocks are the truth
                self._series_state = open_blocks.SeriesState()
                raise
            self._tag_ids.update(new_tags)  # only ids whose insert was committed
            if self._planned_state is not None:
                self._series_state = self._planned_state

    def _write(self, batch: Batch, new_tags: dict[str, int]) -> None:
        new_tags.clear()

        def tag_id(name: str) -> int:
            return self._tag_id(name, new_tags)

        if batch.scalars:
            tag_ids = self._intern_tags([tag for _, tag, _ in batch.scalars], new_tags)
            self._write_blocks([(run_id, tag_ids[tag], rows) for run_id, tag, rows in batch.scalars])
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

    def _write_blocks(self, series: list[tuple[int, int, Sequence[ScalarRow]]]) -> None:
        """The rows of `series` ((run_id, tag_id, rows) each) into their series' blocks
        (store/open_blocks.py); the state the plan leaves is kept once the transaction commits."""
        state = open_blocks.load_runs(self, self._series_state, (run_id for run_id, _, _ in series))
        squeeze = not self.url.is_postgres  # PostgreSQL compresses on the server (store/block_codec.py)
        planned = open_blocks.plan(state, series, squeeze)
        self.executemany(open_blocks.UPSERT_BLOCK, planned.upserts)
        for key, points in planned.merges.items():
            open_blocks.merge_points(self, key, points, squeeze)
        self._planned_state = planned.state

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

"""Rows of `runs` and what hangs on them: creating, resuming, editing, deleting and listing runs,
their tags, hparams, results, and the result table's columns.

Creating and reopening a run check uniqueness inside the runs lock (`_lock_runs`), so two
processes starting the same configuration cannot both get a run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from tallyboard.errors import DuplicateRunError, NotFoundError
from tallyboard.store.engine import Engine
from tallyboard.store.records import DEBUG_RUN_ID, Column, ResumePoint
from tallyboard.store.run_fields import (
    EDITABLE_RUN_FIELDS,
    RUN_FIELDS,
    RunRow,
    empty_text_as_null,
    select_list,
)
from tallyboard.store.schema import UNIQUE_KEY_PREFIX
from tallyboard.store.tables import BY_NAME, RUN_TABLES

RUNS_PER_STATEMENT = 500  # run ids in one `IN (...)` of a read of some runs

# Raises the deleted runs' count (schema v11) in the deleting transaction.
COUNT_DELETION = "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'runs_deleted'"


class RunRows(Engine):
    """The `Store` methods of run rows, on the engine's primitives alone."""

    # ---- runs ----------------------------------------------------------------------------
    def create_run(
        self, fields: dict[str, Any], debug: bool = False, durable: bool = True, rerun: bool = False
    ) -> int:
        """Insert a run and its first repetition; `fields` maps `runs` columns to values (start_time
        required).

        A debug run replaces run `DEBUG_RUN_ID` and everything logged under it. Otherwise, when
        `fields['unique_key']` is not None and a visible run that is not failed has the same key,
        raise `DuplicateRunError` -- checked and inserted in one transaction -- or, with `rerun`,
        insert the run as a rerun of that run (`rerun_of`: the first run of the key, so that the
        runs of one configuration form one group, however often it runs again).

        A new run's id is one more than the largest id in the table (or 1), chosen under the runs
        lock rather than by the engine: SQLite's rowid would follow the debug run's -1 with 0, and
        a PostgreSQL sequence leaves a hole for every rolled-back insert. So ids are positive and
        dense on both engines, whatever order debug and real runs come in. An import that keeps its
        own ids passes `run_id` in `fields`.

        `durable=False` is a writer's start (`ResultTable.new_run`): the commit does not wait for the
        disk, and the first repetition is left out, for the caller to queue to its sink (a
        `QueuedRepetition`): the sink's commit of it waits, and makes the run's row durable too. So
        a run that logs and closes waits for the disk once, not twice.
        """
        self.ready_for_writing()
        fields = empty_text_as_null(fields)
        names = [name for name in fields if name in RUN_FIELDS]
        now = time.time()

        def insert() -> int:
            self._lock_runs()
            cols = ["updated_at", *names]
            values = [now, *(fields[name] for name in names)]
            if debug:
                self._delete_run(DEBUG_RUN_ID)
            elif rerun:
                same = self._same_key(fields.get("unique_key"))
                if same is not None:
                    cols.append("rerun_of")
                    values.append(same[1] or same[0])
            else:
                self._refuse_duplicate(fields.get("unique_key"))
            if "run_id" not in fields:
                cols.append("run_id")
                values.append(DEBUG_RUN_ID if debug else self._next_run_id())
            marks = ", ".join("?" * len(cols))
            rows = self.execute(
                f"INSERT INTO runs ({', '.join(cols)}) VALUES ({marks}) RETURNING run_id", values
            )
            run_id: int = rows[0][0]
            if durable:
                self.execute(
                    "INSERT INTO repetitions (run_id, rep, start_time) VALUES (?, 0, ?)",
                    (run_id, fields["start_time"]),
                )
            return run_id

        with self._lock:
            return self.atomic(insert, durable)

    def _next_run_id(self) -> int:
        """Inside the runs lock: the id of the next real run (see `create_run`)."""
        largest = self.execute("SELECT MAX(run_id) FROM runs")[0][0]
        return max(largest or 0, 0) + 1

    def _refuse_duplicate(self, unique_key: str | None, run_id: int | None = None) -> None:
        """Inside the runs lock: raise `DuplicateRunError` if a visible run other than `run_id` that
        is not failed has this unique key (NULL, the debug run's key, never matches)."""
        same = self._same_key(unique_key, run_id)
        if same is not None:
            raise DuplicateRunError(same[0])

    def _same_key(self, unique_key: str | None, run_id: int | None = None) -> tuple[int, int | None] | None:
        """Inside the runs lock: (run_id, rerun_of) of the first visible run other than `run_id`
        that is not failed and has this unique key, None if there is none."""
        if unique_key is None:
            return None
        # The prefix through the index (schema v3), then the whole key, as `unique_key || ''`: given
        # `unique_key = ?`, SQLite would put the key into the prefix's expression too (constant
        # propagation), which then no index matches, and read every run.
        same = self.execute(
            f"SELECT run_id, rerun_of FROM runs WHERE substr(unique_key, 1, {UNIQUE_KEY_PREFIX})"
            f" = substr(?, 1, {UNIQUE_KEY_PREFIX}) AND unique_key || '' = ? AND hidden = 0"
            " AND status <> 'failed' AND run_id <> ? ORDER BY run_id LIMIT 1",
            (unique_key, unique_key, DEBUG_RUN_ID if run_id is None else run_id),
        )
        return (same[0][0], same[0][1]) if same else None

    def reopen_run(self, run_id: int, check: bool = True) -> ResumePoint:
        """Set a run back to 'running' (no end time) and return where its logging stopped.

        Like `create_run`, atomic with a uniqueness check: a failed run whose configuration was
        run again since cannot come back to life beside that run (`DuplicateRunError`); `check`
        False skips it (a run repeated because its configuration ran again). Raises `KeyError`
        for an unknown run."""
        self.ready_for_writing()

        def reopen() -> ResumePoint:
            self._lock_runs()
            row = self.execute("SELECT unique_key, hidden FROM runs WHERE run_id = ?", (run_id,))
            if not row:
                raise NotFoundError(f"no run with id {run_id}")
            if check and not row[0][1]:
                self._refuse_duplicate(row[0][0], run_id)
            self._update_run(run_id, {"status": "running", "end_time": None, "error": None})
            return self._resume_point(run_id)

        with self._lock:
            return self.atomic(reopen)

    def _resume_point(self, run_id: int) -> ResumePoint:
        """The last repetition of a run, its start time and, per tag, the step after its last one.
        The tags and their last steps come from `scalar_blocks` (a row per block of points), so a
        run of a million points costs a thousand rows, not a million."""
        reps = self.execute(
            "SELECT rep, start_time FROM repetitions WHERE run_id = ? ORDER BY rep DESC LIMIT 1", (run_id,)
        )
        rep, start = reps[0] if reps else (0, time.time())
        tags = self.execute(
            "SELECT t.name, MAX(b.last_step) FROM scalar_blocks b JOIN tags t ON t.tag_id = b.tag_id"
            " WHERE b.run_id = ? AND b.rep = ? GROUP BY t.name",
            (run_id, rep),
        )
        next_steps = {name: last + 1 for name, last in tags}
        return ResumePoint(rep, start, next_steps)

    def _delete_run(self, run_id: int) -> None:
        for table in RUN_TABLES[:-1]:
            self.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        if self.execute("DELETE FROM runs WHERE run_id = ? RETURNING run_id", (run_id,)):
            self.execute(COUNT_DELETION)  # readers see a deletion without counting the runs (v11)

    def delete_run(self, run_id: int) -> None:
        """Delete a run and everything logged under it, in its own transaction."""
        self.ready_for_writing()
        with self._lock:
            self.atomic(lambda: self._delete_run(run_id))

    def update_run(self, run_id: int, **values: Any) -> None:
        """Set editable columns of a run now (in its own transaction) and bump `updated_at`."""
        self.ready_for_writing()
        with self._lock:
            self.atomic(lambda: self._update_run(run_id, values))

    def _update_run(self, run_id: int, values: dict[str, Any]) -> None:
        unknown = set(values) - EDITABLE_RUN_FIELDS
        if unknown:
            raise ValueError(f"cannot edit run column(s) {sorted(unknown)}")
        values = empty_text_as_null(values)
        assignments = ", ".join(f"{name} = ?" for name in values)
        self.execute(
            f"UPDATE runs SET {assignments}, updated_at = ? WHERE run_id = ?",
            (*values.values(), time.time(), run_id),
        )

    # ---- several tags per run (schema v6) ------------------------------------------------------
    def change_run_tags(self, run_id: int, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        """Add and remove tags of a run now, in one transaction, and bump its `updated_at` (live
        views see the change). Adding a tag the run has, or removing one it lacks, does nothing."""
        self.ready_for_writing()

        def change() -> None:
            self.executemany(
                "INSERT INTO run_tags (run_id, tag) VALUES (?, ?) ON CONFLICT (run_id, tag) DO NOTHING",
                [(run_id, tag) for tag in add],
            )
            self.executemany(
                "DELETE FROM run_tags WHERE run_id = ? AND tag = ?", [(run_id, t) for t in remove]
            )
            self.execute("UPDATE runs SET updated_at = ? WHERE run_id = ?", (time.time(), run_id))

        with self._lock:
            self.atomic(change)

    def run_tags(
        self, run_id: int | None = None, run_ids: Sequence[int] | None = None
    ) -> dict[int, list[str]]:
        """{run_id: sorted tags} of one run, of `run_ids`, or of every run that has any (none in a
        table older than the tags, which reading commands read as it is: see store/location.py)."""
        from tallyboard.store.migrations import stored_version

        with self._lock:
            if (stored_version(self) or 0) < BY_NAME["run_tags"].since:
                return {}
        rows = self._rows_of_runs("SELECT run_id, tag FROM run_tags", "run_id, tag", run_id, run_ids)
        out: dict[int, list[str]] = {}
        for rid, tag in rows:
            out.setdefault(rid, []).append(tag)
        return out

    def run(self, run_id: int) -> RunRow | None:
        """The row of one run, or None."""
        rows = self.runs(run_id=run_id, show_hidden=True)
        return rows[0] if rows else None

    def runs(
        self, run_id: int | None = None, show_hidden: bool = False, run_ids: Sequence[int] | None = None
    ) -> list[RunRow]:
        """Rows of `runs` ordered by run id (all columns), visible ones unless `show_hidden`: every
        run, one, or `run_ids`."""
        fields = select_list(RUN_FIELDS, self.schema_version)
        select = f"SELECT {fields} FROM runs" + ("" if show_hidden else " WHERE hidden = 0")
        return [RunRow(*row) for row in self._rows_of_runs(select, "run_id", run_id, run_ids)]

    def values(
        self, kind: str, run_id: int | None = None, run_ids: Sequence[int] | None = None
    ) -> dict[int, dict[str, Any]]:
        """Hparams (`kind='hparams'`) or results (`'results'`) as {run_id: {name: value}}: of every
        run, of one, or of `run_ids`."""
        if kind not in ("hparams", "results"):
            raise ValueError(f"kind must be 'hparams' or 'results', not {kind!r}")
        rows = self._rows_of_runs(f"SELECT run_id, name, value FROM {kind}", "run_id, name", run_id, run_ids)
        out: dict[int, dict[str, Any]] = {}
        for rid, name, value in rows:
            out.setdefault(rid, {})[name] = json.loads(value)
        return out

    # ---- columns of the result table ----------------------------------------------------------
    def _rows_of_runs(
        self, select: str, order: str, run_id: int | None, run_ids: Sequence[int] | None
    ) -> list[tuple[Any, ...]]:
        """The rows of `select` (which may end in a WHERE) of every run, of one, or of `run_ids`
        (by key ranges of RUNS_PER_STATEMENT ids), in `order`."""
        joiner = " AND " if " WHERE " in select else " WHERE "
        if run_id is not None:
            run_ids = [run_id]
        if run_ids is None:
            with self._lock:
                return self.execute(f"{select} ORDER BY {order}")
        rows: list[tuple[Any, ...]] = []
        wanted = sorted(set(run_ids))
        for start in range(0, len(wanted), RUNS_PER_STATEMENT):
            chunk = wanted[start : start + RUNS_PER_STATEMENT]
            marks = ", ".join("?" * len(chunk))
            with self._lock:
                rows += self.execute(f"{select}{joiner}run_id IN ({marks}) ORDER BY {order}", chunk)
        return rows

    def columns(self) -> list[Column]:
        """Every column, shown ones first in display order, then hidden ones by name."""
        with self._lock:
            rows = self.execute(
                "SELECT name, kind, alias, position FROM columns ORDER BY position IS NULL, position, name"
            )
        return [Column(*row) for row in rows]

    def set_columns(self, changes: dict[str, dict[str, Any]]) -> None:
        """Set `alias` and/or `position` of columns ({name: {"alias": .., "position": ..}}) atomically;
        unknown column names raise `KeyError` and change nothing."""
        self.ready_for_writing()

        def update() -> None:
            known = {row[0] for row in self.execute("SELECT name FROM columns")}
            missing = set(changes) - known
            if missing:
                raise NotFoundError(f"no such column(s): {sorted(missing)}")
            for name, change in changes.items():
                for key, value in change.items():
                    if key not in ("alias", "position"):
                        raise ValueError(f"cannot set {key!r} of a column")
                    self.execute(f"UPDATE columns SET {key} = ? WHERE name = ?", (value, name))

        with self._lock:
            self.atomic(update)

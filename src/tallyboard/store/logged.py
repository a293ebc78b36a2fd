"""Reads of what runs logged (scalars, media, texts, histograms, console, environment), and the
records set beside them: quarantined records and artefacts.

Every read is one statement an index answers (a series is one range scan of the `scalars`
primary key, a tag list one seek per known tag), so reading never waits on a run's size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import TYPE_CHECKING, Any

from tallyboard.store import alert_content, block_reads
from tallyboard.store import environments as environment_rows
from tallyboard.store import histograms as histogram_rows
from tallyboard.store.block_codec import Points, value_or_none
from tallyboard.store.engine import Engine
from tallyboard.store.records import (
    ARTIFACT_COLUMNS,
    ArtifactRow,
    ConsoleLine,
    MediaRow,
    Quarantined,
    TextRow,
)
from tallyboard.values import check_text

if TYPE_CHECKING:
    from tallyboard.histogram import HistogramRecord


def console_query(
    run_id: int, after: int = 0, limit: int | None = None, search: str | None = None
) -> tuple[str, list[Any]]:
    """The SQL and parameters of `Store.console` (shared with the dashboard's queries)."""
    sql = "SELECT console_id, rep, walltime_ms, stream, line FROM console WHERE run_id = ? AND console_id > ?"
    params: list[Any] = [run_id, after]
    if search:
        check_text("the console search", search)
        sql += " AND LOWER(line) LIKE ? ESCAPE '!'"
        params.append("%" + re.sub(r"([!%_])", r"!\1", search.lower()) + "%")
    sql += " ORDER BY console_id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, params


def artifacts_query(run_id: int, name: str | None) -> tuple[str, list[Any]]:
    """The SELECT of a run's artefacts (or the one called `name`), by name, and its parameters."""
    sql, params = f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE run_id = ?", list[Any]([run_id])
    if name is not None:
        sql, params = sql + " AND name = ?", [run_id, check_text("the artefact name", name)]
    return sql + " ORDER BY name", params


# What `LoggedReads.scalars` can answer of a point: from its rep and its decoded block's columns.
_SCALAR_COLUMNS: dict[str, Callable[[int, Points], Iterable[Any]]] = {
    "rep": lambda rep, p: repeat(rep, len(p.steps)),
    "step": lambda rep, p: p.steps,
    "epoch": lambda rep, p: p.epochs,
    "walltime_ms": lambda rep, p: p.walltimes_ms,
    "value": lambda rep, p: map(value_or_none, p.values),
    "value_or_nan": lambda rep, p: p.values,
    "epoch_or_minus_one": lambda rep, p: (-1 if e is None else e for e in p.epochs),
}
_MEDIA_COLUMNS = "m.media_id, m.step, m.epoch, m.rep, t.name, m.walltime_ms, m.width, m.height, m.png"
_TEXT_COLUMNS = "x.text_id, x.step, x.epoch, x.rep, t.name, x.walltime_ms, x.content"


class LoggedReads(Engine):
    """The `Store` methods that read logged records, on the engine's primitives alone."""

    # ---- records the database rejected (see store/quarantine.py) -------------------------------
    def quarantine(self, record: Quarantined) -> None:
        """Set a rejected record aside, in its own transaction."""
        self.ready_for_writing()
        row = (record.run_id, record.kind, record.tag, record.error, record.record, record.quarantined_at)
        with self._lock:
            self.atomic(
                lambda: self.execute(
                    "INSERT INTO quarantine (run_id, kind, tag, error, record, quarantined_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    row,
                )
            )

    def quarantined(self, run_id: int | None = None) -> list[Quarantined]:
        """The records set aside (of one run, or all), oldest first."""
        sql = "SELECT quarantine_id, run_id, kind, tag, error, record, quarantined_at FROM quarantine"
        params: tuple[Any, ...] = ()
        if run_id is not None:
            sql, params = sql + " WHERE run_id = ?", (run_id,)
        with self._lock:
            rows = self.execute(sql + " ORDER BY quarantine_id", params)
        return [Quarantined(*row) for row in rows]

    # ---- artefacts listed with their run (the bytes: tallyboard/store/artifacts.py) -------------------
    def add_artifact(self, row: ArtifactRow) -> None:
        """List an artefact with its run, in its own transaction; a name logged again is replaced."""
        self.ready_for_writing()
        with self._lock:
            self.atomic(
                lambda: self.execute(
                    f"INSERT INTO artifacts ({ARTIFACT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (run_id, name) DO UPDATE SET kind = excluded.kind, size = excluded.size,"
                    " sha256 = excluded.sha256, step = excluded.step, logged_at = excluded.logged_at",
                    tuple(row),
                )
            )

    def artifacts(self, run_id: int, name: str | None = None) -> list[ArtifactRow]:
        """The artefacts of a run (or the one called `name`), by name."""
        with self._lock:
            if not self.table_exists("artifacts"):  # a table older than schema v9, opened to read
                return []
            return [ArtifactRow(*row) for row in self.execute(*artifacts_query(run_id, name))]

    def artifact_hashes(self) -> list[str]:
        """The sha256 of every blob some artefact of the table names (what a copy must carry)."""
        with self._lock:
            if not self.table_exists("artifacts"):
                return []
            return [
                sha256 for (sha256,) in self.execute("SELECT DISTINCT sha256 FROM artifacts ORDER BY sha256")
            ]

    # ---- reads of logged records --------------------------------------------------------------
    def tag_names(self, run_id: int, table: str = "scalars") -> list[str]:
        """Tags used by a run in `table` ('scalars', 'media', 'texts', 'histograms', or
        'scalar_events' of an imported run), sorted. Scalars are read from their blocks."""
        if table not in ("scalars", "media", "texts", "histograms", "scalar_events"):
            raise ValueError(f"no logged records in table {table!r}")
        table = "scalar_blocks" if table == "scalars" else table
        with self._lock:
            rows = self.execute(  # one index seek per known tag, never a scan of the run's rows
                "SELECT t.name FROM tags t WHERE EXISTS"
                f" (SELECT 1 FROM {table} x WHERE x.run_id = ? AND x.tag_id = t.tag_id) ORDER BY t.name",
                (run_id,),
            )
        return [row[0] for row in rows]

    def scalars(
        self,
        run_id: int,
        tag: str,
        rep: int | None = None,
        columns: tuple[str, ...] = ("rep", "step", "epoch", "walltime_ms", "value"),
    ) -> list[tuple[Any, ...]]:
        """One series ordered by (rep, step), as rows of `columns` (names of `scalars` columns, or
        'value_or_nan': the value with NaN as the text 'nan', which float() and numpy read as NaN,
        or 'epoch_or_minus_one'; a fast path asks only for what it needs)."""
        unknown = set(columns) - _SCALAR_COLUMNS.keys()
        if unknown:
            raise ValueError(f"unknown scalar column(s) {sorted(unknown)}")
        pick = [_SCALAR_COLUMNS[name] for name in columns]
        check_text("the scalar tag", tag)
        with self._lock:
            found = self.execute(
                "SELECT DISTINCT b.tag_id, b.rep FROM scalar_blocks b JOIN tags t ON t.tag_id = b.tag_id"
                " WHERE b.run_id = ? AND t.name = ?" + ("" if rep is None else " AND b.rep = ?"),
                (run_id, tag) if rep is None else (run_id, tag, rep),
            )
            out: list[tuple[Any, ...]] = []
            for tag_id, each_rep in sorted(found, key=lambda row: row[1]):
                for points in block_reads.blocks(self.execute, (run_id, tag_id, each_rep)):
                    out.extend(zip(*(column(each_rep, points) for column in pick), strict=True))
            return out

    def scalar_arrays(
        self, run_id: int, tag: str, rep: int | None, columns: tuple[str, ...]
    ) -> dict[str, Any]:
        """One series ordered by (rep, step) as numpy arrays of `columns` (see
        `block_reads.arrays`): a block's values are one `np.frombuffer`, never a Python float each."""
        check_text("the scalar tag", tag)
        sql = (
            "SELECT b.rep, b.step_data, b.walltime_data, b.value_data, b.epoch_data FROM scalar_blocks b"
            " WHERE b.run_id = ? AND b.tag_id = (SELECT tag_id FROM tags WHERE name = ?)"
        )
        params: tuple[Any, ...] = (run_id, tag) if rep is None else (run_id, tag, rep)
        with self._lock:
            rows = self.execute_blobs(
                sql + ("" if rep is None else " AND b.rep = ?") + " ORDER BY b.rep, b.first_step", params
            )
        return block_reads.arrays(rows, columns)

    def repetitions(self, run_id: int) -> list[int]:
        with self._lock:
            rows = self.execute("SELECT rep FROM repetitions WHERE run_id = ? ORDER BY rep", (run_id,))
        return [row[0] for row in rows]

    def repetition_starts(self, run_id: int) -> dict[int, float]:
        """{rep: start_time} of a run (what a lossless export keeps; `repetitions` lists reps only)."""
        with self._lock:
            rows = self.execute(
                "SELECT rep, start_time FROM repetitions WHERE run_id = ? ORDER BY rep", (run_id,)
            )
        return dict(rows)

    def media(self, run_id: int | None, kind: str | None = None, **filters: Any) -> list[MediaRow]:
        """Images and figures by media_id. `filters` may hold id, step, tag, epoch, repetition
        (None = any)."""
        rows = self._records("media m", "m", "media_id", _MEDIA_COLUMNS, run_id, kind, filters)
        return [MediaRow(*row) for row in rows]

    def texts(self, run_id: int, kind: str | None = None, **filters: Any) -> list[TextRow]:
        """Texts and fragments by text_id, same filters as `media`."""
        return [
            TextRow(*row)
            for row in self._records("texts x", "x", "text_id", _TEXT_COLUMNS, run_id, kind, filters)
        ]

    def alerts(self, run_id: int | None = None) -> list[alert_content.Alert]:
        """The alerts of one run, or of every run, oldest first (texts of kind 'alert')."""
        with self._lock:
            return alert_content.read(self, run_id)

    def histograms(
        self, run_id: int, tag: str | None = None, repetition: int | None = None
    ) -> list[HistogramRecord]:
        """A run's histograms (one tag, one repetition, or all), ordered by tag, repetition, step."""
        if tag is not None:
            check_text("the histogram tag", tag)
        with self._lock:
            return histogram_rows.read(self, run_id, tag, repetition)

    def markdown_text_ids(self, run_id: int) -> set[int]:
        """The ids of the run's texts logged with `markdown=True` (schema v8)."""
        with self._lock:
            rows = self.execute("SELECT text_id FROM texts WHERE run_id = ? AND markdown = 1", (run_id,))
        return {text_id for (text_id,) in rows}

    def console(
        self, run_id: int, after: int = 0, limit: int | None = None, search: str | None = None
    ) -> list[ConsoleLine]:
        """A run's captured console lines with `console_id > after`, oldest first, at most `limit`;
        `search` keeps the lines containing it (case-insensitive, taken literally)."""
        sql, params = console_query(run_id, after, limit, search)
        with self._lock:
            return [ConsoleLine(*row) for row in self.execute(sql, params)]

    def environment(self, run_id: int) -> str | None:
        """The run's environment as stored (JSON text), None when it recorded none."""
        with self._lock:
            rows = self.execute(environment_rows.read_sql(self.schema_version), (run_id,))
        return rows[0][0] if rows else None

    def _records(
        self,
        table: str,
        alias: str,
        id_column: str,
        columns: str,
        run_id: int | None,
        kind: str | None,
        filters: dict[str, Any],
    ) -> list[tuple[Any, ...]]:
        where: list[str] = []
        params: list[Any] = []
        names = {"id": id_column, "step": "step", "epoch": "epoch", "repetition": "rep", "tag": "tag"}
        if run_id is not None:
            where.append(f"{alias}.run_id = ?")
            params.append(run_id)
        if kind is not None:
            where.append(f"{alias}.kind = ?")
            params.append(kind)
        for key, value in filters.items():
            if key not in names:
                raise TypeError(f"unknown filter {key!r}; use id, step, tag, epoch or repetition")
            if value is None:
                continue
            where.append("t.name = ?" if key == "tag" else f"{alias}.{names[key]} = ?")
            params.append(value)
        sql = f"SELECT {columns} FROM {table} JOIN tags t ON t.tag_id = {alias}.tag_id"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            return self.execute(f"{sql} ORDER BY {alias}.{id_column}", params)

"""The runs table as the dashboard serves it: columns, sorting, filtering and paging on the server.

Why on the server: 10,000 runs with their hparams and results are megabytes of JSON; a browser
asked to hold and re-sort that stutters. The server answers one page at a time.

A view (one filter, sort and page) is answered by SQL over the typed copies of hparams and results
(schema v10, store/runs_sql.py, store/runs_walk.py): the database walks the sort column's index
from where the last page ended (`after`, a cursor the previous page returned; an offset is
still accepted) and tests each run it meets, so a page costs the runs it walks, not the table.
Its count stops at `runs_walk.COUNT_CAP` ("at least"); `count` gives the exact number, which the
dashboard asks for after showing the page (docs/performance.md). A view sorted by a run field
reads that one field of every run and orders them in Python (`_field_page`). A view that SQL
cannot answer exactly (a search, a `~` or `tags` filter, a sort by tags) is answered from every
run held in memory (refreshed only for runs whose `updated_at` moved), and kept in order until the table
changes, so its later pages cost one page.

Sorting and filtering work on any column with mixed types and empty cells: values sort as
numbers, then strings, then booleans, and empty cells always come last in either direction.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tallyboard.filter import column_resolver, parse_tree, qualified, run_cell, run_filter
from tallyboard.store import runs_sql, runs_walk
from tallyboard.store.dashboard_reads import DashboardQueries, RunsVersion
from tallyboard.store.indexed_values import BOOL, NUMBER, TEXT
from tallyboard.store.records import Column
from tallyboard.store.run_fields import RUN_ROW, value_key
from tallyboard.store.runs_sql import TRUE, Condition, Dialect, NotInSql, Translator
from tallyboard.store.runs_walk import Position, Sort

VIEWS_KEPT = 8  # filtered and sorted views kept for the current version of the table
WALK_BUDGET = 500  # rows a page walks testing each run by its key, then the filter's runs as a set
MAX_CURSOR = 20_000  # characters of a cursor (it holds a text value of up to a few thousand)

# Run fields that can be table columns; git_diff is far too long for a cell (the run page shows it).
TABLE_RUN_FIELDS = (*(field.name for field in RUN_ROW if field.cell), "tags")
# Run fields a view sorts by through `RunsTable._field_page` (the run id has its own index; tags
# are a list kept in another table, sorted from memory).
FIELD_SORTS = frozenset(TABLE_RUN_FIELDS) - {"run_id", "tags"}


@dataclass(frozen=True)
class ValueNames:
    """The names of hparams and of results in the store, and the value columns (name, kind) that
    the store's column list lacks, in `value_columns` order."""

    hparams: frozenset[str]
    results: frozenset[str]
    unlisted: list[tuple[str, str]]


@dataclass
class Page:
    """One page; `total` is the view's number of runs, or with `total_exact` False at least that
    many (`RunsTable.count` says how many); `next` the cursor of the following page (None: it is
    the last, or the view is answered from memory: pages by offset)."""

    total: int
    rows: list[dict[str, Any]]
    columns: list[Column]
    version: RunsVersion
    total_exact: bool = True
    next: str | None = None


class BadCursor(ValueError):
    """A cursor that no page of this table gave."""


class RunsTable:
    """One page of a view, from SQL when it can say it exactly, else from rows held in memory
    (kept in step with the store by `updated_at`)."""

    def __init__(self, queries: DashboardQueries) -> None:
        self.queries = queries
        self.dialect = Dialect.of(queries.postgres)
        self._rows: dict[int, dict[str, Any]] = {}
        self._version: RunsVersion | None = None
        self._lock = threading.Lock()
        self._views: dict[tuple, list[dict[str, Any]]] = {}  # view -> its rows in order (one version)
        self._orders: dict[tuple, list[int]] = {}  # view sorted by a run field -> its run ids in order
        self._totals: dict[tuple, tuple[int, bool]] = {}  # (version, what selects) -> (runs, exact)
        self._names: tuple[RunsVersion, ValueNames] | None = None  # for one version

    def refresh(self) -> RunsVersion:
        """Reload the rows held in memory that changed since the last call; returns the store's
        runs version."""
        version = self.queries.runs_version()
        with self._lock:
            if version == self._version:
                return version
            if self._version is None or version.deleted != self._version.deleted:
                self._rows = {run["run_id"]: _flatten(run) for run in self.queries.runs()}
            else:  # a new run has a new updated_at too
                for run in self.queries.runs(updated_after=self._version.updated_at):
                    self._rows[run["run_id"]] = _flatten(run)
            self._version = version
        return version

    def value_names(self, version: RunsVersion | None = None) -> ValueNames:
        """The store's hparam and result names (kept per version of the table): a few index seeks."""
        version = version or self.queries.runs_version()
        kept = self._names
        if kept is not None and kept[0] == version:
            return kept[1]
        hparams, results = (
            frozenset(row[0] for row in self.queries.read(runs_sql.value_names_sql(table)))
            for table in ("hparams", "results")
        )
        listed = {c.name for c in self.queries.columns()}
        # a bare name is an hparam column if it is an hparam anywhere; `results.tag` is its own
        keys = [("hparam", name, value_key("hparams", name)) for name in sorted(hparams)]
        keys += [("result", name, value_key("results", name)) for name in sorted(results)]
        sightings = [
            (key, kind, self.queries.read(runs_sql.FIRST_RUN.format(table=f"{kind}s"), [name])[0][0])
            for kind, name, key in keys
            if key not in listed and not (kind == "result" and key == name and name in hparams)
        ]
        names = ValueNames(hparams, results, value_columns(sightings))
        self._names = (version, names)
        return names

    def columns(self, version: RunsVersion | None = None) -> list[Column]:
        """Every column: the store's preferences first, then hparams/results it does not list, as
        `value_columns` orders them."""
        columns = [
            Column(c.name, c.kind, c.alias or c.name, c.position)
            for c in self.queries.columns()
            if c.kind != "run" or c.name in TABLE_RUN_FIELDS
        ]
        known = {c.name for c in columns}
        for field in TABLE_RUN_FIELDS:
            if field not in known:
                columns.append(Column(field, "run", field, None))
                known.add(field)
        extra = [(name, kind) for name, kind in self.value_names(version).unlisted if name not in known]
        last = max((c.position for c in columns if c.position is not None), default=-1)
        for offset, (name, kind) in enumerate(extra):
            columns.append(Column(name, kind, name, last + 1 + offset))
        return sorted(columns, key=lambda c: (c.position is None, c.position or 0, c.name))

    def page(
        self,
        *,
        offset: int = 0,
        limit: int = 100,
        sort: str | None = None,
        descending: bool = False,
        filter_text: str = "",
        search: str = "",
        show_hidden: bool = False,
        run_ids: list[int] | None = None,
        after: str | None = None,
        experiment: str | None = None,
    ) -> Page:
        """One page of rows after filtering and sorting: from `after` (a page's `next`) when given
        and the view is answered in SQL, else from `offset`; with `experiment`, of that
        experiment's runs only, and only the columns they have values in (`scoped_columns`).
        Raises FilterError on a bad filter, BadCursor on a bad cursor."""
        page = self._page(offset, limit, sort, descending, scoped(filter_text, experiment), search,
                          show_hidden, run_ids, after)  # fmt: skip
        if experiment is not None:
            page.columns = self.scoped_columns(page.columns, experiment)
        return page

    def scoped_columns(self, columns: list[Column], experiment: str) -> list[Column]:
        """The columns of one experiment's runs: every run column, and the hparams and results its
        runs hold (a table of several projects shows each with its own columns, not all of them)."""
        names = self.queries.value_names_of(experiment)
        keys = {value_key(table, name) for table, held in names.items() for name in held}
        return [column for column in columns if column.kind == "run" or column.name in keys]

    def _page(
        self,
        offset: int,
        limit: int,
        sort: str | None,
        descending: bool,
        filter_text: str,
        search: str,
        show_hidden: bool,
        run_ids: list[int] | None,
        after: str | None,
    ) -> Page:
        version = self.queries.runs_version()
        columns = self.columns(version)
        selects = (version, filter_text.strip(), search.strip(), show_hidden,
                   None if run_ids is None else tuple(run_ids))  # fmt: skip
        key = column_resolver(columns)(sort) if sort else "run_id"
        try:
            if search.strip():
                raise NotInSql("a search")
            if key in FIELD_SORTS:
                return self._field_page(selects, columns, key, descending, offset, limit)
            start = offset if after is None else parse_cursor(after)
            return self._sql_page(
                selects, columns, _sort_of(key, descending, self.value_names(version)), start, limit
            )
        except NotInSql:
            pass
        rows = self._memory_view(selects, columns, key, descending)
        page_rows = [_public(row) for row in rows[offset : offset + limit]]
        return Page(total=len(rows), rows=page_rows, columns=columns, version=self._version or version)

    def count(
        self,
        *,
        filter_text: str = "",
        search: str = "",
        show_hidden: bool = False,
        run_ids: list[int] | None = None,
        experiment: str | None = None,
    ) -> int:
        """The exact number of runs a view holds (a page may only say "at least"): every run it
        selects is visited once, and the number kept for this version of the table."""
        filter_text = scoped(filter_text, experiment)
        version = self.queries.runs_version()
        columns = self.columns(version)
        selects = (version, filter_text.strip(), search.strip(), show_hidden,
                   None if run_ids is None else tuple(run_ids))  # fmt: skip
        with self._lock:
            known = self._totals.get(selects)
        if known is not None and known[1]:
            return known[0]
        try:
            if search.strip():
                raise NotInSql("a search")
            condition, show_hidden = self._condition(selects, columns, per_run=False)
            total = int(self.queries.read(*runs_walk.count_sql(condition, show_hidden, None))[0][0])
        except NotInSql:
            total = len(self._memory_view(selects, columns, "run_id", False))
        with self._lock:
            _keep(self._totals, selects, (total, True))
        return total

    def _condition(self, selects: tuple, columns: list[Column], per_run: bool) -> tuple[Condition, bool]:
        """The view's condition in SQL (NotInSql: SQL cannot say it exactly), and whether hidden
        runs are in it."""
        version, filter_text, _, show_hidden, run_ids = selects
        condition: Condition = TRUE
        if filter_text:
            names = self.value_names(version)
            translator = Translator(set(names.hparams), set(names.results), self.dialect, per_run=per_run)
            condition = translator.condition(parse_tree(filter_text, column_resolver(columns)))
        if run_ids is not None:  # those runs, hidden or not
            condition, show_hidden = runs_sql.of_runs(list(run_ids), condition), True
        return condition, show_hidden

    def _sql_page(
        self, selects: tuple, columns: list[Column], order: Sort, start: int | Position, limit: int
    ) -> Page:
        """A page of a view answered in SQL; raises NotInSql when SQL cannot say it exactly."""
        per_run, show_hidden = self._condition(selects, columns, per_run=True)
        as_set, _ = self._condition(selects, columns, per_run=False)
        with self._lock:
            known = self._totals.get(selects)
        if known is None:
            sql, params = runs_walk.count_sql(per_run, show_hidden, runs_walk.COUNT_CAP)
            total = int(self.queries.read(sql, params)[0][0])
            known = (min(total, runs_walk.COUNT_CAP), total <= runs_walk.COUNT_CAP)
            with self._lock:
                _keep(self._totals, selects, known)
        total, exact = known
        ids, last = self._walk((per_run, as_set), show_hidden, order, start, limit)
        runs = {run["run_id"]: run for run in self.queries.runs_of(ids)}
        rows = [_public(_flatten(runs[run_id])) for run_id in ids if run_id in runs]
        after = cursor_text(last) if last is not None and len(ids) == limit else None
        return Page(
            total=total, rows=rows, columns=columns, version=selects[0], total_exact=exact, next=after
        )

    def _field_page(
        self, selects: tuple, columns: list[Column], key: str, descending: bool, offset: int, limit: int
    ) -> Page:
        """A page of a view sorted by a run field (`status`, `start_time`, ...), whose filter SQL can
        say: the view's run ids from the filter's index ranges, that one field of every run, ordered
        in Python by the very rule of the in-memory table (mixed types, case, empty cells last), and
        only the page's runs read in full. At 100,000 runs that is two narrow reads instead of every
        run's values; the order is kept with the view, so its later pages cost their own rows.
        Raises NotInSql when SQL cannot say the filter."""
        condition, show_hidden = self._condition(selects, columns, per_run=False)
        view = (*selects, key, descending)
        with self._lock:
            order = self._orders.get(view)
        if order is None:
            wanted = {row[0] for row in self.queries.read(*runs_walk.matching_sql(condition, show_hidden))}
            cells = [
                {"run_id": run_id, key: bool(value) if key == "hidden" else value}
                for run_id, value in self.queries.run_field(key)
                if run_id in wanted
            ]
            order = [row["run_id"] for row in _sorted(cells, key, descending)]
            with self._lock:
                _keep(self._orders, view, order)
        ids = order[offset : offset + limit]
        runs = {run["run_id"]: run for run in self.queries.runs_of(ids)}
        rows = [_public(_flatten(runs[run_id])) for run_id in ids if run_id in runs]
        return Page(total=len(order), rows=rows, columns=columns, version=selects[0])

    def _walk(
        self,
        conditions: tuple[Condition, Condition],
        show_hidden: bool,
        order: Sort,
        start: int | Position,
        limit: int,
    ) -> tuple[list[int], Position | None]:
        """Run ids of one page and the position of its last run. From a position, the view's order
        is walked testing each run by its key (`conditions[0]`, per run) for up to `WALK_BUDGET`
        rows; a page not full by then reads on with the view's runs as a set (`conditions[1]`),
        which costs the runs the filter selects instead of the rows walked: whichever is less,
        roughly. A page by offset uses the set throughout (OFFSET counts the runs that pass)."""
        per_run, as_set = conditions
        after = start if isinstance(start, Position) else None
        skip = start if isinstance(start, int) else 0
        budget = WALK_BUDGET if skip == 0 else 0
        parts = runs_walk.segments(
            per_run if budget else as_set, show_hidden, order, self.dialect, after, budget > 0
        )
        ids: list[int] = []
        last: Position | None = None
        while parts and len(ids) < limit:
            part = parts.pop(0)
            if budget:
                sql, params = part.bounded(budget)
                rows = self.queries.read(sql, [*params, limit - len(ids)])
                ids += [row[0] for row in rows]
                if rows:
                    last = Position(*rows[-1]) if part.valued else Position(rows[-1][0])
                if len(ids) < limit:  # the budget ran out in this part, or the part did
                    end = self.queries.read(*part.row_at(budget - 1))
                    if end:  # read on after the last row walked, as a set
                        walked = Position(*end[0]) if part.valued else Position(end[0][0])
                        parts = runs_walk.segments(
                            as_set, show_hidden, order, self.dialect, walked, per_run=False
                        )
                        budget = 0
                continue
            sql, params = part.page()
            rows = self.queries.read(sql, [*params, limit - len(ids), skip])
            if not rows and skip:  # the whole part lies before the page
                sql, params = part.count()
                skip -= min(skip, int(self.queries.read(sql, params)[0][0]))
                continue
            skip = 0
            ids += [row[0] for row in rows]
            if rows:
                last = Position(*rows[-1]) if part.valued else Position(rows[-1][0])
        return ids, last

    def _memory_view(
        self, selects: tuple, columns: list[Column], key: str, descending: bool
    ) -> list[dict[str, Any]]:
        """The rows of a view from the runs held in memory (kept per version of the table)."""
        _, filter_text, search, show_hidden, run_ids = selects
        self.refresh()
        view = (*selects, key, descending, tuple(columns))
        with self._lock:
            rows = self._views.get(view)
        if rows is None:
            wanted = None if run_ids is None else list(run_ids)
            rows = self._select(columns, key, descending, filter_text, search, show_hidden, wanted)
            with self._lock:
                _keep(self._views, view, rows)
        return rows

    def _select(
        self,
        columns: list[Column],
        key: str,
        descending: bool,
        filter_text: str,
        search: str,
        show_hidden: bool,
        run_ids: list[int] | None,
    ) -> list[dict[str, Any]]:
        """The rows of one view, filtered and in order (every row is visited: linear in runs)."""
        with self._lock:
            rows = list(self._rows.values())
        if run_ids is not None:
            wanted = set(run_ids)
            rows = [row for row in rows if row["run_id"] in wanted]
        elif not show_hidden:
            rows = [row for row in rows if not row["hidden"]]
        if filter_text.strip():
            matches = run_filter(filter_text, columns)
            rows = [row for row in rows if matches(row)]
        if search.strip():
            needle = search.strip().lower()
            names = [c.name for c in columns if c.position is not None]
            rows = [row for row in rows if any(needle in _text(run_cell(row, n)) for n in names)]
        return _sorted(rows, key, descending)


def scoped(filter_text: str, experiment: str | None) -> str:
    """The filter of a view scoped to one experiment (None: every experiment)."""
    if experiment is None:
        return filter_text
    literal = '"' + experiment.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"experiment == {literal}" + (f" and ({filter_text})" if filter_text.strip() else "")


def _sort_of(key: str, descending: bool, names: ValueNames) -> Sort:
    """Where the order of a view sorted by column `key` comes from (NotInSql: not from SQL)."""
    if key == "run_id":
        return Sort(descending=descending)
    table, name = qualified(key)
    if table is not None:
        return Sort(table, name, descending)
    if key in TABLE_RUN_FIELDS or (key in names.hparams and key in names.results):
        raise NotInSql(f"sorting by {key!r}")
    table = "hparams" if key in names.hparams else "results" if key in names.results else None
    return Sort(table, key, descending)


def cursor_text(position: Position) -> str:
    """A page's `next`: the position of its last run, as URL-safe text (JSON writes infinities)."""
    data = json.dumps([position.run_id, position.rank, position.number, position.text])
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def parse_cursor(text: str) -> Position:
    """The position a cursor names; BadCursor unless it is one `cursor_text` could have written."""
    try:
        if len(text) > MAX_CURSOR:
            raise ValueError("too long")
        run_id, rank, number, text_value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError, binascii.Error):
        raise BadCursor("not a cursor of this table's pages") from None
    is_number = isinstance(number, (int, float)) and not isinstance(number, bool) and not math.isnan(number)
    shapes = {
        None: number is None and text_value is None,
        NUMBER: is_number and text_value is None,
        BOOL: number in (0, 1) and is_number and text_value is None,
        TEXT: number is None and isinstance(text_value, str),
    }
    if type(run_id) is not int or type(rank) not in (int, type(None)) or not shapes.get(rank, False):
        raise BadCursor("not a cursor of this table's pages")
    return Position(run_id, rank, None if number is None else float(number), text_value)


def _keep(kept: dict[tuple, Any], view: tuple, value: Any) -> None:
    """Remember a view's answer, forgetting those of older versions of the table and the oldest."""
    if any(other[0] != view[0] for other in kept):
        kept.clear()  # made for an older table
    while len(kept) >= VIEWS_KEPT:
        del kept[next(iter(kept))]
    kept[view] = value


def value_columns(found: Iterable[tuple[str, str, int]]) -> list[tuple[str, str]]:
    """(name, kind) of hparam and result columns from (name, kind, run id) sightings: hparams
    first, each kind in the order of the first run that has it, then by name. A name that is an
    hparam anywhere is an hparam column. One order, whether from the rows or from the store."""
    first: dict[str, tuple[bool, int]] = {}
    for name, kind, run_id in found:
        seen = (kind != "hparam", run_id)
        if name not in first or seen < first[name]:
            first[name] = seen
    ordered = sorted(first.items(), key=lambda item: (item[1], item[0]))
    return [(name, "result" if is_result else "hparam") for name, (is_result, _) in ordered]


def _flatten(run: dict[str, Any]) -> dict[str, Any]:
    row = {field: run.get(field) for field in TABLE_RUN_FIELDS}
    row["hidden"] = bool(row["hidden"])
    row["hparams"] = run["hparams"]
    row["results"] = run["results"]
    return row


def _text(value: Any) -> str:
    return "" if value is None else str(value).lower()


def _sort_key(value: Any) -> tuple:
    if isinstance(value, bool):
        return (2, value)
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value).lower())


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or (isinstance(value, float) and math.isnan(value))


def _sorted(rows: list[dict[str, Any]], name: str, descending: bool) -> list[dict[str, Any]]:
    present = [(row, run_cell(row, name)) for row in rows]
    filled = [pair for pair in present if not _is_empty(pair[1])]
    empty = [row for row, value in present if _is_empty(value)]
    filled.sort(key=lambda pair: (_sort_key(pair[1]), pair[0]["run_id"]), reverse=descending)
    return [row for row, _ in filled] + sorted(empty, key=lambda row: row["run_id"])


def _public(row: dict[str, Any]) -> dict[str, Any]:
    """A row as JSON: run fields plus `cells` for hparams and results, by column key (an hparam
    named like a run column is `hparams.NAME`: run_fields.value_key)."""
    out = {k: v for k, v in row.items() if k not in ("hparams", "results")}
    out["cells"] = {
        value_key(table, name): value
        for table in ("results", "hparams")
        for name, value in row[table].items()
    }
    return out

"""The runs table as the dashboard serves it: columns, sorting, filtering and paging on the server.

Why on the server: 10,000 runs with their hparams and results are megabytes of JSON; a browser
asked to hold and re-sort that stutters. The server answers one page at a time.

A view (one filter, sort and page) is answered by SQL over the typed copies of hparams and results
(schema v10, store/runs_sql.py): the database filters from its indexes and reads one page,
so a fresh server's first screen and a new view cost about the same at 100,000 runs as at 1,000
(docs/performance.md). A view that SQL cannot answer exactly (a search, a `~` or `tags` filter,
a sort by a run field) is answered from every run held in memory (refreshed only for runs whose
`updated_at` moved), and kept in order until the table changes, so its later pages cost one page.

Sorting and filtering work on any column with mixed types and empty cells: values sort as
numbers, then strings, then booleans, and empty cells always come last in either direction.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tallyboard.run_filter import column_resolver, parse_tree, run_cell, run_filter
from tallyboard.store import runs_sql
from tallyboard.store.queries import DashboardQueries
from tallyboard.store.records import Column
from tallyboard.store.run_row import RUN_ROW
from tallyboard.store.runs_sql import TRUE, Condition, Dialect, NotInSql, Sort, Translator

VIEWS_KEPT = 8  # filtered and sorted views kept for the current version of the table
READ_AHEAD = 500  # run ids of a SQL view read at once: this page and the next few

# Run fields that can be table columns; git_diff is far too long for a cell (the run page shows it).
TABLE_RUN_FIELDS = (*(field.name for field in RUN_ROW if field.cell), "tags")


@dataclass(frozen=True)
class ValueNames:
    """The names of hparams and of results in the store, and the value columns (name, kind) that
    the store's column list lacks, in `value_columns` order."""

    hparams: frozenset[str]
    results: frozenset[str]
    unlisted: list[tuple[str, str]]


@dataclass
class Page:
    total: int
    rows: list[dict[str, Any]]
    columns: list[Column]
    version: tuple[int, float]


class RunsTable:
    """One page of a view, from SQL when it can say it exactly, else from rows held in memory
    (kept in step with the store by `updated_at`)."""

    def __init__(self, queries: DashboardQueries) -> None:
        self.queries = queries
        self.dialect = Dialect.of(queries.postgres)
        self._rows: dict[int, dict[str, Any]] = {}
        self._version: tuple[int, float] | None = None
        self._lock = threading.Lock()
        self._views: dict[tuple, list[dict[str, Any]]] = {}  # view -> its rows in order (one version)
        self._totals: dict[tuple, int] = {}  # SQL view -> its number of runs (one version)
        self._ahead: dict[tuple, tuple[int, list[int]]] = {}  # SQL view -> (offset, ids read ahead)
        self._names: tuple[tuple[int, float], ValueNames] | None = None  # for one version

    def refresh(self) -> tuple[int, float]:
        """Reload the rows held in memory that changed since the last call; returns the store's
        runs version."""
        version = self.queries.runs_version()
        with self._lock:
            if version == self._version:
                return version
            if self._version is None or version[0] < len(self._rows):
                self._rows = {run["run_id"]: _flatten(run) for run in self.queries.runs()}
            else:
                for run in self.queries.runs(updated_after=self._version[1]):
                    self._rows[run["run_id"]] = _flatten(run)
                if len(self._rows) != version[0]:  # runs were deleted as others were added
                    self._rows = {run["run_id"]: _flatten(run) for run in self.queries.runs()}
            self._version = version
        return version

    def value_names(self, version: tuple[int, float] | None = None) -> ValueNames:
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
        sightings = [  # a name is an hparam column if it is an hparam anywhere
            (name, kind, self.queries.read(runs_sql.FIRST_RUN.format(table=f"{kind}s"), [name])[0][0])
            for kind, names in (("hparam", hparams), ("result", results - hparams))
            for name in sorted(names - listed)
        ]
        names = ValueNames(hparams, results, value_columns(sightings))
        self._names = (version, names)
        return names

    def columns(self, version: tuple[int, float] | None = None) -> list[Column]:
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
    ) -> Page:
        """One page of rows after filtering and sorting. Raises FilterError on a bad filter."""
        version = self.queries.runs_version()
        columns = self.columns(version)
        view = (version, tuple(columns), sort, descending, filter_text.strip(), search.strip(), show_hidden,
                None if run_ids is None else tuple(run_ids))  # fmt: skip
        key = column_resolver(columns)(sort) if sort else "run_id"
        try:
            if search.strip():
                raise NotInSql("a search")
            return self._sql_page(view, columns, key, offset, limit)
        except NotInSql:
            pass
        version = self.refresh()
        with self._lock:
            rows = self._views.get(view)
        if rows is None:
            rows = self._select(columns, key, descending, filter_text, search, show_hidden, run_ids)
            with self._lock:
                _keep(self._views, view, rows)
        page_rows = [_public(row) for row in rows[offset : offset + limit]]
        return Page(total=len(rows), rows=page_rows, columns=columns, version=version)

    def _sql_page(self, view: tuple, columns: list[Column], key: str, offset: int, limit: int) -> Page:
        """A page of a view answered in SQL; raises NotInSql when SQL cannot say it exactly."""
        version, _, _, descending, filter_text, _, show_hidden, run_ids = view
        names = self.value_names(version)
        condition: Condition = TRUE
        if filter_text:
            translator = Translator(set(names.hparams), set(names.results), self.dialect)
            condition = translator.condition(parse_tree(filter_text, column_resolver(columns)))
        if run_ids is not None:  # those runs, hidden or not
            condition, show_hidden = runs_sql.of_runs(list(run_ids), condition), True
        order = _sort_of(key, descending, names)
        with self._lock:
            total = self._totals.get(view)
        if total is None:
            total = self.queries.read(*runs_sql.count_sql(condition, show_hidden))[0][0]
            with self._lock:
                _keep(self._totals, view, total)
        ids = self._window(view, condition, order, offset, limit)
        runs = {run["run_id"]: run for run in self.queries.runs_of(ids)}
        rows = [_public(_flatten(runs[run_id])) for run_id in ids if run_id in runs]
        return Page(total=int(total), rows=rows, columns=columns, version=version)

    def _window(self, view: tuple, condition: Condition, order: Sort, offset: int, limit: int) -> list[int]:
        """The run ids of a page, from the ids read ahead for the view when they cover it: the next
        pages of a view cost no statement of their own (reading ahead walks a little further in an
        index; what costs is finding the view's runs at all)."""
        with self._lock:
            start, ids = self._ahead.get(view, (0, []))
        if start <= offset and offset + limit <= start + len(ids):
            return ids[offset - start : offset - start + limit]
        show_hidden = view[6] or view[7] is not None
        ids = self._page_ids(condition, show_hidden, order, offset, max(limit, READ_AHEAD))
        with self._lock:
            _keep(self._ahead, view, (offset, ids))
        return ids[:limit]

    def _page_ids(
        self, condition: Condition, show_hidden: bool, order: Sort, offset: int, limit: int
    ) -> list[int]:
        """Run ids of one page: those with a value to sort by in order, then the empty ones by id."""
        if order.table is None:  # by run id, or by a column nobody has a value in (all empty)
            descending = order.descending and order.name is None
            sql, params = runs_sql.by_run_id_sql(condition, show_hidden, descending)
            return [row[0] for row in self.queries.read(sql, [*params, limit, offset])]
        sql, params = runs_sql.by_value_sql(condition, show_hidden, order, self.dialect)
        ids = [row[0] for row in self.queries.read(sql, [*params, limit, offset])]
        if len(ids) == limit:
            return ids
        if ids or offset == 0:
            filled = offset + len(ids)
        else:  # past the last value: where do the empty cells start?
            filled = self.queries.read(*runs_sql.filled_count_sql(condition, show_hidden, order))[0][0]
        sql, params = runs_sql.by_run_id_sql(condition, show_hidden, False, filled=order)
        rest = self.queries.read(sql, [*params, limit - len(ids), max(0, offset - filled)])
        return ids + [row[0] for row in rest]

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


def _sort_of(key: str, descending: bool, names: ValueNames) -> Sort:
    """Where the order of a view sorted by column `key` comes from (NotInSql: not from SQL)."""
    if key == "run_id":
        return Sort(descending=descending)
    if key in TABLE_RUN_FIELDS or (key in names.hparams and key in names.results):
        raise NotInSql(f"sorting by {key!r}")
    table = "hparams" if key in names.hparams else "results" if key in names.results else None
    return Sort(table, key, descending)


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
    """A row as JSON: run fields plus `cells` for hparams and results."""
    out = {k: v for k, v in row.items() if k not in ("hparams", "results")}
    out["cells"] = {**row["results"], **row["hparams"]}
    return out

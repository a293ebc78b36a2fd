"""The runs table as the dashboard serves it: columns, sorting, filtering and paging on the server.

Why on the server: 10,000 runs with their hparams and results are megabytes of JSON; a browser
asked to hold and re-sort that stutters. The server keeps the rows in memory (refreshed only
for runs whose `updated_at` moved) and answers one page at a time.

The first screen does not wait for that: until every row is loaded (in a background thread that
the first request starts), the default view (by run id, no filter or search) is read straight
from the primary key, one page at a time; 100,000 runs cost the same first screen as 100. Such a
page is `partial`: its hparam and result columns are those of its own rows (finding every name in
use means reading every run), and the page asks again once the table is loaded.

Once loaded, a view (one filter, search and sort) is kept in order until the table changes: paging
through it, and the polls of a page that shows it, cost one page, not a filter and sort of every
run (at 100,000 runs those take seconds; docs/performance.md).

Sorting and filtering work on any column with mixed types and empty cells: values sort as
numbers, then strings, then booleans, and empty cells always come last in either direction.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tallyboard.run_filter import column_resolver, run_cell, run_filter
from tallyboard.store.queries import DashboardQueries
from tallyboard.store.records import Column
from tallyboard.store.run_row import RUN_ROW

VIEWS_KEPT = 8  # filtered and sorted views kept for the current version of the table

# Run fields that can be table columns; git_diff is far too long for a cell (the run page shows it).
TABLE_RUN_FIELDS = (*(field.name for field in RUN_ROW if field.cell), "tags")


@dataclass
class Page:
    total: int
    rows: list[dict[str, Any]]
    columns: list[Column]
    version: tuple[int, float]
    partial: bool = False  # read before every row was loaded: columns are those of these rows only


class RunsTable:
    """In-memory rows of the runs table, kept in step with the store by `updated_at`."""

    def __init__(self, queries: DashboardQueries) -> None:
        self.queries = queries
        self._rows: dict[int, dict[str, Any]] = {}
        self._names: list[tuple[str, str]] = []  # hparam and result columns found in the rows
        self._version: tuple[int, float] | None = None
        self._lock = threading.Lock()
        self._loader: threading.Thread | None = None
        self._views: dict[tuple, list[dict[str, Any]]] = {}  # view -> its rows in order (one version)

    def refresh(self) -> tuple[int, float]:
        """Reload what changed since the last call; returns the store's runs version."""
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
            self._names = value_columns(_sightings(self._rows.values()))
            self._version = version
        return version

    def loaded(self) -> bool:
        return self._version is not None

    def wait_until_loaded(self, timeout: float) -> bool:
        """Wait for a background load, if one started; True once every row is loaded."""
        if self._loader is not None:
            self._loader.join(timeout)
        return self.loaded()

    def _load_in_background(self) -> None:
        """Start loading every row (once), so sorting and filtering are ready soon after."""
        with self._lock:
            if self._loader is None:
                self._loader = threading.Thread(target=self.refresh, name="runs-table-load", daemon=True)
                self._loader.start()

    def columns(self, names: list[tuple[str, str]] | None = None) -> list[Column]:
        """Every column: the store's preferences first, then hparams/results found in rows (or
        `names`, as `value_columns` orders them)."""
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
        if names is None:
            with self._lock:
                names = self._names
        extra = [(name, kind) for name, kind in names if name not in known]
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
        plain = (
            run_ids is None and not filter_text.strip() and not search.strip() and sort in (None, "run_id")
        )
        if plain and not self.loaded():
            return self._window(offset, limit, descending, show_hidden)
        version = self.refresh()
        columns = self.columns()
        view = (version, tuple(columns), sort, descending, filter_text.strip(), search.strip(), show_hidden,
                None if run_ids is None else tuple(run_ids))  # fmt: skip
        with self._lock:
            rows = self._views.get(view)
        if rows is None:
            rows = self._select(columns, sort, descending, filter_text, search, show_hidden, run_ids)
            with self._lock:
                if any(kept[0] != version for kept in self._views):
                    self._views.clear()  # made for an older table
                while len(self._views) >= VIEWS_KEPT:
                    del self._views[next(iter(self._views))]  # the oldest
                self._views[view] = rows
        page_rows = [_public(row) for row in rows[offset : offset + limit]]
        return Page(total=len(rows), rows=page_rows, columns=columns, version=version)

    def _select(
        self,
        columns: list[Column],
        sort: str | None,
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
        key = column_resolver(columns)(sort) if sort else "run_id"
        return _sorted(rows, key, descending)

    def _window(self, offset: int, limit: int, descending: bool, show_hidden: bool) -> Page:
        """A page of the default view read from the store while the rows are still loading."""
        version = self.queries.runs_version()
        total, runs = self.queries.runs_window(offset, limit, descending, show_hidden)
        rows = [_flatten(run) for run in runs]
        columns = self.columns(value_columns(_sightings(rows)))
        self._load_in_background()
        return Page(total, [_public(row) for row in rows], columns, version, partial=True)


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


def _sightings(rows: Iterable[dict[str, Any]]) -> Iterator[tuple[str, str, int]]:
    for row in rows:
        for kind, values in (("hparam", row["hparams"]), ("result", row["results"])):
            for name in values:
                yield name, kind, row["run_id"]


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

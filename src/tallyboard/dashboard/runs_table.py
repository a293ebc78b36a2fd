"""The runs table as the dashboard serves it: columns, sorting, filtering and paging on the server.

Why on the server: 10,000 runs with their hparams and results are megabytes of JSON; a browser
asked to hold and re-sort that stutters. The server keeps the rows in memory (refreshed only
for runs whose `updated_at` moved) and answers one page at a time.

A view (one filter, search and sort) is kept in order until the table changes: paging through it,
and the polls of a page that shows it, cost one page, not a filter and sort of every run (at
100,000 runs those take seconds; docs/performance.md).

Sorting and filtering work on any column with mixed types and empty cells: values sort as
numbers, then strings, then booleans, and empty cells always come last in either direction.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

from tallyboard.run_filter import column_resolver, run_cell, run_filter
from tallyboard.store.queries import DashboardQueries

VIEWS_KEPT = 8  # filtered and sorted views kept for the current version of the table

# Run fields that can be table columns; git_diff is far too long for a cell (the run page shows it).
TABLE_RUN_FIELDS = (
    "run_id", "experiment", "tag", "config_path", "comment", "config_hash", "note", "color", "status",
    "start_time", "end_time", "hidden",
)  # fmt: skip


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # 'run', 'hparam' or 'result'
    alias: str
    position: int | None  # None = hidden

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "alias": self.alias, "position": self.position}


@dataclass
class Page:
    total: int
    rows: list[dict[str, Any]]
    columns: list[Column]
    version: tuple[int, float]


class RunsTable:
    """In-memory rows of the runs table, kept in step with the store by `updated_at`."""

    def __init__(self, queries: DashboardQueries) -> None:
        self.queries = queries
        self._rows: dict[int, dict[str, Any]] = {}
        self._version: tuple[int, float] | None = None
        self._lock = threading.Lock()
        self._views: dict[tuple, list[dict[str, Any]]] = {}  # view -> its rows in order (one version)
        self._names: tuple[tuple[int, float] | None, dict[str, str]] = (None, {})  # version, value names

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
            self._version = version
        return version

    def columns(self) -> list[Column]:
        """Every column: the store's preferences first, then hparams/results found in rows."""
        columns = [
            Column(c["name"], c["kind"], c["alias"] or c["name"], c["position"])
            for c in self.queries.columns()
            if c["kind"] != "run" or c["name"] in TABLE_RUN_FIELDS
        ]
        known = {c.name for c in columns}
        for field in TABLE_RUN_FIELDS:
            if field not in known:
                columns.append(Column(field, "run", field, None))
                known.add(field)
        extra = {name: kind for name, kind in self._value_names().items() if name not in known}
        last = max((c.position for c in columns if c.position is not None), default=-1)
        for offset, (name, kind) in enumerate(sorted(extra.items(), key=lambda item: item[1])):
            columns.append(Column(name, kind, name, last + 1 + offset))
        return sorted(columns, key=lambda c: (c.position is None, c.position or 0, c.name))

    def _value_names(self) -> dict[str, str]:
        """Every hparam/result name in the rows -> its kind (the first seen): a scan of every row,
        done once per version of the table."""
        with self._lock:
            version, names = self._names
            if version != self._version or version is None:
                names = {}
                for row in self._rows.values():
                    for kind, values in (("hparam", row["hparams"]), ("result", row["results"])):
                        for name in values:
                            names.setdefault(name, kind)
                self._names = (self._version, names)
            return names

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
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


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

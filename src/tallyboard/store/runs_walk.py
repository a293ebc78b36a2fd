"""The statements of one view of the runs table: how many runs it holds, and its runs in order
from a position (one page). The view's filter comes from `runs_sql.Translator`.

Why a page is a walk from a position (keyset paging) and its count is capped: at 100,000 runs,
what made a page cost more than at 1,000 was work in proportion to the runs a view selects
(counting them, collecting their ids before the walk of the sort column could test them) and, for
later pages, the rows an OFFSET skips. Here a page walks the sort column's index from where the
previous page ended, tests each run it meets by its key (a per-run condition) and stops when the
page is full; the count stops at `COUNT_CAP` runs ("at least"), and the exact count is a
statement of its own, which the dashboard asks for once the page is shown. What still grows is
the runs a walk meets that the filter rejects before the page is full: an index of one column
cannot skip the runs another column's test rejects (docs/performance.md).

A view's order: runs with a value in the sort column by (rank, number, text, run id), all reversed
when descending (the index `(name, rank, number, text, run_id)` read forwards or backwards), then
the runs whose cell is empty by run id. A `Position` is the last run of a page in that order; the
walk after it is up to four index ranges (`Segment`s) read in turn: the rest of its tie (same
value, later run ids), the rest of its rank (later values), the later ranks, the empty cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tallyboard.store.indexed_values import EMPTY_TEXT, TEXT
from tallyboard.store.runs_sql import TRUE, Condition, Dialect

COUNT_CAP = 1000  # a page counts its view's runs up to this many; more is "at least" that

HIDDEN_SET = "{run} NOT IN (SELECT run_id FROM runs WHERE hidden <> 0)"  # the partial index runs_hidden
HIDDEN_PER_RUN = "(SELECT h.hidden FROM runs h WHERE h.run_id = {run}) = 0"
FILLED = f"value_rank < {EMPTY_TEXT}"  # a cell with a value to sort by (others sort last)


@dataclass(frozen=True)
class Sort:
    """Where a view's order comes from: the run id, or one hparam or result table's values
    (`table` None with a `name`: nobody has a value, every cell is empty)."""

    table: str | None = None
    name: str | None = None
    descending: bool = False


@dataclass(frozen=True)
class Position:
    """A run's place in a view's order: its sort cell's (rank, number, text), or `rank` None for a
    run in the part ordered by run id (the empty cells, or every run when sorted by run id)."""

    run_id: int
    rank: int | None = None
    number: float | None = None
    text: str | None = None


@dataclass(frozen=True)
class Segment:
    """Part of a view's order that one index range gives: `walk` selects (run_id, rank, number,
    text) of the range's rows (run_id alone when not `valued`) from the row alias `alias`, in
    `order`; `test` is the view's condition on a row (at `{run}`)."""

    walk: str
    walk_params: list[Any]
    test: str
    test_params: list[Any]
    order: str
    alias: str
    valued: bool = True

    def page(self) -> tuple[str, list[Any]]:
        """The rows that pass, `LIMIT ? OFFSET ?` to bind after the params."""
        test = self.test.replace("{run}", f"{self.alias}.run_id")
        return f"{self.walk} AND {test} ORDER BY {self.order} LIMIT ? OFFSET ?", [
            *self.walk_params,
            *self.test_params,
        ]

    def bounded(self, rows: int) -> tuple[str, list[Any]]:
        """The rows that pass among the range's first `rows`, `LIMIT ?` to bind after the params.
        In the window's order without an ORDER BY of its own: both engines keep a subquery's order
        through a filter, and an outer sort would test every row of the window before the first
        is sent (the walk stops at the LIMIT only without it)."""
        test = self.test.replace("{run}", "w.run_id")
        window = f"{self.walk} ORDER BY {self.order} LIMIT {int(rows)}"
        return f"SELECT w.* FROM ({window}) w WHERE {test} LIMIT ?", [
            *self.walk_params,
            *self.test_params,
        ]

    def row_at(self, offset: int) -> tuple[str, list[Any]]:
        """The range's row at `offset` (none when the range is shorter): where a bounded walk ended."""
        return f"{self.walk} ORDER BY {self.order} LIMIT 1 OFFSET {int(offset)}", list(self.walk_params)

    def count(self) -> tuple[str, list[Any]]:
        test = self.test.replace("{run}", f"{self.alias}.run_id")
        return f"SELECT COUNT(*) FROM ({self.walk} AND {test}) c", [*self.walk_params, *self.test_params]


def visible(condition: Condition, show_hidden: bool, run: str, per_run: bool) -> tuple[str, list[Any]]:
    """The view's condition at run `run`, hidden runs left out unless shown: by the run's own row
    (`per_run`, a walk) or as the set of hidden ids (a count of every run)."""
    hidden = HIDDEN_PER_RUN if per_run else HIDDEN_SET
    if run == "x.run_id":  # counting over `runs x` itself: its row is at hand
        hidden = "x.hidden = 0"
    extra = "" if show_hidden else f" AND {hidden.replace('{run}', run)}"
    return f"({condition.at(run)}){extra}", list(condition.params)


def count_sql(condition: Condition, show_hidden: bool, cap: int | None) -> tuple[str, list[Any]]:
    """How many runs the view holds, up to `cap` + 1 when given (more than `cap`: "at least").
    From the driver's index range when the condition has one (a range of `(name, rank, number)`),
    else over every run. A capped count takes a per-run condition (it visits `cap` runs), an exact
    one a set condition (it visits them all)."""
    per_run = cap is not None
    limit = "" if cap is None else f" LIMIT {int(cap) + 1}"
    if condition.driver is not None and condition.rest is not None:
        table, name, test, params = condition.driver
        sql, rest = visible(condition.rest, show_hidden, "d.run_id", per_run)
        test = test.replace("v.", "d.")
        within = f"SELECT 1 FROM {table} d WHERE d.name = ? AND ({test}) AND {sql}{limit}"
        return f"SELECT COUNT(*) FROM ({within}) c", [name, *params, *rest]
    if condition is TRUE and cap is None:
        visible_runs = "" if show_hidden else " - (SELECT COUNT(*) FROM runs WHERE hidden <> 0)"
        return f"SELECT (SELECT COUNT(*) FROM runs){visible_runs}", []
    sql, params = visible(condition, show_hidden, "x.run_id", per_run)
    return f"SELECT COUNT(*) FROM (SELECT 1 FROM runs x WHERE {sql}{limit}) c", params


def segments(
    condition: Condition,
    show_hidden: bool,
    sort: Sort,
    dialect: Dialect,
    after: Position | None = None,
    per_run: bool = True,
) -> list[Segment]:
    """The view's order after `after` (from its start when None), as index ranges to read in turn
    until a page is full. `condition` is per run or a set (runs_sql.Translator), as `per_run` says."""
    if sort.table is None:  # by run id, or by a column nobody has a value in (all empty: by run id)
        descending = sort.descending and sort.name is None
        return [_by_run_id(condition, show_hidden, descending, None, after, per_run)]
    tail = after if after is not None and after.rank is None else None
    empty = _by_run_id(condition, show_hidden, False, sort, tail, per_run)
    if tail is not None:
        return [empty]
    test, params = visible(condition, show_hidden, "{run}", per_run)
    select = (
        f"SELECT s.run_id, s.value_rank, s.value_number, s.value_text FROM {sort.table} s WHERE s.name = ?"
    )
    d = " DESC" if sort.descending else ""
    order = f"s.value_rank{d}, s.value_number{d}, s.value_text{dialect.by_code_point}{d}, s.run_id{d}"

    def part(bounds: str, bound_params: list[Any], part_order: str = order) -> Segment:
        return Segment(f"{select} AND {bounds}", [sort.name, *bound_params], test, params, part_order, "s")

    if after is None:
        return [part(f"s.{FILLED}", []), empty]
    beyond = "<" if sort.descending else ">"
    key, other = (
        ("s.value_text", "s.value_number") if after.rank == TEXT else ("s.value_number", "s.value_text")
    )
    value = after.text if after.rank == TEXT else after.number
    later_ranks = "s.value_rank < ?" if sort.descending else f"s.value_rank > ? AND s.{FILLED}"
    return [
        part(f"s.value_rank = ? AND {key} = ? AND {other} IS NULL AND s.run_id {beyond} ?",
             [after.rank, value, after.run_id], f"s.run_id{d}"),
        part(f"s.value_rank = ? AND {key} {beyond} ?", [after.rank, value]),
        part(later_ranks, [after.rank]),
        empty,
    ]  # fmt: skip


def _by_run_id(
    condition: Condition,
    show_hidden: bool,
    descending: bool,
    empty_of: Sort | None,
    after: Position | None,
    per_run: bool,
) -> Segment:
    """The view's runs by run id; with `empty_of`, only those whose cell in that sort column is
    empty (they follow the others, by run id)."""
    test, params = visible(condition, True, "{run}", per_run)
    walk = f"SELECT x.run_id FROM runs x WHERE {'1 = 1' if show_hidden else 'x.hidden = 0'}"
    walk_params: list[Any] = []
    if empty_of is not None and empty_of.table is not None:
        filled = f"SELECT 1 FROM {empty_of.table} v WHERE v.run_id = x.run_id AND v.name = ? AND v.{FILLED}"
        walk += f" AND ({filled}) IS NULL"
        walk_params.append(empty_of.name)
    if after is not None:
        walk += f" AND x.run_id {'<' if descending else '>'} ?"
        walk_params.append(after.run_id)
    return Segment(
        walk, walk_params, test, params, f"x.run_id{' DESC' if descending else ''}", "x", valued=False
    )


def matching_sql(condition: Condition, show_hidden: bool) -> tuple[str, list[Any]]:
    """The ids of every run of the view, by run id (`tallyboard runs --filter`): a set condition."""
    sql, params = visible(condition, show_hidden, "x.run_id", per_run=False)
    return f"SELECT x.run_id FROM runs x WHERE {sql} ORDER BY x.run_id", params

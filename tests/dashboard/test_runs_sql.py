"""A view answered in SQL (store/runs_sql.py) is the view the in-memory table gives: the same
runs, in the same order, with the same total, on SQLite and PostgreSQL, over cells of every type."""

from __future__ import annotations

import itertools
import math

import pytest

import tallyboard as tb
from tallyboard.dashboard import runs_table as runs_table_module
from tallyboard.dashboard.runs_table import BadCursor, RunsTable, _public, cursor_text
from tallyboard.errors import FilterError
from tallyboard.filter import column_resolver, parse_tree, run_filter
from tallyboard.store import open_queries, runs_walk
from tallyboard.store.runs_sql import NotInSql, Translator
from tallyboard.store.runs_walk import Position

NAN, INF = float("nan"), float("inf")
# One run per row: hparams, results, then what else to set. 'both' is an hparam of some runs and
# a result of others (the hparam wins where a run has both); 'lr' has ties and every type.
RUNS = [
    ({"lr": 0.1, "opt": "adam", "mixed": 3, "both": 1}, {"acc": 0.9, "both": 5}, {}),
    ({"lr": 0.01, "opt": "Adam", "mixed": "b", "flag": True}, {"acc": 0.7}, {"status": "failed"}),
    ({"lr": 0.1, "opt": "SGD", "mixed": True, "flag": False}, {"acc": NAN}, {"note": "Ébauche"}),
    ({"lr": 1, "opt": "", "mixed": NAN, "big": 10**20}, {"acc": INF}, {"hidden": True}),
    ({"lr": "high", "opt": "éclair", "mixed": None, "both": 2}, {"acc": -INF}, {"tag": "base"}),
    ({"lr": True, "mixed": "", "flag": None}, {"acc": 0}, {"note": "zeta"}),
    ({"lr": None, "opt": "adam", "mixed": -2.5}, {"both": 7, "acc": 0.9}, {"status": "failed"}),
    ({"opt": "lamb", "mixed": "A"}, {}, {}),
    ({"lr": -0.5, "mixed": 0, "both": "x"}, {"acc": "n/a"}, {"hidden": True, "note": "base line"}),
    ({"lr": 0.0, "opt": "Lamb", "mixed": 1e-5}, {"acc": 0.7, "both": 3}, {}),
]
SQL_FILTERS = [
    "", "lr < 0.2", "not mixed", "opt == null", "lr <= 0.1", "lr > 0", "lr >= 1", "0.05 < lr", "-1 < lr",
    "lr == 0.1", "lr = 1",
    "lr != 0.1", "lr == null", "lr != null", "lr == true", "lr == 1", "lr < true", "lr > null",
    "opt == 'adam'", "opt != 'ADAM'", "opt < 'b'", "opt >= 'lamb'", "opt == ''", "opt == null",
    "mixed", "not mixed", "mixed and flag", "mixed or flag", "not (mixed and lr > 0)",
    "mixed == 3", "mixed == 'a'", "mixed < 'b'", "mixed > -3", "mixed in [3, 'b', true]",
    "mixed in ['', 0]", "flag == false", "flag != true", "not flag", "big > 1e19", "both > 2",
    "both == 'x'", "both == null", "both != 5", "acc > 0.5", "acc < 0", "acc == null",
    "acc != null and lr < 1", "(lr < 0.2 or acc > 0.8) and not opt == 'sgd'",
    "status == 'FAILED'", "status != 'failed'", "note == null", "note > 'a'", "note == 'ébauche'",
    "tag == 'base'", "tag", "not hidden", "hidden", "hidden == 1", "run_id > 3", "run_id in [2, 4]",
    "start_time > 0", "end_time == null", "1 < 2", "'a' > 'b'", "true", "experiment == 'exp'",
]  # fmt: skip
MEMORY_FILTERS = ["opt ~ 'ad'", "lr < acc", "-lr > 0", "mixed in [null, 3]", "'x' in tags", "tags == null"]
PAGES = [(0, 100), (1, 3), (4, 3), (8, 5)]  # offset, limit
FIELD_SORTS = ["status", "note", "tag", "hidden", "start_time", "experiment"]  # run fields: pages by offset
SORTS = [None, "run_id", "Learning Rate", "opt", "mixed", "flag", "acc", "big", "both", *FIELD_SORTS]


@pytest.fixture
def runs_table(db_url: str):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    hidden = []
    for i, (hparams, results, other) in enumerate(RUNS):
        run = table.new_run("exp", cli={"i": i}, auto_log_plt=False)
        run.add_hparams(**hparams)
        if results:
            run.write_result(**results)
        if "note" in other:
            run.set_note(other["note"])
        if "tag" in other:
            run.set_tag(other["tag"])
        run.close(other.get("status", "finished"))
        if other.get("hidden"):
            hidden.append(run.run_id)
    for run_id in hidden:
        table.hide_run(run_id)
    table.set_column_alias({"lr": "Learning Rate"})
    table.close()
    queries = open_queries(db_url)
    yield RunsTable(queries)
    queries.close()


def in_memory(runs: RunsTable, sort, descending, filter_text, show_hidden, offset, limit):
    """The page the in-memory table gives (every run loaded, filtered and sorted in Python)."""
    runs.refresh()
    columns = runs.columns()
    key = column_resolver(columns)(sort) if sort else "run_id"
    rows = runs._select(columns, key, descending, filter_text, "", show_hidden, None)
    return len(rows), [_public(row) for row in rows[offset : offset + limit]]


def answered_in_sql(runs: RunsTable, filter_text: str) -> bool:
    names = runs.value_names()
    translator = Translator(set(names.hparams), set(names.results), runs.dialect)
    try:
        translator.condition(parse_tree(filter_text, column_resolver(runs.columns())))
    except NotInSql:
        return False
    return True


def same(a, b) -> bool:
    """Equal, NaN included (a NaN cell equals itself)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_every_translated_filter_and_sort_gives_the_in_memory_page(runs_table: RunsTable) -> None:
    for filter_text in SQL_FILTERS:
        assert answered_in_sql(runs_table, filter_text), filter_text
    views = [  # every filter under a few sorts, every sort under a few filters, pages of each
        *itertools.product(
            SQL_FILTERS, (None, "Learning Rate", "mixed"), (False, True), (False,), [(0, 100)]
        ),
        *itertools.product(SQL_FILTERS[:4], SORTS, (False, True), (False, True), PAGES),
    ]
    for filter_text, sort, descending, show_hidden, (offset, limit) in views:
        view = (sort, descending, filter_text, show_hidden, offset, limit)
        page = runs_table.page(
            sort=sort, descending=descending, filter_text=filter_text, show_hidden=show_hidden,
            offset=offset, limit=limit,
        )  # fmt: skip
        total, rows = in_memory(runs_table, *view)
        assert page.total == total, view
        assert [r["run_id"] for r in page.rows] == [r["run_id"] for r in rows], view
        assert same(page.rows, rows), view


def test_a_list_of_runs_hidden_ones_too_is_answered_in_sql(runs_table: RunsTable) -> None:
    for run_ids, filter_text, sort in (
        ([1, 4, 9, 7], "", "acc"),
        ([4, 9, 2], "lr > 0", None),
        ([], "", None),
    ):
        page = runs_table.page(run_ids=run_ids, filter_text=filter_text, sort=sort)
        runs_table.refresh()
        columns = runs_table.columns()
        rows = runs_table._select(columns, sort or "run_id", False, filter_text, "", False, run_ids)
        assert (page.total, same(page.rows, [_public(row) for row in rows])) == (len(rows), True), run_ids


def test_what_sql_cannot_say_is_answered_from_memory(runs_table: RunsTable) -> None:
    for filter_text in MEMORY_FILTERS:
        assert not answered_in_sql(runs_table, filter_text), filter_text
        for sort in (None, "lr", "status"):
            page = runs_table.page(sort=sort, filter_text=filter_text)
            total, rows = in_memory(runs_table, sort, False, filter_text, False, 0, 100)
            assert (page.total, same(page.rows, rows)) == (total, True), (filter_text, sort)
    searched = runs_table.page(search="lamb")
    assert {row["cells"].get("opt") for row in searched.rows} == {"lamb", "Lamb"}


def test_a_view_sorted_by_a_run_field_reads_in_full_only_the_runs_of_its_page(
    runs_table: RunsTable, monkeypatch
) -> None:
    expected = [in_memory(runs_table, "status", True, "lr < 0.2", False, offset, 2) for offset in (0, 2)]
    fresh = RunsTable(runs_table.queries)  # holds no run yet
    read_in_full = []
    runs_of = fresh.queries.runs_of

    def loaded(*args, **kwargs):
        pytest.fail("every run was loaded")

    monkeypatch.setattr(fresh.queries, "runs", loaded)
    monkeypatch.setattr(fresh.queries, "runs_of", lambda ids: read_in_full.append(list(ids)) or runs_of(ids))
    for offset, (total, rows) in zip((0, 2), expected, strict=True):
        page = fresh.page(sort="status", descending=True, filter_text="lr < 0.2", offset=offset, limit=2)
        assert (page.total, same(page.rows, rows)) == (total, True)
    assert [len(ids) for ids in read_in_full] == [2, 2]


def test_a_bad_filter_or_sort_is_an_error_not_an_empty_page(runs_table: RunsTable) -> None:
    with pytest.raises(FilterError, match="unknown column"):
        runs_table.page(filter_text="nosuch > 1")
    with pytest.raises(FilterError, match="unknown column"):
        runs_table.page(sort="nosuch")


def test_pages_follow_new_runs(runs_table: RunsTable, db_url: str) -> None:
    view = {"sort": "acc", "descending": True, "filter_text": "acc > 0"}
    first = [row["run_id"] for row in runs_table.page(**view, limit=2).rows]
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={"i": "new"}, auto_log_plt=False) as run:
        run.write_result(acc=0.95)
    table.close()
    page = runs_table.page(**view, limit=2)
    assert [row["run_id"] for row in page.rows] == [run.run_id, first[0]]


@pytest.mark.parametrize("budget", [0, 1, 3, 2000])
def test_pages_by_cursor_give_the_whole_view_in_order(
    runs_table: RunsTable, monkeypatch, budget: int
) -> None:
    """Following `next` from the first page gives every run of the view once, in the in-memory
    order, whether a page walks testing each run (the budget) or reads the view's runs as a set
    (budget 0, or once the budget is spent); the count is capped at COUNT_CAP ("at least")."""
    monkeypatch.setattr(runs_table_module, "WALK_BUDGET", budget)
    monkeypatch.setattr(runs_walk, "COUNT_CAP", 3)
    filters = ["", "lr < 0.2", "not mixed", "mixed or flag", "acc != null and lr < 1", "status == 'FAILED'"]
    for filter_text, sort, descending, show_hidden, limit in itertools.product(
        filters,
        [s for s in SORTS if s != "both" and s not in FIELD_SORTS],
        (False, True),
        (False, True),
        (1, 3),
    ):  # sorting by 'both' (from memory) or by a run field pages by offset
        view = (sort, descending, filter_text, show_hidden)
        total, expected = in_memory(runs_table, *view, 0, 100)
        seen, after = [], None
        for _ in range(20):
            page = runs_table.page(sort=sort, descending=descending, filter_text=filter_text,
                                   show_hidden=show_hidden, limit=limit, after=after)  # fmt: skip
            capped = (3, False) if total > 3 else (total, True)  # exact once counted (by `count` below)
            assert (page.total, page.total_exact) in (capped, (total, True)), view
            seen += page.rows
            after = page.next
            if after is None:
                break
        assert [r["run_id"] for r in seen] == [r["run_id"] for r in expected], (view, limit)
        assert same(seen, expected), view
        assert runs_table.count(filter_text=filter_text, show_hidden=show_hidden) == total, view


def test_a_cursor_is_checked_and_a_new_run_shows_up_on_the_next_page(
    runs_table: RunsTable, db_url: str
) -> None:
    for bad in (
        "",
        "x",
        "W10",
        cursor_text(Position(1, 7)),
        cursor_text(Position(1, 0, None, "a")),
        "e30" * 9000,
    ):
        with pytest.raises(BadCursor):
            runs_table.page(sort="acc", after=bad or "=")
    first = runs_table.page(sort="acc", descending=True, limit=2)
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("exp", cli={"i": "new"}, auto_log_plt=False) as run:
        run.write_result(acc=0.8)  # after the first page's last run (0.9, 0.9), before the rest
    table.close()
    second = runs_table.page(sort="acc", descending=True, limit=2, after=first.next)
    assert second.rows[0]["run_id"] == run.run_id


def test_the_cli_filter_selects_in_sql_the_runs_the_in_memory_filter_does(
    runs_table: RunsTable, db_url
) -> None:
    """`tallyboard runs --filter` (`ResultTable.runs_table`, runs_view.load_runs) asks SQL for the
    ids where the translation is exact and filters in memory otherwise; either way the rows are
    those the filter selects."""
    with tb.ResultTable(db_url, read_only=True) as table:
        for show_hidden in (False, True):
            everything = table.runs_table(None, show_hidden)
            for filter_text in [*SQL_FILTERS, *MEMORY_FILTERS]:
                matches = run_filter(filter_text, runs_table.queries.columns())
                view = table.runs_table(filter_text, show_hidden)
                expected = [row for row in everything.rows if matches(row)]
                assert same(view.rows, expected) and view.columns == everything.columns, (
                    filter_text,
                    show_hidden,
                )

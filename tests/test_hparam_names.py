"""Any hparam name is accepted, and none collides with a run column: an hparam or result named
like one (`tag`, `status`, `note`, `command`, `hidden`) is the column `hparams.NAME` /
`results.NAME` in the runs table, the filter language, the query API and the dashboard, and
`hparams.NAME` names any hparam (the prefix rule). The adapters follow the same rule."""

from __future__ import annotations

import pytest

import tallyboard as tb
from tallyboard.dashboard.runs_table import RunsTable
from tallyboard.store import open_queries

CLASHING = {"hidden": 64, "tag": 3, "status": "ok", "note": "n", "command": "train.py", "lr": 0.1}


@pytest.fixture
def path(tmp_path):
    """Two runs: one whose hparams are named like run columns, one plain."""
    path = str(tmp_path / "results.db")
    with tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP) as table:
        clashing = table.new_run("names", tag="run-tag", auto_log_plt=False)
        clashing.add_hparams(**CLASHING)
        clashing.write_result(status=1.0, acc=0.9)
        plain = table.new_run("names", tag="other", auto_log_plt=False)
        plain.add_hparams(lr=0.001, tag=7)
        plain.write_result(acc=0.5)
    return path


def test_hparams_named_like_run_columns_are_accepted_and_leave_the_run_alone(path):
    with tb.ResultTable(path, read_only=True) as table:
        run = table.load_run(1)
        assert run.get_hparams() == CLASHING
        assert (run.tag, run.status) == ("run-tag", "finished")
        assert table.get_experiment_raw(1)["hidden"] == 0
        assert table.query(backend="records")[0].results == {"status": 1.0, "acc": 0.9}


def test_the_query_api_shows_them_as_hparams_dot_name(path):
    with tb.ResultTable(path, read_only=True) as table:
        frame = table.query()
        assert {"hparams.tag", "hparams.status", "hparams.hidden", "results.status", "lr"} <= set(
            frame.columns
        )
        first = frame.iloc[0]
        assert (first["tag"], first["hparams.tag"], first["status"], first["results.status"]) == (
            "run-tag", 3, "finished", 1.0,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("hparams.tag == 3", [1]),
        ("hparams.tag > 1", [1, 2]),
        ('tag == "other"', [2]),  # the bare name is the run column
        ("hparams.lr < 0.01", [2]),  # the prefix names any hparam
        ("results.acc > 0.6", [1]),
        ('hparams.status == "ok" and status == "finished"', [1]),
        ("hparams.hidden == 64", [1]),
        ("hparams.nothing == 1", []),
    ],
)
def test_the_filter_language_reaches_them_by_prefix(path, text, ids):
    with tb.ResultTable(path, read_only=True) as table:
        assert [run.run_id for run in table.query(filter=text, backend="records")] == ids
        assert [row["run_id"] for row in table.runs_table(filter=text).rows] == ids
    queries = open_queries(path)
    try:
        page = RunsTable(queries).page(filter_text=text)
        assert [row["run_id"] for row in page.rows] == ids
        searched = RunsTable(queries).page(filter_text=text, search="names")  # answered from memory
        assert [row["run_id"] for row in searched.rows] == ids
    finally:
        queries.close()


def test_the_dashboard_runs_table_has_a_column_of_each_and_sorts_by_it(path):
    queries = open_queries(path)
    try:
        runs = RunsTable(queries)
        page = runs.page(sort="hparams.tag", descending=True)
        kinds = {column.name: column.kind for column in page.columns}
        assert (kinds["hparams.tag"], kinds["tag"], kinds["results.status"]) == ("hparam", "run", "result")
        assert [row["run_id"] for row in page.rows] == [2, 1]
        first = next(row for row in page.rows if row["run_id"] == 1)
        assert (first["tag"], first["cells"]["hparams.tag"], first["cells"]["hparams.note"]) == (
            "run-tag",
            3,
            "n",
        )
        assert first["status"] == "finished" and first["cells"]["results.status"] == 1.0
    finally:
        queries.close()


def test_the_result_table_of_deepboard_lists_them_apart(path):
    with tb.ResultTable(path, read_only=True) as table:
        results = table.get_results()
        row = dict(zip(results.col_ids, results.data[0], strict=True))
        assert (row["tag"], row["hparams.tag"], row["results.status"]) == ("run-tag", 3, 1.0)

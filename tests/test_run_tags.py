"""Several tags per run: set at once, checked at the call, filterable everywhere the filter language
is (query API, `tallyboard runs --filter`, dashboard), and carried by copy, export and import."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import tallyboard as tb
from cli_runner import run_cli
from store.schema_versions import downgrade
from tallyboard.errors import FilterError
from tallyboard.exchange.export import export_table
from tallyboard.exchange.reimport import import_export
from tallyboard.store.copy import copy_table
from tallyboard.store.schema import SCHEMA_VERSION


def open_table(url: str) -> tb.ResultTable:
    return tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)


def tagged_table(url: str) -> tb.ResultTable:
    """Run 1: baseline + ablation-3; run 2: baseline; run 3: no tags (DeepBoard tag 'solo')."""
    table = open_table(url)
    for tags, deepboard_tag in ((("baseline", "ablation-3"), ""), (("baseline",), ""), ((), "solo")):
        run = table.new_run("exp", comment=str(tags), tag=deepboard_tag)
        run.add_tags(*tags)
        run.close()
    return table


def test_tags_are_written_at_once_and_read_back_sorted(db_url):
    with open_table(db_url) as table:
        run = table.new_run("exp")
        run.add_tags("zeta", "alpha", "zeta")
        with open_table(db_url) as other:  # another connection sees them while the run is still open
            assert other.load_run(run.run_id).get_tags() == ["alpha", "zeta"]
            run.remove_tags("zeta", "never-set")
            assert run.tags == ["alpha"] and other.load_run(run.run_id).tags == ["alpha"]
            assert run.tag is None  # empty (NULL since schema v4); DeepBoard's single tag is a separate thing
            run.close()


@pytest.mark.parametrize(
    ("bad", "error"),
    [("", ValueError), ("nul\x00", ValueError), (3, TypeError), ("x" * 5000, ValueError)],
)
def test_a_bad_tag_is_refused_and_none_of_the_call_is_stored(db_url, bad, error):
    with open_table(db_url) as table:
        run = table.new_run("exp")
        with pytest.raises(error, match="run tag"):
            run.add_tags("fine", bad)
        assert run.get_tags() == []
        run.close()


def test_query_api_filters_on_tags(db_url):
    with tagged_table(db_url) as table:

        def ids(text: str) -> list[int]:
            return [run.run_id for run in table.query(filter=text, backend="records")]

        assert ids('"baseline" in tags') == [1, 2]
        assert ids('"BASELINE" in tags and not "ablation-3" in tags') == [2]
        assert ids('tags ~ "abl"') == [1]
        assert ids('tags == "baseline"') == [1, 2]
        assert ids('tags != "ablation-3"') == [2, 3]
        assert ids("tags == null") == ids("not tags") == [3]
        # by alias, next to DeepBoard's tag (empty: NULL)
        assert ids('`Tags` ~ "line" and tag == null') == [1, 2]
        tags = table.query(columns=["tags"])["tags"].tolist()
        assert tags == [["ablation-3", "baseline"], ["baseline"], []]
        with pytest.raises(FilterError):
            ids('"baseline" in nosuchcolumn')


def test_cli_runs_filter_on_tags(db_url):
    tagged_table(db_url).close()
    out = run_cli("runs", db_url, "--json", "--filter", '"ablation-3" in tags')
    runs = json.loads(out.stdout)
    assert [run["run_id"] for run in runs] == [1] and runs[0]["tags"] == ["ablation-3", "baseline"]
    text = run_cli("runs", db_url, "--filter", '"baseline" in tags').stdout
    assert len(text.strip().splitlines()) == 3  # header and two runs


def test_copy_and_export_carry_the_tags(db_url, tmp_path):
    tagged_table(str(tmp_path / "src.db")).close()
    copy_table(str(tmp_path / "src.db"), db_url, progress=False)
    copy_table(str(tmp_path / "src.db"), db_url, progress=False)  # idempotent
    with open_table(db_url) as copied:
        assert [copied.load_run(i).tags for i in (1, 2, 3)] == [["ablation-3", "baseline"], ["baseline"], []]
        counts = export_table(db_url, tmp_path / "out")
        assert counts["run_tags"] == 3
        import_export(tmp_path / "out", str(tmp_path / "back.db"))
        with open_table(str(tmp_path / "back.db")) as back:
            tags = [back.load_run(i).tags for i in (1, 2, 3)]
            assert tags == [["ablation-3", "baseline"], ["baseline"], []]


def test_an_export_without_tags_file_still_imports(tmp_path):
    """Exports written before schema v6 have no run_tags file."""
    tagged_table(str(tmp_path / "src.db")).close()
    export_table(str(tmp_path / "src.db"), tmp_path / "out")
    (tmp_path / "out" / "run_tags.csv").unlink()
    import_export(tmp_path / "out", str(tmp_path / "back.db"))
    with open_table(str(tmp_path / "back.db")) as back:
        assert back.load_run(1).tags == []


def test_a_version_5_table_is_read_as_it_is_and_migrated_by_the_first_write(tmp_path):
    path = tmp_path / "old.db"
    tagged_table(str(path)).close()
    downgrade(str(path), 5)  # back to what a version-5 tallyboard wrote
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM columns WHERE name = 'tags'")
    with open_table(str(path)) as table:
        assert table.load_run(1).tags == []
        assert table._store.meta("schema_version") == "5"  # reading changed nothing
        table.load_run(1).add_tags("later")
        assert table._store.meta("schema_version") == str(SCHEMA_VERSION)
        assert [r.run_id for r in table.query('"later" in tags', backend="records")] == [1]
        assert table.result_columns["tags"] == (None, "Tags", False)  # hidden by default


def test_deleting_the_debug_run_deletes_its_tags(db_url):
    with open_table(db_url) as table:
        first = table.new_debug_run("dbg")
        first.add_tags("scratch")
        first.close()
        table.new_debug_run("dbg").close()  # replaces run -1 and everything under it
        assert table.load_run(-1).tags == []


def test_dashboard_rows_carry_tags_and_filter_on_them(tmp_path: Path):
    from starlette.testclient import TestClient

    from tallyboard.dashboard.app import create_app

    tagged_table(str(tmp_path / "results.db")).close()
    with TestClient(create_app(str(tmp_path / "results.db")), base_url="http://127.0.0.1") as client:
        page = client.get("/api/runs", params={"filter": '"baseline" in tags'}).json()
        assert [row["run_id"] for row in page["rows"]] == [1, 2]
        assert page["rows"][0]["tags"] == ["ablation-3", "baseline"]
        assert {c["name"]: c["kind"] for c in page["columns"]}["tags"] == "run"
        sorted_ids = [row["run_id"] for row in client.get("/api/runs?sort=tags").json()["rows"]]
        assert sorted_ids[-1] == 3  # a run without tags is an empty cell: last
        assert client.get("/api/runs/1").json()["tags"] == ["ablation-3", "baseline"]


def test_a_shown_tags_column_is_in_the_deepboard_results(db_url):
    with tagged_table(db_url) as table:
        # hidden by default: the DeepBoard layout is unchanged
        assert "tags" not in table.get_results().col_ids
        table.show_column("tags")
        results = table.get_results()
        column = results.col_ids.index("tags")
        assert [row[column] for row in results.data] == [["ablation-3", "baseline"], ["baseline"], None]

"""Running a configuration again: the key holds the code (commit and diff), and `on_duplicate`
says what a launch whose key is taken does: a "new" run marked as a rerun (the default, grouped
with the run it reruns), a "repeat" of that run, or DeepBoard's `DuplicateRunError` ("raise")."""

from __future__ import annotations

import subprocess

import pytest

import tallyboard as tb
from tallyboard.run.exit_paths import end_runs


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "results.db")


def table_at(path, **options):
    return tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP, **options)


def launch(table, **options):
    run = table.new_run("sweep", cli={"lr": 0.1}, auto_log_plt=False, **options)
    run.add_hparams(lr=0.1)
    return run


def rerun_of(table, run_id):
    return table._require(run_id).rerun_of


def test_by_default_a_launch_again_is_a_new_run_marked_as_a_rerun_of_the_first(path):
    with table_at(path) as table:
        ids = []
        for _ in range(3):
            run = launch(table)
            run.write_result(acc=0.5 + len(ids) / 10)
            ids.append(run.run_id)
        other = table.new_run("sweep", cli={"lr": 0.2}, auto_log_plt=False)
        other.close()
        assert ids == [1, 2, 3]
        assert [rerun_of(table, run_id) for run_id in (1, 2, 3, other.run_id)] == [None, 1, 1, None]
        assert table.query(filter="rerun_of == 1", backend="records")[0].run_id == 2


def test_the_statistics_group_a_rerun_with_the_run_it_runs_again(path):
    with table_at(path) as table:
        first = launch(table)
        first.write_result(acc=0.5)
        again = table.new_run("sweep", cli={"lr": 0.1}, auto_log_plt=False)  # logs no hparams itself
        again.write_result(acc=0.7)
        groups = table.compare("acc", by="lr", unit="run")
        assert list(groups["run_ids"]) == [[1, 2]]


def test_repeat_makes_the_launch_the_next_repetition_of_that_run(path):
    with table_at(path) as table:
        first = launch(table)
        first.add_scalar("loss", 1.0)
        first.write_result(acc=0.5)
        repeated = launch(table, on_duplicate="repeat")
        assert (repeated.run_id, repeated.run_rep) == (first.run_id, 1)
        assert table.load_run(first.run_id).status == "running"
        repeated.add_scalar("loss", 2.0)
        repeated.write_result(acc=0.6)
        run = table.load_run(first.run_id)
        assert (run.status, run.get_repetitions()) == ("finished", [0, 1])
        assert [(point.run_rep, point.value) for point in run.get_scalar("loss")] == [(0, 1.0), (1, 2.0)]
        assert len(table.runs) == 1


def test_raise_is_deepboards_rule_for_the_table_or_one_run(path):
    with table_at(path, on_duplicate="raise") as table:
        first = launch(table)
        first.close()
        with pytest.raises(tb.DuplicateRunError, match=f"run id {first.run_id}"):
            launch(table)
        assert rerun_of(table, launch(table, on_duplicate="new").run_id) == first.run_id
        end_runs("failed")
    with table_at(path) as table, pytest.raises(tb.DuplicateRunError):
        launch(table, on_duplicate="raise")


def test_a_failed_run_is_run_again_as_a_first_run(path):
    with table_at(path) as table:
        launch(table).close(status="failed")
        again = launch(table)
        assert rerun_of(table, again.run_id) is None
        again.close()


def test_an_unknown_choice_is_refused_at_the_call(path):
    with pytest.raises(ValueError, match="on_duplicate must be one of"):
        table_at(path, on_duplicate="ignore")
    with table_at(path) as table, pytest.raises(ValueError, match="on_duplicate must be one of"):
        launch(table, on_duplicate="again")


def git(repo, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True,
        capture_output=True,
    )  # fmt: skip


def test_the_code_is_part_of_the_key_an_edited_script_is_no_duplicate(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "train.py").write_text("lr = 0.1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    monkeypatch.chdir(repo)
    with table_at(str(tmp_path / "results.db"), on_duplicate="raise") as table:
        table.new_run("script", auto_log_plt=False).close()
        (repo / "train.py").write_text("lr = 0.01\n")  # the hard-coded lr edited: another diff
        table.new_run("script", auto_log_plt=False).close()
        git(repo, "commit", "-q", "-am", "lr")  # committed: another commit, no diff
        table.new_run("script", auto_log_plt=False).close()
        with pytest.raises(tb.DuplicateRunError):  # the same code again is a duplicate
            table.new_run("script", auto_log_plt=False)
        assert len(table.runs) == 3

"""ResultTable on a real SQLite file: run rows, uniqueness, the table view and its columns."""

import hashlib
import io
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tallyboard as tb
from tallyboard.run.exit_paths import end_runs
from tallyboard.store import DuplicateRunError, StoreError, open_store


@pytest.fixture
def table(db_url):
    """A table with DeepBoard's rule for a duplicate (on_duplicate="raise"), which these tests hold."""
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP, on_duplicate="raise") as table:
        yield table
        end_runs("failed")  # a run a test left open must not outlive its database


def start(table, name="exp", **kwargs):
    return table.new_run(name, auto_log_plt=False, **kwargs)


def test_a_run_row_records_config_cli_command_and_comment(table, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("lr: 0.1\n")
    writer = start(table, configfile=config, cli={"lr": 0.1, "path": tmp_path}, comment="first")
    row = table.get_experiment_raw(writer.run_id)
    assert row["config_path"] == str(config) and row["config_content"] == "lr: 0.1\n"
    assert row["config_hash"] == tb.ResultTable.get_file_hash(config)
    assert json.loads(row["cli"]) == {"lr": 0.1, "path": str(tmp_path)}
    assert "pytest" in row["command"] or "python" in row["command"]
    assert (row["comment"], row["status"], row["hidden"]) == ("first", "running", 0)
    assert table.get_config(writer.run_id) == "lr: 0.1\n"
    writer.close()
    assert table.get_experiment_raw(writer.run_id)["status"] == "finished"


def test_config_may_be_an_open_file(table):
    writer = start(table, configfile=io.StringIO("a: 1"))
    assert table.get_config(writer.run_id) == "a: 1"


def test_a_duplicate_run_raises_the_public_duplicate_run_error(table):
    first = start(table)
    with pytest.raises(tb.DuplicateRunError, match=str(first.run_id)) as raised:
        start(table)
    assert raised.type is DuplicateRunError  # the store's own class, importable as tb.DuplicateRunError
    assert "DuplicateRunError" in tb.__all__


def test_same_unique_columns_are_refused_even_when_some_are_null(table):
    first = start(table, comment=None)
    with pytest.raises(DuplicateRunError, match=str(first.run_id)):
        start(table, comment=None)
    start(table, comment="different")


def test_cli_key_order_does_not_make_runs_distinct(table):
    start(table, cli={"a": 1, "b": 2})
    with pytest.raises(DuplicateRunError):
        start(table, cli={"b": 2, "a": 1})


def test_failed_and_hidden_runs_can_be_run_again(table):
    with pytest.raises(ZeroDivisionError), start(table):
        raise ZeroDivisionError
    retry = start(table)
    table.hide_run(retry.run_id)
    assert table.get_hidden_runs() == [retry.run_id]
    again = start(table)
    assert again.run_id > retry.run_id
    table.show_run(retry.run_id)
    assert table.get_hidden_runs() == []


def test_unique_columns_are_fixed_at_creation(db_url):
    tb.ResultTable(db_url, unique_columns=("experiment", "config")).close()
    with tb.ResultTable(db_url) as table:
        assert table.unique_columns == ("experiment", "config_path")
    with pytest.raises(StoreError, match="unique columns"):
        tb.ResultTable(db_url, unique_columns=("experiment",))
    with pytest.raises(ValueError, match="invalid unique column"):
        tb.ResultTable(db_url + "2", unique_columns=("colour",))


@pytest.mark.parametrize("created_by", ["open_store", "unique_columns=()"])
def test_a_table_created_without_unique_columns_checks_no_uniqueness(db_url, created_by):
    if created_by == "open_store":
        open_store(db_url).close()  # records an empty list of unique columns
        table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    else:
        table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP, unique_columns=())
    with table:
        assert table.unique_columns == ()
        first, second = start(table), start(table)
        assert second.run_id > first.run_id
        first.close()
        second.close()


def test_debug_runs_replace_each_other_and_skip_git(table):
    first = table.new_debug_run("dbg", auto_log_plt=False)
    first.add_scalar("x", 1.0)
    first.close()
    second = table.new_debug_run("dbg", auto_log_plt=False)
    assert second.run_id == -1
    second.close()
    row = table.get_experiment_raw(-1)
    assert row["git_commit"] is None and row["git_diff"] is None
    assert table.load_run(-1).get_scalar("x") == []


def test_a_debug_run_created_first_neither_shifts_real_ids_nor_opens_a_hole_in_uniqueness(table):
    table.new_debug_run("exp", auto_log_plt=False).close()
    first = start(table)
    assert first.run_id == 1  # not 0, the id after the debug run's -1
    with pytest.raises(DuplicateRunError, match="run id 1"):
        start(table)  # the same configuration, refused at every id
    table.new_debug_run("exp", auto_log_plt=False).close()  # replaces -1, shifts nothing
    second = start(table, comment="other")
    assert second.run_id == 2
    assert sorted(table.runs) == [-1, 1, 2]


def test_run_ids_stay_dense_when_a_duplicate_is_refused(table):
    ids = [start(table, comment="a").run_id]
    with pytest.raises(DuplicateRunError):
        start(table, comment="a")
    ids.append(start(table, comment="b").run_id)
    assert ids == [1, 2]


def test_row_changes_are_visible_to_this_process_at_once(db_url):
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP, commit_interval=3600) as table:
        try:  # the sink would not commit for an hour: each change must not wait for it
            run = start(table)
            run.set_status("failed")
            again = start(table)  # the uniqueness check sees the failure
            again.set_tag("best")
            again.set_note("lr too high")
            again.set_color("#00ff00")
            again.add_hparams(lr=0.1)
            row = table.get_experiment_raw(again.run_id)
            assert (row["tag"], row["note"], row["color"]) == ("best", "lr too high", "00ff00")
            assert table.get_results(run_id=again.run_id).data[0][-1] == 0.1
            again.write_result(acc=0.5)
            assert table.get_results(run_id=again.run_id).data[0][-2:] == [0.1, 0.5]
            table.hide_run(again.run_id)
            assert start(table).run_id == 3  # hidden: the configuration may run again
        finally:
            end_runs("failed")
            table.close()


def test_get_results_shows_hparams_and_results_as_columns(table):
    writer = start(table)
    writer.add_hparams(lr=0.1)
    writer.write_result(acc=0.9)
    other = start(table, comment="2")
    other.write_result(loss=0.2)
    result = table.get_results()
    assert result.col_ids == ["run_id", "experiment", "tag", "config_path", "comment", "lr", "acc", "loss"]
    assert result.is_hparam == [False] * 5 + [True, False, False]
    assert result.data == [
        [1, "exp", None, None, None, 0.1, 0.9, None],  # no tag is NULL (schema v3), like other empty cells
        [2, "exp", None, None, "2", None, None, 0.2],
    ]
    assert table.get_results(run_id=2).data == [result.data[1]]
    frame = table.to_pd()
    assert list(frame.index) == [1, 2] and frame.loc[1, "acc"] == 0.9


def test_hidden_runs_leave_the_default_view(table):
    writer = start(table)
    table.hide_run(writer.run_id)
    assert table.get_results().data == []
    assert len(table.get_results(show_hidden=True).data) == 1
    assert table.runs == [writer.run_id]
    with pytest.raises(KeyError):
        table.hide_run(99)


def test_columns_can_be_hidden_shown_reordered_and_renamed(table):
    table.hide_column("tag")
    assert table.result_columns["tag"][0] is None
    assert [table.result_columns[c][0] for c in ("run_id", "experiment", "config_path", "comment")] == [
        0,
        1,
        2,
        3,
    ]
    table.show_column("tag", 0)
    assert table.get_results().col_ids[:2] == ["tag", "run_id"]
    table.set_column_alias({"tag": "Label"})
    assert table.get_results().col_names[0] == "Label"
    table.set_column_order({"status": 9})
    assert table.get_results().col_ids[-1] == "status"
    with pytest.raises(KeyError):
        table.set_column_alias({"nope": "x"})


def test_tags_colors_and_images_by_id(table):
    writer = start(table, tag="baseline")
    writer.set_color("#00ff00")
    writer.add_image(np.zeros((3, 4), dtype=np.uint8))
    writer.flush()
    assert table.active_tags == ["baseline"] and table.active_colors == ["00ff00"]
    image_id = writer.get_images()[0]["id"]
    assert table.get_image_by_id(image_id).size == (4, 3)
    assert table.get_image_by_id(image_id + 1) is None


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_uncommitted_changes_warn_raise_or_pass(db_url, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
    (repo / "new.py").write_text("x = 1\n")
    monkeypatch.chdir(repo)
    with (
        tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.RAISE) as table,
        pytest.raises(RuntimeError, match="uncommitted"),
    ):
        table.new_run("e")
    with (
        tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.WARN) as table,
        pytest.warns(RuntimeWarning, match="uncommitted"),
    ):
        writer = table.new_run("e", auto_log_plt=False)
    with tb.ResultTable(db_url) as table:
        row = table.get_experiment_raw(writer.run_id)
    assert len(row["git_commit"]) == 40 and "new.py" in row["git_diff"]
    writer.close()


def test_a_run_lists_the_large_and_binary_files_it_did_not_store(db_url, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
    dataset = b"1,2,3\n" * 1_000_000  # 6 MB of CSV lying untracked in the repository
    (repo / "train.csv").write_bytes(dataset)
    (repo / "config.bin").write_bytes(b"\0config")
    monkeypatch.chdir(repo)
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        run = table.new_run("e", configfile="config.bin", auto_log_plt=False)
        row = table.get_experiment_raw(run.run_id)
        assert len(row["git_diff"]) + len(row["config_content"]) < 2_000
        assert row["config_hash"] == tb.ResultTable.get_file_hash(repo / "config.bin")
        binary = {"path": "config.bin", "size": 7, "sha256": row["config_hash"], "reason": "binary"}
        csv = {"path": "train.csv", "size": len(dataset), "sha256": hashlib.sha256(dataset).hexdigest()}
        assert table.get_left_out(run.run_id) == [
            {"source": "config", **binary},
            {"source": "git", **binary},
            {"source": "git", **csv, "reason": "larger than 256 kB"},
        ]
        with pytest.raises(KeyError, match=r"config file of run 1 \(config.bin, 7 bytes.*not stored: binary"):
            table.get_config(run.run_id)
        run.close()


def test_two_processes_racing_create_one_run(db_url):
    script = textwrap.dedent(
        f"""
        import sys, tallyboard as tb
        from tallyboard.store import DuplicateRunError
        table = tb.ResultTable({db_url!r}, nocommit_action=tb.NoCommitAction.NOP, on_duplicate="raise")
        sys.stdin.readline()  # start together
        try:
            table.new_run("race", auto_log_plt=False).close()
            print("created")
        except DuplicateRunError:
            print("duplicate")
        """
    )
    tb.ResultTable(db_url).close()  # create the file first so both only race on the run
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outputs = [proc.communicate("go\n", timeout=60)[0].strip() for proc in procs]
    assert sorted(outputs) == ["created", "duplicate", "duplicate", "duplicate"]
    with tb.ResultTable(db_url) as table:
        assert len(table.runs) == 1


def test_system_metrics_log_under_sys_and_stop_with_the_run(table):
    writer = start(table, system_metrics=True)
    writer.add_scalar("x", 1.0)
    writer.close()
    assert any(tag.startswith("sys/") for tag in writer.scalars)
    assert "x" in writer.scalars


def durable_commits(statements: list[tuple[int, str]]) -> int:
    """The commits of `sqlite_statements` that waited for the disk: at synchronous=FULL, what
    `open_for_writing` sets."""
    full: dict[int, bool] = {}
    count = 0
    for conn, sql in statements:
        if sql.startswith("PRAGMA synchronous="):
            full[conn] = sql.endswith("FULL")
        elif sql == "COMMIT" and full.get(conn, True):
            count += 1
    return count


def test_a_run_that_logs_and_closes_waits_for_the_disk_once(tmp_path, sqlite_statements) -> None:
    table = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    created = durable_commits(sqlite_statements)  # the new table's schema
    run = start(table)
    assert durable_commits(sqlite_statements) == created  # the row's commit did not wait for the disk
    run.add_scalar("loss", 1.0)
    run.close()
    assert durable_commits(sqlite_statements) == created + 1  # the close's: row, repetition, scalar, end
    assert table.load_run(run.run_id).get_scalar("loss")[0].value == 1.0
    table.close()


def test_a_flush_right_after_the_start_makes_the_run_durable(tmp_path, sqlite_statements) -> None:
    table = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    run = start(table, environment=False)  # nothing logged: the first repetition is still queued
    created = durable_commits(sqlite_statements)
    run.flush()
    assert durable_commits(sqlite_statements) == created + 1
    with open_store(tmp_path / "results.db") as store:
        assert store.execute("SELECT run_id, rep FROM repetitions") == [(run.run_id, 0)]
    run.close()
    table.close()

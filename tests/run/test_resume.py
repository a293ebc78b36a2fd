"""ResultTable.resume_run: a run restarted from a checkpoint, or requeued, continues its own series."""

import subprocess
import sys
import textwrap

import pytest

import tallyboard as tb
from tallyboard.run.exit_paths import end_runs
from tallyboard.store import open_queries
from tallyboard.store.dashboard_reads import SeriesKey


@pytest.fixture
def table(db_url):
    """A table on each engine; the runs a test leaves open are ended before its database goes."""
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        try:
            yield table
        finally:
            end_runs("failed")


def start(table):
    return table.new_run("exp", auto_log_plt=False)


def series(table, run_id, tag):
    return [(s.run_rep, s.step, s.value) for s in table.load_run(run_id).get_scalar(tag)]


def block_extremes(url, run_id, tag, rep=0):
    """(lowest, highest) of the first 256-step block, as the dashboard reads it from scalar_blocks."""
    queries = open_queries(url)
    try:
        key = SeriesKey(run_id, queries.tag_id(tag), rep)
        ((*_, lowest, highest),) = queries.buckets(key, 0, 255, 256)
        return lowest, highest
    finally:
        queries.close()


def test_a_resumed_run_is_running_again_and_auto_steps_continue_per_tag(table):
    first = start(table)
    for value in range(5):
        first.add_scalar("train/loss", float(value))
    first.add_scalar("val/acc", 0.5)
    first.close(status="failed")
    assert table.get_experiment_raw(first.run_id)["end_time"] is not None

    resumed = table.resume_run(first.run_id)
    row = table.get_experiment_raw(first.run_id)  # visible at once, before any flush
    assert (row["status"], row["end_time"]) == ("running", None)
    resumed.add_scalar("train/loss", 5.0)
    resumed.add_scalar("val/acc", 0.75)
    resumed.add_scalar("test/acc", 0.9)  # a tag new to the run starts at 0
    resumed.close()
    assert series(table, first.run_id, "train/loss") == [(0, step, float(step)) for step in range(6)]
    assert series(table, first.run_id, "val/acc") == [(0, 0, 0.5), (0, 1, 0.75)]
    assert series(table, first.run_id, "test/acc") == [(0, 0, 0.9)]
    assert table.get_experiment_raw(first.run_id)["status"] == "finished"
    assert table.runs == [first.run_id]  # no second run


def test_steps_logged_again_replace_the_old_values_and_their_block_extremes(table, db_url):
    first = start(table)
    for step in range(10):
        first.add_scalar("train/loss", float(step), step=step)  # block 0: lowest 0, highest 9
    first.close(status="failed")

    resumed = table.resume_run(first.run_id)
    for step in range(6, 12):  # the checkpoint was at step 6: steps 6..9 come again, lower
        resumed.add_scalar("train/loss", -float(step), step=step)
    resumed.close()
    expected = [(0, s, float(s)) for s in range(6)] + [(0, s, -float(s)) for s in range(6, 12)]
    assert series(table, first.run_id, "train/loss") == expected
    assert block_extremes(db_url, first.run_id, "train/loss") == (-11.0, 5.0)  # old 9 is gone


def test_repetitions_continue_after_the_last_one(table):
    first = start(table)
    first.add_scalar("loss", 1.0)
    first.new_repetition()
    first.add_scalar("loss", 2.0)
    first.add_scalar("loss", 3.0)
    first.close()

    resumed = table.resume_run(first.run_id)
    resumed.add_scalar("loss", 4.0)  # still repetition 1, after its last step
    resumed.new_repetition()
    resumed.add_scalar("loss", 5.0)
    resumed.close()
    expected = [(0, 0, 1.0), (1, 0, 2.0), (1, 1, 3.0), (1, 2, 4.0), (2, 0, 5.0)]
    assert series(table, first.run_id, "loss") == expected
    assert resumed.get_repetitions() == [0, 1, 2]


def test_walltimes_of_a_resumed_run_count_from_its_repetition_start(table):
    first = start(table)
    first.add_scalar("loss", 1.0, walltime=100.0)
    first.close()
    started = table.get_experiment_raw(first.run_id)["start_time"]
    resumed = table.resume_run(first.run_id)
    resumed.add_scalar("loss", 2.0)
    resumed.flush()
    logged = resumed.get_scalar("loss")[1].wall_time
    assert logged >= table.get_experiment_raw(first.run_id)["updated_at"] - started - 0.01


def test_media_and_texts_of_a_resumed_run_default_to_the_step_after_the_last(table):
    first = start(table)
    for value in range(3):
        first.add_scalar("loss", float(value))
    first.close()
    resumed = table.resume_run(first.run_id)
    resumed.add_text("hello")
    resumed.flush()
    assert [record["step"] for record in resumed.get_text()] == [3]


def test_a_writer_of_the_run_still_open_in_this_process_is_drained_and_let_go(table):
    old = start(table)
    old.add_scalar("loss", 1.0)
    resumed = table.resume_run(old.run_id)
    with pytest.raises(RuntimeError, match="read-only"):
        old.add_scalar("loss", 9.0)
    resumed.add_scalar("loss", 2.0)
    old.close()  # the old writer's close is a no-op: it no longer owns the run
    assert table.get_experiment_raw(old.run_id)["status"] == "running"
    resumed.close()
    assert series(table, old.run_id, "loss") == [(0, 0, 1.0), (0, 1, 2.0)]


def test_resume_refuses_unknown_runs_and_a_failed_run_whose_configuration_ran_again(table):
    with pytest.raises(KeyError, match="no run with id 99"):
        table.resume_run(99)
    failed = start(table)
    failed.close(status="failed")
    again = start(table)  # allowed: the first one failed
    with pytest.raises(tb.DuplicateRunError, match=str(again.run_id)):
        table.resume_run(failed.run_id)
    assert table.get_experiment_raw(failed.run_id)["status"] == "failed"  # left as it was
    again.close()
    resumed = table.resume_run(again.run_id)  # a finished run resumes (it is itself, no duplicate)
    resumed.close()


def test_a_job_killed_without_closing_is_continued_by_its_next_process(table, db_url):
    script = textwrap.dedent(
        f"""
        import os, tallyboard as tb
        table = tb.ResultTable({db_url!r}, nocommit_action=tb.NoCommitAction.NOP)
        run = table.new_run("job", auto_log_plt=False)
        for step in range(8):
            run.add_scalar("train/loss", 1.0 / (step + 1))
        run.flush()
        print(run.run_id, flush=True)
        os._exit(0)  # preempted: no close, no atexit
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    run_id = int(done.stdout)
    assert table.get_experiment_raw(run_id)["status"] == "running"
    resumed = table.resume_run(run_id)
    for step in range(6, 10):  # the last checkpoint was at step 6
        resumed.add_scalar("train/loss", 1.0 / (step + 1), step=step)
    resumed.write_result(loss=0.1)
    steps = [step for _, step, _ in series(table, run_id, "train/loss")]
    assert steps == list(range(10))
    assert table.get_experiment_raw(run_id)["status"] == "finished"

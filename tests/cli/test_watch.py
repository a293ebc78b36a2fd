"""`tallyboard watch`: rules evaluated on a table other processes log into, through the command
itself (a real subprocess) and through `Watcher` polled step by step."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import tallyboard as tb
from cli_runner import run_cli
from tallyboard.alerts import NonFinite, Threshold
from tallyboard.cli.watch import Watcher
from tallyboard.run.exit_paths import end_runs


@pytest.fixture
def table(tmp_path: Path):
    with tb.ResultTable(str(tmp_path / "results.db"), nocommit_action=tb.NoCommitAction.NOP) as table:
        yield table
        end_runs("failed")


def test_watch_once_prints_and_records_the_alerts_of_finished_runs(table: tb.ResultTable) -> None:
    with table.new_run("exp", auto_log_plt=False) as run:
        for step, loss in enumerate([1.0, math.nan, 12.0]):
            run.add_scalar("train/loss", loss, step=step)
    path = table.db_path
    result = run_cli("watch", path, "--rule", "nonfinite:train/*", "--rule", "threshold:train/loss:above=10",
                     "--once", "--all-runs")  # fmt: skip
    assert result.stdout.splitlines() == [
        f"[error] run {run.run_id}: train/loss is not finite: train/loss = nan at step 1",
        f"[warn] run {run.run_id}: train/loss crossed a threshold: train/loss = 12.0 at step 2, above 10.0",
    ]
    assert [a.title for a in table.alerts(run.run_id)] == [
        "train/loss is not finite",
        "train/loss crossed a threshold",
    ]
    assert table.alerts(run.run_id)[0].rule == "NonFinite('train/*')"
    quiet = run_cli("watch", path, "--rule", "nonfinite:train/loss", "--once", "--all-runs", "--no-record")
    assert len(quiet.stdout.splitlines()) == 1 and len(table.alerts(run.run_id)) == 2


def test_a_bad_rule_is_one_line_and_exit_1(table: tb.ResultTable) -> None:
    result = run_cli("watch", table.db_path, "--rule", "nan:loss", "--once", check=False)
    assert result.returncode == 1 and "unknown kind 'nan'" in result.stderr


def test_the_watcher_reads_only_what_is_new_and_follows_a_run_to_its_end(table: tb.ResultTable) -> None:
    reader = tb.ResultTable(table.db_path)
    watcher = Watcher(reader, [Threshold("loss", above=1.0), NonFinite("loss")])
    run = table.new_run("exp", auto_log_plt=False)
    run.add_scalar("loss", 2.0, step=0)
    run.flush()
    assert [a.step for a in watcher.poll()] == [0]
    assert watcher.poll() == []  # nothing new: nothing evaluated again
    run.add_scalar("loss", 0.5, step=1)
    run.add_scalar("loss", 3.0, step=2)  # crossed again after being fine: held back (rate limit)
    run.add_scalar("loss", math.inf, step=3)
    run.close()  # ended since the last poll: read once more
    assert [(a.title, a.step) for a in watcher.poll()] == [("loss is not finite", 3)]
    assert watcher.poll() == []
    assert [a.title for a in table.alerts(run.run_id)] == ["loss crossed a threshold", "loss is not finite"]
    reader.close()

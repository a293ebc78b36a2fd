"""Alerts of a run being written, through a real table on each engine: rules attached to a run or
to a table, `run.alert`, rate limiting, `should_stop`, Stat windows, and `ResultTable.alerts`."""

import math
from datetime import timedelta

import pytest

import tallyboard as tb
from tallyboard import monitor
from tallyboard.alerts import NoImprovement, NonFinite, Stalled, Threshold
from tallyboard.run.exit_paths import end_runs


@pytest.fixture
def table(db_url):
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        yield table
        end_runs("failed")


def test_a_nan_loss_gives_one_alert_recorded_in_the_run(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_rule(NonFinite("train/loss"))
        for step, loss in enumerate([1.0, 0.5, math.nan, math.nan, 0.4, math.inf]):
            run.add_scalar("train/loss", loss, step=step)
            run.add_scalar("train/acc", math.nan, step=step)  # watched by no rule
        run_id = run.run_id
    alerts = table.alerts(run_id)
    assert [(a.title, a.step, a.level) for a in alerts] == [("train/loss is not finite", 2, "error")]
    assert "nan at step 2" in alerts[0].text and alerts[0].rule == "NonFinite('train/loss')"
    # a second title is not held back by the first: the inf after a finite value is its own episode,
    # but the same title within a minute is rate-limited
    assert (
        table.alerts(run_id, level="error") == alerts
        and table.alerts(run_id, since=alerts[0].time + 1e6) == []
    )


def test_rules_of_the_table_watch_every_run_and_patterns_match_tags(table):
    table.rules = [Threshold("val/*", above=2.0), NoImprovement("train/loss", patience=3)]
    with table.new_run("exp", auto_log_plt=False) as run:
        for step, loss in enumerate([3.0, 2.0, 2.5, 2.1, 2.0, 2.2]):
            run.add_scalar("train/loss", loss, step=step)
        run.add_scalar("val/loss", 2.5, step=5)
        run.flush()
        titles = [a.title for a in table.alerts(run.run_id)]
    assert titles == ["train/loss stopped improving", "val/loss crossed a threshold"]


def test_a_rule_added_late_watches_tags_logged_before(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_scalar("train/loss", 1.0)
        run.add_rule(Threshold("train/loss", below=0.5))
        run.add_scalar("train/loss", 0.1)
        run.flush()
        assert [a.step for a in table.alerts(run.run_id)] == [1]


def test_a_rule_added_second_watches_a_series_already_watched(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_rule(Threshold("loss", above=5.0))
        run.add_scalar("loss", 1.0)
        run.flush()  # the series' watches are made
        run.add_rule(NonFinite("loss"))
        run.add_scalar("loss", math.nan)
        run.flush()
        assert [a.title for a in table.alerts(run.run_id)] == ["loss is not finite"]


def test_a_stalled_trend_is_found_and_a_moving_one_is_not(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_rule(Stalled("loss", window=5, min_change=0.1))
        for step in range(10):
            run.add_scalar("loss", 10.0 - step, step=step)  # moving: 4 per window
        for step in range(10, 20):
            run.add_scalar("loss", 0.5 + 0.001 * (step % 2), step=step)
        run.flush()
        assert [a.title for a in table.alerts(run.run_id)] == ["loss stalled"]


def test_run_alert_is_recorded_and_rate_limited_per_title(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.alert("disk almost full", "93% used", level="warn")
        run.alert("disk almost full", "94% used", level="warn")  # held back: within a minute
        run.alert("checkpoint saved", step=7)
        run.alert("no wait", wait=timedelta(0))
        run.alert("no wait", "again", wait=0)
        with pytest.raises(ValueError, match="level must be one of"):
            run.alert("x", level="panic")
        run_id = run.run_id
    alerts = table.alerts(run_id)
    assert [(a.title, a.text, a.level) for a in alerts] == [
        ("disk almost full", "93% used", "warn"),
        ("checkpoint saved", "", "info"),
        ("no wait", "", "info"),
        ("no wait", "again", "info"),
    ]
    assert alerts[1].step == 7 and alerts[0].rule is None
    assert [a.title for a in table.alerts(level="warn")] == ["disk almost full"]


def test_should_stop_answers_once_a_stop_rule_fired_and_the_run_keeps_why(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_rule(Threshold("loss", above=10.0))  # not a stop rule
        run.add_rule(NonFinite("loss", stop=True))
        run.add_scalar("loss", 20.0)
        run.flush()
        assert not run.should_stop() and run.stop_reason is None
        run.add_scalar("loss", math.nan)
        run.flush()
        assert run.should_stop()
        reason = run.stop_reason
        run_id = run.run_id
    stored = table.alerts(run_id)[-1]
    assert stored.stop and stored.title == reason.title == "loss is not finite"
    assert not table.alerts(run_id)[0].stop


def test_rules_evaluate_on_stat_windows(table):
    clock = [0]  # nanoseconds
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_rule(NoImprovement("train/step_time.mean", patience=2))
        handle = monitor.register_event_handler(tb.ResultTableEventHandler(run))
        try:
            stat = monitor.Stat("train/step_time", [monitor.Aggregation.MEAN], 1.0, clock=lambda: clock[0])
            for value in (1.0, 2.0, 3.0, 4.0, 5.0):  # each window worse than the first
                stat.add(value)
                clock[0] += 1_500_000_000
            stat.add(6.0)
        finally:
            monitor.unregister_event_handler(handle)
        run.flush()
        alerts = table.alerts(run.run_id)
    assert [a.title for a in alerts] == ["train/step_time.mean stopped improving"]
    assert "no improvement for 2 steps" in alerts[0].text


def test_a_new_repetition_watches_afresh_and_a_disabled_run_ignores_rules(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_rule(NonFinite("loss"))
        run.add_scalar("loss", math.nan)
        run.new_repetition()
        run.add_scalar("loss", math.nan)
        run.flush()
        assert [(a.rep, a.step) for a in table.alerts(run.run_id)] == [(0, 0)]  # same title: held back
    disabled = table.new_run("off", disable=True)
    disabled.add_rule(NonFinite("loss"))
    disabled.alert("nothing")
    assert not disabled.should_stop()


def test_a_loaded_run_refuses_rules_and_alerts(table):
    with table.new_run("exp", auto_log_plt=False) as run:
        run_id = run.run_id
    view = table.load_run(run_id)
    for call in (lambda: view.add_rule(NonFinite("x")), lambda: view.alert("x")):
        with pytest.raises(RuntimeError, match="read-only"):
            call()


def test_alerts_travel_with_an_export_and_its_import(table, tmp_path):
    with table.new_run("exp", auto_log_plt=False) as run:
        run.add_rule(NonFinite("loss", stop=True))
        run.add_scalar("loss", math.nan, step=5)
        run.alert("by hand", "text", level="warn")
    table.export(tmp_path / "out")
    with tb.ResultTable(str(tmp_path / "copy.db")) as copy:
        copy.import_export(tmp_path / "out")
        assert [(a.title, a.level, a.step, a.stop, a.rule) for a in copy.alerts()] == [
            (a.title, a.level, a.step, a.stop, a.rule) for a in table.alerts(run.run_id)
        ]


def test_a_forked_child_evaluates_the_rules_of_its_own_runs(table):
    import os

    from tallyboard.run import alerting

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    with table.new_run("parent", auto_log_plt=False) as parent:
        parent.add_rule(NonFinite("loss"))  # the parent's evaluator thread runs
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its own run, evaluated by a thread of its own
            child_table = tb.ResultTable(table.db_path, nocommit_action=tb.NoCommitAction.NOP)
            run = child_table.new_run("child", auto_log_plt=False)
            run.add_rule(NonFinite("loss"))
            run.add_scalar("loss", math.nan)
            alive = (
                alerting._evaluator._thread.is_alive() and parent._alerting not in alerting._evaluator._runs
            )
            run.close()
            os.write(write, b"1" if alive else b"0")
            os._exit(0)
        os.close(write)
        assert os.read(read, 1) == b"1"
        os.waitpid(pid, 0)
    assert [a.title for a in table.alerts()] == ["loss is not finite"]

"""ResultTableEventHandler: monitor events land in a real result table on disk."""

import json
import threading
from datetime import datetime

import pytest

import tallyboard as tb
from live_runs import FakeClock, series
from tallyboard import monitor
from tallyboard.run import event_handler as handlers


@pytest.fixture
def run(table):
    with table.new_run("handlers") as writer:
        yield writer


@pytest.fixture
def registered():
    """Register handlers for one test only."""
    handles = []

    def register(handler):
        handles.append(monitor.register_event_handler(handler))
        return handler

    yield register
    for handle in handles:
        monitor.unregister_event_handler(handle)


def test_each_stat_window_becomes_one_scalar_per_aggregation(run, registered):
    registered(tb.ResultTableEventHandler(run))
    clock = FakeClock()
    stat = monitor.Stat("train/step_time", [monitor.MEAN, monitor.MAX], 1.0, clock=clock)
    for second, value in [(0.0, 1.0), (0.5, 3.0), (1.2, 5.0), (3.5, 7.0), (3.9, 9.0)]:
        clock.at(second)
        stat.add(value)
    stat.close()  # logs the open window (3 s - 4 s)
    assert series(run, "train/step_time.mean") == [(0, 2.0), (1, 5.0), (2, 8.0)]
    assert series(run, "train/step_time.max") == [(0, 3.0), (1, 5.0), (2, 9.0)]


def test_steps_are_counted_per_key(run, registered):
    registered(tb.ResultTableEventHandler(run))
    clock = FakeClock()
    fast = monitor.Stat("fast", [monitor.COUNT], 1.0, clock=clock)
    slow = monitor.Stat("slow", [monitor.SUM], 10.0, clock=clock)
    for second in range(25):
        clock.at(second)
        fast.add(1)
        slow.add(second)
    fast.close()
    slow.close()
    assert [step for step, _ in series(run, "fast.count")] == list(range(25))
    assert series(run, "slow.sum") == [(0, 45.0), (1, 145.0), (2, sum(range(20, 25)))]


def test_a_step_callable_sets_the_step_of_every_record(run, registered):
    global_step = {"value": 100}
    registered(tb.ResultTableEventHandler(run, step=lambda: global_step["value"]))
    monitor.log_event(monitor.Event(monitor.STAT_EVENT, datetime.now(), {"loss.mean": 0.5}))
    global_step["value"] = 250
    monitor.log_event(monitor.Event(monitor.STAT_EVENT, datetime.now(), {"loss.mean": 0.25}))
    monitor.log_event(monitor.Event("checkpoint", datetime.now(), {"path": "/tmp/a.ckpt"}))
    assert series(run, "loss.mean") == [(100, 0.5), (250, 0.25)]
    assert [text["step"] for text in run.get_text(tag="checkpoint")] == [250]


def test_other_events_become_text_records_with_timestamp_and_data(run, registered):
    registered(tb.ResultTableEventHandler(run))
    stamp = datetime(2026, 5, 17, 9, 30, 15)
    data = {"message": "lr dropped <b>", "lr": 0.001, "epoch": 3, "warmup": False}
    monitor.log_event(monitor.Event("scheduler", stamp, data))
    monitor.log_event(monitor.Event("scheduler", stamp, {"message": "again"}))
    run.flush()
    texts = run.get_text(tag="scheduler")
    assert [text["step"] for text in texts] == [0, 1]
    first = json.loads(texts[0]["fragment"])
    assert first == {"timestamp": "2026-05-17T09:30:15", "data": data}
    assert first["data"]["warmup"] is False
    assert run.scalars == []


def test_exclusive_events_reach_only_the_owning_result_table_handler(table, run, registered):
    other_run = table.new_run("other")
    owner = registered(tb.ResultTableEventHandler(run))
    registered(tb.ResultTableEventHandler(run))
    registered(tb.ResultTableEventHandler(other_run))
    seen = []
    registered(seen.append)
    with handlers.exclusive_events(owner):
        monitor.log_event(monitor.Event(monitor.STAT_EVENT, datetime.now(), {"sys/cpu.mean": 10.0}))
    monitor.log_event(monitor.Event(monitor.STAT_EVENT, datetime.now(), {"user.mean": 1.0}))
    assert series(run, "sys/cpu.mean") == [(0, 10.0)]
    assert series(run, "user.mean") == [(0, 1.0)]  # two handlers wrote the same point
    assert series(other_run, "sys/cpu.mean") == []
    assert series(other_run, "user.mean") == [(0, 1.0)]
    assert len(seen) == 2  # handlers of other kinds still see every event
    other_run.close()


def test_exclusive_events_is_per_thread_and_restored_after_the_block(table, run, registered):
    other_run = table.new_run("bystander")
    owner = registered(tb.ResultTableEventHandler(run))
    registered(tb.ResultTableEventHandler(other_run))
    event = monitor.Event(monitor.STAT_EVENT, datetime.now(), {"k.mean": 1.0})
    with handlers.exclusive_events(owner):
        monitor.log_event(event)  # the owner only
        worker = threading.Thread(target=monitor.log_event, args=(event,))
        worker.start()  # another thread: both handlers
        worker.join()
    monitor.log_event(event)  # after the block: both handlers
    assert len(series(run, "k.mean")) == 3
    assert len(series(other_run, "k.mean")) == 2
    other_run.close()


def test_windows_land_at_the_training_step_once_the_run_has_one(run, registered):
    """A Stat's chart shares the step axis of the run's other charts: its windows land at the step
    the training loop reached (the furthest auto step of the run's own scalars), each after the one
    before even when training stood still; before any such scalar, at the window's index."""
    registered(tb.ResultTableEventHandler(run))
    clock = FakeClock()
    stat = monitor.Stat("train/step_time", [monitor.MEAN], 1.0, clock=clock)
    clock.at(0.0)
    stat.add(1.0)
    clock.at(1.5)  # the first window closes before any training step: index 0
    stat.add(2.0)
    for step in range(40):
        run.add_scalar("train/loss", 1.0 / (step + 1))
    clock.at(2.5)  # closes at training step 40
    stat.add(3.0)
    clock.at(3.5)  # training stood still: the next step, not step 40 again
    stat.add(4.0)
    stat.close()
    assert series(run, "train/step_time.mean") == [(0, 1.0), (40, 2.0), (41, 3.0), (42, 4.0)]


def test_concurrent_windows_get_distinct_steps(run, registered):
    registered(tb.ResultTableEventHandler(run))
    event = monitor.Event(monitor.STAT_EVENT, datetime.now(), {"shared.mean": 2.0})

    def log_many():
        for _ in range(200):
            monitor.log_event(event)

    threads = [threading.Thread(target=log_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(step for step, _ in series(run, "shared.mean")) == list(range(800))


def test_a_finished_run_makes_the_handler_raise_to_the_caller(table, registered):
    writer = table.new_run("finished")
    registered(tb.ResultTableEventHandler(writer))
    writer.write_result(accuracy=0.9)
    with pytest.raises(RuntimeError, match="read-only"):
        monitor.log_event(monitor.Event(monitor.STAT_EVENT, datetime.now(), {"late.mean": 1.0}))


def test_exported_from_tallyboard():
    assert tb.ResultTableEventHandler is handlers.ResultTableEventHandler


@pytest.mark.parametrize("end", ["write_result", "close", "with"])
def test_the_open_window_of_a_stat_lands_before_the_run_ends(table, registered, end):
    clock = FakeClock()
    stat = monitor.Stat("step_time", [monitor.MEAN], 10.0, clock=clock)
    run = table.new_run(f"last-window-{end}", auto_log_plt=False)
    registered(tb.ResultTableEventHandler(run))
    for second, value in [(1.0, 1.0), (12.0, 2.0), (13.0, 4.0)]:  # the window 10 s - 20 s stays open
        clock.at(second)
        stat.add(value)
    if end == "write_result":
        run.write_result(acc=1.0)
    elif end == "close":
        run.close()
    else:
        with run:
            pass
    assert series(table.load_run(run.run_id), "step_time.mean") == [(0, 1.0), (1, 3.0)]
    assert stat.count == 0  # logged; the Stat itself stays open
    stat.close()  # nothing left to log, so the ended run is not asked to take anything


def window_tags(table, run) -> list[str] | None:
    run.flush()
    stored = table.get_experiment_raw(run.run_id)["window_tags"]
    return None if stored is None else json.loads(stored)


def test_the_run_lists_the_keys_whose_steps_count_windows_while_they_do(table, run, registered):
    """What lets a chart say "window" under a Stat's series: the run's `window_tags` lists a key
    while its windows land at their indices, and no longer once one lands at the training step."""
    registered(tb.ResultTableEventHandler(run))
    clock = FakeClock()
    stat = monitor.Stat("train/step_time", [monitor.MEAN, monitor.MAX], 1.0, clock=clock)
    assert window_tags(table, run) is None
    for second in (0.0, 1.5, 2.5):  # two windows close before any training step
        clock.at(second)
        stat.add(second)
    assert window_tags(table, run) == ["train/step_time.max", "train/step_time.mean"]
    run.add_scalar("train/loss", 0.5)
    clock.at(3.5)  # this window lands at the training step
    stat.add(1.0)
    assert window_tags(table, run) is None
    assert [step for step, _ in series(run, "train/step_time.mean")] == [0, 1, 2]


def test_a_step_callable_counts_no_windows(table, run, registered):
    registered(tb.ResultTableEventHandler(run, step=lambda: 7))
    clock = FakeClock()
    stat = monitor.Stat("lr", [monitor.VALUE], 1.0, clock=clock)
    for second in (0.0, 1.5):
        clock.at(second)
        stat.add(second)
    assert series(run, "lr.value") == [(7, 0.0)]
    assert window_tags(table, run) is None

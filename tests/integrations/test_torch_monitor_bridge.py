"""The torch.monitor bridge, with the real torch 2.13.0: torch's events reach tallyboard's handlers."""

from datetime import datetime, timedelta

import pytest
import torch.monitor

import tallyboard as tb
from tallyboard import monitor
from tallyboard.integrations.torch_monitor import bridge, unbridge


@pytest.fixture
def received():
    events = []
    handle = monitor.register_event_handler(events.append)
    yield events
    monitor.unregister_event_handler(handle)


def test_torch_log_event_reaches_tallyboard_handlers(received):
    stamp = datetime(2026, 1, 2, 3, 4, 5)
    with bridge():
        torch.monitor.log_event(torch.monitor.Event("eval", stamp, {"split": "val", "step": 7, "acc": 0.5}))
    [event] = received
    assert isinstance(event, monitor.Event)
    assert (event.name, event.timestamp) == ("eval", stamp)
    assert event.data == {"split": "val", "step": 7, "acc": 0.5}


def test_torch_stats_land_in_a_result_table(tmp_path, received):
    table = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("torch-monitor")
    handle = monitor.register_event_handler(tb.ResultTableEventHandler(run))
    bridged = bridge()
    try:
        # max_samples makes torch log each window as soon as it holds two samples: no waiting.
        aggregations = [torch.monitor.Aggregation.VALUE, torch.monitor.Aggregation.MEAN]
        stat = torch.monitor.Stat("train/loss", aggregations, timedelta(hours=1), 2)
        for value in (1.0, 3.0):
            stat.add(value)
    finally:
        bridged.remove()
        monitor.unregister_event_handler(handle)
    run.flush()
    assert [event.name for event in received] == [monitor.STAT_EVENT]
    assert [(point.step, point.value) for point in run.get_scalar("train/loss.mean")] == [(0, 2.0)]
    # torch's binding never reports VALUE: nothing to bridge (tallyboard's own Stat does report it).
    assert run.get_scalar("train/loss.value") == []
    run.close()
    table.close()


def test_remove_stops_forwarding_and_is_idempotent(received):
    handle = bridge()
    assert handle.active
    torch.monitor.log_event(torch.monitor.Event("a", datetime.now(), {}))
    handle.remove()
    handle.remove()  # torch itself crashes on a double unregister; the bridge does not
    assert not handle.active
    torch.monitor.log_event(torch.monitor.Event("b", datetime.now(), {}))
    assert [event.name for event in received] == ["a"]


def test_unbridge_and_two_bridges(received):
    first, second = bridge(), bridge()
    torch.monitor.log_event(torch.monitor.Event("twice", datetime.now(), {}))
    unbridge(first)
    torch.monitor.log_event(torch.monitor.Event("once", datetime.now(), {}))
    unbridge(second)
    torch.monitor.log_event(torch.monitor.Event("never", datetime.now(), {}))
    assert [event.name for event in received] == ["twice", "twice", "once"]


def test_an_error_in_a_tallyboard_handler_reaches_the_torch_caller():
    def failing(event):
        raise ValueError("handler broke")

    handle = monitor.register_event_handler(failing)
    try:
        with bridge(), pytest.raises(Exception, match="handler broke"):
            torch.monitor.log_event(torch.monitor.Event("x", datetime.now(), {}))
    finally:
        monitor.unregister_event_handler(handle)

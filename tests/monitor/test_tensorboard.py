"""Stat events through TensorboardEventHandler into real SummaryWriters, read back by tensorboard."""

from datetime import datetime, timedelta

import pytest
from tensorboard.backend.event_processing import event_accumulator

from tallyboard import monitor
from tallyboard.monitor import Aggregation, Stat, TensorboardEventHandler


def torch_writer(logdir):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(logdir))


def tensorboardx_writer(logdir):
    from tensorboardX import SummaryWriter

    return SummaryWriter(str(logdir))


def read_scalars(logdir) -> dict[str, list]:
    accumulator = event_accumulator.EventAccumulator(str(logdir))
    accumulator.Reload()
    return {tag: accumulator.Scalars(tag) for tag in accumulator.Tags()["scalars"]}


@pytest.mark.parametrize("make_writer", [torch_writer, tensorboardx_writer], ids=["torch", "tensorboardX"])
def test_stat_windows_round_trip_into_a_summary_writer(tmp_path, clock, registered, make_writer):
    writer = make_writer(tmp_path)
    registered.append(monitor.register_event_handler(TensorboardEventHandler(writer)))
    stat = Stat("train/step_time", [Aggregation.MEAN, Aggregation.MAX], timedelta(seconds=1), clock=clock)
    before = datetime.now().timestamp()
    for second, values in enumerate([(1.0, 3.0), (5.0,)]):
        clock.set(s=second)
        for value in values:
            stat.add(value)
    stat.close()
    monitor.log_event(monitor.Event("not a stat", datetime.now(), {"ignored": 1.0}))
    writer.close()

    scalars = read_scalars(tmp_path)
    assert sorted(scalars) == ["train/step_time.max", "train/step_time.mean"]
    assert [s.value for s in scalars["train/step_time.mean"]] == [2.0, 5.0]
    assert [s.value for s in scalars["train/step_time.max"]] == [3.0, 5.0]
    walltimes = [s.wall_time for series in scalars.values() for s in series]
    assert all(before - 1 <= walltime <= datetime.now().timestamp() + 1 for walltime in walltimes)


def test_only_stat_events_reach_the_writer(tmp_path):
    writer = tensorboardx_writer(tmp_path)
    handler = TensorboardEventHandler(writer)
    when = datetime(2024, 5, 1, 12, 0, 0)
    handler(monitor.Event("other", when, {"x": 1.0}))
    handler(monitor.Event(monitor.STAT_EVENT, when, {"loss.mean": 0.5}))
    writer.close()
    scalars = read_scalars(tmp_path)
    assert list(scalars) == ["loss.mean"]
    (point,) = scalars["loss.mean"]
    assert (point.value, point.wall_time) == (0.5, pytest.approx(when.timestamp()))

"""TensorBoard histograms as the table's Histogram: what torch's SummaryWriter wrote, read back by
TensorBoard's own EventAccumulator, converts without losing a value; TF2 bucket tensors too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.util import tensor_util
from torch.utils.tensorboard import SummaryWriter

from tallyboard.integrations.tb_histograms import from_histogram_proto, from_histogram_tensor


def test_torch_summary_writer_histograms_convert_exactly(tmp_path: Path) -> None:
    values = np.random.default_rng(3).normal(size=5000)
    with SummaryWriter(str(tmp_path)) as writer:
        writer.add_histogram("w", values, 1)  # TensorFlow's fixed exponential buckets
        writer.add_histogram("w", torch.tensor([2.0, 2.0, 2.0]), 2)
        writer.add_histogram("w", values, 3, bins="auto")  # numpy's buckets on the data
    acc = ea.EventAccumulator(str(tmp_path), size_guidance={ea.HISTOGRAMS: 0})
    acc.Reload()
    first, constant, auto = (event.histogram_value for event in acc.Histograms("w"))

    h = from_histogram_proto(first)
    assert (h.count, h.nonfinite, h.minimum, h.maximum) == (5000, 0, first.min, first.max)
    assert (h.total, h.total_squares) == (first.sum, first.sum_squares)
    assert h.edges[1:] == tuple(first.bucket_limit) and h.counts == tuple(int(c) for c in first.bucket)
    assert len(h.edges) == len(h.counts) + 1 and h.edges[0] == first.bucket_limit[0] < values.min()
    assert sum(h.counts) == 5000 and h.total == values.sum()
    counts, edges = np.histogram(values, bins="auto")
    a = from_histogram_proto(auto)  # torch's leading empty bucket is the zero-width [min, min]
    assert a.edges == (values.min(), *edges) and a.counts == (0, *counts.tolist())
    c = from_histogram_proto(constant)
    assert (c.count, c.minimum, c.maximum, sum(c.counts)) == (3, 2.0, 2.0, 3)


def test_tf2_bucket_tensors_convert_with_estimated_sums() -> None:
    tensor = tensor_util.make_tensor_proto(np.array([[0.0, 1.0, 3.0], [1.0, 2.0, 5.0]]))
    h = from_histogram_tensor(tensor)
    assert (h.count, h.minimum, h.maximum, h.edges, h.counts) == (8, 0.0, 2.0, (0.0, 1.0, 2.0), (3, 5))
    assert (h.total, h.total_squares) == (0.5 * 3 + 1.5 * 5, 0.25 * 3 + 2.25 * 5)
    assert from_histogram_tensor(tensor_util.make_tensor_proto(np.zeros(3))) is None
    assert from_histogram_tensor(tensor_util.make_tensor_proto(np.zeros((0, 3)))).count == 0


def test_imported_torch_histograms_are_the_accumulators_values(tmp_path: Path, db_url: str) -> None:
    """`tallyboard import tensorboard` of torch's SummaryWriter.add_histogram: every histogram
    arrives as the table's kind (get_histograms) with EventAccumulator's values, on both engines."""
    import tallyboard as tb
    from tallyboard.integrations.tensorboard_import import import_logdir

    rng = np.random.default_rng(4)
    with SummaryWriter(str(tmp_path / "logs" / "torch")) as writer:
        for step in range(3):
            writer.add_histogram("layer/weight", torch.from_numpy(rng.normal(step, 1, 2000)), step)
        writer.add_histogram("layer/bias", np.arange(10.0), 5, bins="auto")
    report = import_logdir(tmp_path / "logs", db_url, clock=lambda: 4e9)
    assert report.tally.imported["histograms"] == 4
    acc = ea.EventAccumulator(str(tmp_path / "logs" / "torch"), size_guidance={ea.HISTOGRAMS: 0})
    acc.Reload()
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    try:
        (run_id,) = [run.run_id for run in table._store.runs(show_hidden=True)]
        stored = table.load_run(run_id).get_histograms()
    finally:
        table.close()
    expected = [
        (tag, e.step, v.num, v.min, v.max, v.sum, v.sum_squares, tuple(v.bucket_limit), tuple(v.bucket))
        for tag in ("layer/bias", "layer/weight")
        for e in acc.Histograms(tag)
        for v in (e.histogram_value,)
    ]
    assert [
        (r.tag, r.step, h.count, h.minimum, h.maximum, h.total, h.total_squares, h.edges[1:], h.counts)
        for r in stored
        for h in (r.histogram,)
    ] == expected

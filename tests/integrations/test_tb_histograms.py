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

"""TensorBoard histograms as the table's `Histogram` (tallyboard/histogram.py).

Two shapes reach an import:
- `HistogramProto` (TF1, torch's SummaryWriter, tensorboardX): min, max, num, sum, sum_squares,
  and buckets given by their right limits (`bucket_limit`) with their counts (`bucket`). A bucket
  spans (previous limit, its limit]; the first one's left edge is not written, so it is taken as
  min(min, first limit) -- torch and tensorboardX make that first bucket an empty one whose limit
  is the data's left edge, so nothing is lost: `bucket_limit` is exactly `edges[1:]` again.
- a "histograms" plugin tensor (TF2/Keras): rows of (left edge, right edge, count). It carries no
  min, max, sum or sum of squares: min and max are the outer edges, and the sum and sum of squares
  are estimated from the bucket centres (the best the data allows; documented in
  docs/result-table.md).
Counts are stored as integers (TensorBoard writes them as doubles; they are whole numbers).
"""

from __future__ import annotations

from typing import Any

from tallyboard.histogram import Histogram, from_buckets


def from_histogram_proto(proto: Any) -> Histogram:
    """The `Histogram` of a TensorBoard `HistogramProto`."""
    limits = tuple(float(limit) for limit in proto.bucket_limit)
    counts = tuple(round(count) for count in proto.bucket)
    count = round(proto.num)
    if not count or not limits:
        return Histogram(0, 0, None, None, 0.0, 0.0, (), ())
    edges = (min(proto.min, limits[0]), *limits)
    return Histogram(count, 0, proto.min, proto.max, proto.sum, proto.sum_squares, edges, counts)


def from_histogram_tensor(tensor: Any) -> Histogram | None:
    """The `Histogram` of a "histograms" plugin tensor of shape (k, 3); None for any other shape."""
    from tensorboard.util import tensor_util

    buckets = tensor_util.make_ndarray(tensor)
    if buckets.ndim != 2 or buckets.shape[1] != 3:
        return None
    lefts, rights, weights = (buckets[:, column].astype(float).tolist() for column in range(3))
    return from_buckets((lefts[0], *rights) if lefts else (), weights)

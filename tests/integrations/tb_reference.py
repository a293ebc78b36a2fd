"""What TensorBoard's own reader (EventAccumulator, every point kept) finds in a run directory, and
what the import stored for it, both in one shape so that tests compare them value by value.

Scalars: [(step, wall_time, value)] per tag in file order (NaN as None): TensorBoard's `Scalars`
for simple values, its `Tensors` of the "scalars" plugin (converted as its data provider does) for
tensor summaries. Images: PNG bytes per tag in order. Texts: [(step, text)] per tag (torch's
'/text_summary' suffix dropped). Histograms: [(step, count, right bucket limits, counts, (min, max,
sum, sum of squares) or None where the source has none)] per tag.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

from tallyboard.store import Store

TEXT_SUFFIX = "/text_summary"


def framed(data: bytes) -> bytes:
    """`data` as one TFRecord: length, its masked CRC32C, data, the data's masked CRC32C."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def _nan_none(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def reference(run_dir: Path) -> dict[str, Any]:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.plugins.hparams import plugin_data_pb2
    from tensorboard.util import tensor_util

    keep_all = {ea.SCALARS: 0, ea.IMAGES: 0, ea.TENSORS: 0, ea.HISTOGRAMS: 0, ea.AUDIO: 0}
    acc = ea.EventAccumulator(str(run_dir), size_guidance=keep_all)
    acc.Reload()
    tags = acc.Tags()
    out: dict[str, Any] = {"scalars": {}, "images": {}, "texts": {}, "histograms": {}, "hparams": {}}
    for tag in tags["scalars"]:
        out["scalars"][tag] = [(e.step, e.wall_time, _nan_none(e.value)) for e in acc.Scalars(tag)]
    for tag in tags["images"]:
        out["images"][tag] = [e.encoded_image_string for e in acc.Images(tag)]
    for tag in tags["histograms"]:
        out["histograms"][tag] = [
            (e.step, h.num, tuple(h.bucket_limit), tuple(h.bucket), (h.min, h.max, h.sum, h.sum_squares))
            for e in acc.Histograms(tag)
            for h in (e.histogram_value,)
        ]
    for tag in tags["tensors"]:
        plugin = acc.SummaryMetadata(tag).plugin_data.plugin_name
        events = acc.Tensors(tag)
        if plugin == "scalars":
            out["scalars"][tag] = [
                (e.step, e.wall_time, _nan_none(tensor_util.make_ndarray(e.tensor_proto).item()))
                for e in events
            ]
        elif plugin == "images":
            out["images"][tag] = [png for e in events for png in e.tensor_proto.string_val[2:]]
        elif plugin == "text":
            out["texts"][tag.removesuffix(TEXT_SUFFIX)] = [
                (e.step, "\n".join(v.decode() for v in tensor_util.make_ndarray(e.tensor_proto).reshape(-1)))
                for e in events
            ]
        elif plugin == "histograms":  # rows of (left, right, count); no min, max or sums
            out["histograms"][tag] = [
                (e.step, buckets[:, 2].sum(), tuple(buckets[:, 1]), tuple(buckets[:, 2]), None)
                for e in events
                for buckets in (tensor_util.make_ndarray(e.tensor_proto),)
            ]
    try:
        contents = acc.PluginTagToContent("hparams")
    except KeyError:
        contents = {}
    for content in contents.values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        for name, value in data.session_start_info.hparams.items():
            number = value.number_value
            kind = value.WhichOneof("kind")
            out["hparams"][name] = (
                (int(number) if number.is_integer() else number) if kind == "number_value"
                else getattr(value, kind)
            )  # fmt: skip
    return out


def stored(store: Store, run_id: int) -> dict[str, Any]:
    """The same shape, read from the table: scalars in source order (`scalar_events` for a series
    that repeats steps, else `scalars` in step order), wall times back in seconds since the epoch."""
    start = store.run(run_id).start_time
    out: dict[str, Any] = {"scalars": {}, "images": {}, "texts": {}, "histograms": {}}
    for tag in store.tag_names(run_id, "scalars"):
        events = store.scalar_events(run_id, tag)
        rows = (
            [(step, wall, value) for _, _, step, _, wall, value in events]
            if events
            else [(step, wall, value) for _, step, _, wall, value in store.scalars(run_id, tag)]
        )
        out["scalars"][tag] = [(step, start + wall / 1000, value) for step, wall, value in rows]
    for *_, tag, _, _, _, png in store.media(run_id, "image"):
        out["images"].setdefault(tag, []).append(bytes(png))
    for _, step, _, _, tag, _, content in store.texts(run_id, "text"):
        out["texts"].setdefault(tag, []).append((step, content))
    for record in store.histograms(run_id):
        h = record.histogram
        stats = (h.minimum, h.maximum, h.total, h.total_squares)
        out["histograms"].setdefault(record.tag, []).append(
            (record.step, h.count, h.edges[1:], h.counts, stats)
        )
    out["hparams"] = store.values("hparams", run_id).get(run_id, {})
    return out


def assert_same(expected: dict[str, Any], got: dict[str, Any]) -> None:
    """Every kind equal value by value; wall times to the millisecond the table keeps."""
    assert set(got["scalars"]) == set(expected["scalars"])
    for tag, points in expected["scalars"].items():
        mine = got["scalars"][tag]
        assert [(step, value) for step, _, value in mine] == [(step, value) for step, _, value in points], tag
        assert all(abs(a[1] - b[1]) <= 0.0011 for a, b in zip(mine, points, strict=True)), tag
    for kind in ("images", "texts", "hparams"):
        assert got[kind] == expected[kind], kind
    assert set(got["histograms"]) == set(expected["histograms"])
    for tag, histograms in expected["histograms"].items():  # min, max and sums where the source has them
        mine = got["histograms"][tag]
        assert [h[:4] for h in mine] == [h[:4] for h in histograms], tag
        assert all(a[4] == b[4] for a, b in zip(mine, histograms, strict=True) if b[4] is not None), tag

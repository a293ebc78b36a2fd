"""What one TensorBoard event holds, in the terms of a result table.

Every summary value becomes one `Item`: a scalar, an image, a text, hparams, a histogram (kept as
its raw protobuf bytes until the table has a histogram kind), or a skipped kind named so the import
can report it (audio, PR curves, graphs, any other plugin). The plugin of a tag is written only with
its first value in TF2 logs, so the decoder remembers it per tag, as TensorBoard does.

Scalars come in two shapes: TF1 and torch write `simple_value`; TF2/Keras and torch's
`new_style=True` write a 0-d tensor under the "scalars" plugin. Both arrive here as floats.
"""

from __future__ import annotations

from typing import Any, NamedTuple

SCALAR, IMAGE, TEXT, HPARAMS, HISTOGRAM = "scalars", "images", "texts", "hparams", "histograms"
TEXT_SUFFIX = "/text_summary"  # torch appends it to the tag the user wrote
# Event fields other than a summary: none of them is data a result table holds.
EVENT_KINDS = {
    "graph_def": "graphs",
    "meta_graph_def": "graphs",
    "tagged_run_metadata": "run metadata",
    "session_log": "session logs",
    "log_message": "log messages",
    "source_metadata": "source metadata",
}


class Item(NamedTuple):
    """One thing found in an event. `payload`: the float (None for NaN) of a scalar, PNG bytes of an
    image, the text, {name: value} of hparams, (format, bytes) of a histogram, None when skipped."""

    kind: str
    tag: str
    payload: Any


class SummaryDecoder:
    """Turns the summary values of a run's events into `Item`s, remembering each tag's plugin."""

    def __init__(self) -> None:
        self.plugins: dict[str, str] = {}

    def items(self, summary: Any) -> list[Item]:
        return [self.item(value) for value in summary.value]

    def item(self, value: Any) -> Item:
        tag = value.tag
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            number = value.simple_value
            return Item(SCALAR, tag, None if number != number else number)
        plugin = self.plugins.get(tag)
        if value.HasField("metadata"):
            plugin = value.metadata.plugin_data.plugin_name
            if plugin == "hparams":
                return Item(HPARAMS, tag, hparams_of(value.metadata.plugin_data.content))
            self.plugins.setdefault(tag, plugin)
        if kind == "image":
            return Item(IMAGE, tag, [value.image.encoded_image_string])
        if kind == "histo":
            return Item(HISTOGRAM, tag, ("HistogramProto", value.histo.SerializeToString()))
        if kind == "tensor":
            return self._tensor(tag, plugin or "", value.tensor)
        if kind == "audio":
            return Item("audio", tag, None)
        return Item(kind or "empty values", tag, None)

    def _tensor(self, tag: str, plugin: str, tensor: Any) -> Item:
        if plugin == "scalars":
            number = tensor_scalar(tensor)
            if number is None:
                return Item("scalars (not a single number)", tag, None)
            return Item(SCALAR, tag, None if number != number else number)
        if plugin == "images":  # [width, height, png, png, ...] as strings
            return Item(IMAGE, tag, list(tensor.string_val[2:]))
        if plugin == "text":
            return Item(TEXT, tag.removesuffix(TEXT_SUFFIX), text_of(tensor))
        if plugin == "histograms":
            return Item(HISTOGRAM, tag, ("TensorProto", tensor.SerializeToString()))
        return Item(plugin or "tensors without a plugin", tag, None)


# Fast paths for the two ways a scalar tensor holds its number; anything else goes through numpy.
_CONTENT_FORMATS = {1: "<f", 2: "<d", 3: "<i", 9: "<q"}


def tensor_scalar(tensor: Any) -> float | None:
    """The number in a tensor of exactly one element, as a float; None for any other tensor."""
    import struct

    if len(tensor.tensor_shape.dim) and any(dim.size != 1 for dim in tensor.tensor_shape.dim):
        return None
    if len(tensor.float_val) == 1:
        return tensor.float_val[0]
    if len(tensor.double_val) == 1:
        return tensor.double_val[0]
    fmt = _CONTENT_FORMATS.get(tensor.dtype)
    if fmt is not None and len(tensor.tensor_content) == struct.calcsize(fmt):
        return float(struct.unpack(fmt, tensor.tensor_content)[0])
    from tensorboard.util import tensor_util

    try:
        array = tensor_util.make_ndarray(tensor)
    except (TypeError, ValueError):
        return None
    if array.size != 1 or array.dtype.kind not in "biuf":
        return None
    return float(array.reshape(-1)[0])


def text_of(tensor: Any) -> str:
    """A text summary's strings joined by newlines (a table of strings becomes its rows)."""
    from tensorboard.util import tensor_util

    values = tensor_util.make_ndarray(tensor).reshape(-1)
    return "\n".join(value.decode("utf-8", "replace") for value in values)


def hparams_of(content: bytes) -> dict[str, Any]:
    """The hparams of an hparams-plugin summary (its session-start info); {} for its other parts."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = plugin_data_pb2.HParamsPluginData.FromString(content)
    if not data.HasField("session_start_info"):
        return {}
    return {name: _hparam_value(value) for name, value in data.session_start_info.hparams.items()}


def _hparam_value(value: Any) -> Any:
    """A protobuf `Value` as a Python scalar (TensorBoard stores every number as a double)."""
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None

"""Image arrays in a peer's layout turned into what `LogWriter.add_image` takes (HWC uint8).

torch.utils.tensorboard names the axes of an image (`dataformats`: 'CHW' by default, 'HWC',
'HW', 'NCHW' for a batch...) for numpy arrays and tensors alike, scales floats by 255 and clips,
and lays a batch out as one grid of up to 8 columns. W&B guesses channels-first from the shape
and stretches floats in [-1, 1] too. MLflow takes integers in [0, 255]. Each rule is here once;
NaN or infinity in an image is refused at the call, as every bad value is.
"""

from __future__ import annotations

import math
from typing import Any

GRID_COLUMNS = 8  # torch's make_grid default: up to 8 images a row


def as_array(values: Any) -> Any:
    """A numpy array of `values` (a tensor is moved to the CPU; halves widened)."""
    import numpy as np

    if type(values).__module__.split(".")[0] == "torch":
        values = values.detach().cpu()
        if values.is_floating_point():
            values = values.float()
        return values.numpy()
    return np.asarray(values)


def in_layout(values: Any, dataformats: str) -> Any:
    """The array with axes reordered from `dataformats` to HWC (NHWC when it has N); an image
    without C gets one channel."""
    import numpy as np

    array = as_array(values)
    layout = dataformats.upper()
    if len(set(layout)) != len(layout) or not set(layout) <= set("NCHW") or not {"H", "W"} <= set(layout):
        raise ValueError(f"dataformats must name the axes H and W once each (and N, C), got {dataformats!r}")
    if array.ndim != len(layout):
        raise ValueError(
            f"dataformats {dataformats!r} is for {len(layout)} axes, the image has shape {array.shape}"
        )
    if "C" not in layout:
        array, layout = array[..., np.newaxis], layout + "C"
    target = "NHWC" if "N" in layout else "HWC"
    return np.transpose(array, [layout.index(axis) for axis in target])


def scaled_like_torch(array: Any) -> Any:
    """uint8 as it is; anything else times 255 in float32, clipped to [0, 255] (torch's
    `add_image`, to the pixel)."""
    import numpy as np

    if array.dtype == np.uint8:
        return array
    _refuse_nonfinite(array)
    return (array.astype(np.float32) * np.float32(255.0)).clip(0, 255).astype(np.uint8)


def scaled_like_wandb(array: Any) -> Any:
    """Floats in [0, 1] times 255, in [-1, 1] stretched to [0, 255]; the rest clipped (W&B's rule)."""
    import numpy as np

    if array.dtype == np.uint8:
        return array
    _refuse_nonfinite(array)
    data = array.astype(np.float64)
    if np.issubdtype(array.dtype, np.floating) and data.size:
        if data.min() >= 0.0 and data.max() <= 1.0:
            data = data * 255.0
        elif data.min() >= -1.0 and data.max() <= 1.0:
            data = (data + 1.0) * 127.5
    return data.clip(0, 255).astype(np.uint8)


def grid(batch: Any) -> Any:
    """An NHWC batch as one HWC image: rows of up to GRID_COLUMNS images, black where none."""
    import numpy as np

    count, height, width, channels = batch.shape
    if not count:
        raise ValueError("a batch of images must hold at least one")
    columns = min(count, GRID_COLUMNS)
    rows = math.ceil(count / columns)
    canvas = np.zeros((rows * height, columns * width, channels), dtype=batch.dtype)
    for index in range(count):
        row, column = divmod(index, columns)
        canvas[row * height : (row + 1) * height, column * width : (column + 1) * width] = batch[index]
    return canvas


def channels_last(array: Any) -> Any:
    """A 3-axis array with channels first (1, 3 or 4 of them, and not last) as HWC; else as it is."""
    import numpy as np

    if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[-1] not in (1, 3, 4):
        return np.transpose(array, (1, 2, 0))
    return array


def _refuse_nonfinite(array: Any) -> None:
    import numpy as np

    if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
        raise ValueError("an image must not hold NaN or infinity")

"""Images, arrays, tensors and matplotlib figures turned into validated PNG bytes.

Everything a user may hand to ``add_image`` ends up here, in the training thread, so that a bad image
is an error at the call that logged it rather than a broken run discovered in the dashboard. numpy,
PIL, torch and matplotlib are never imported by this module on its own: a type is recognised only
through ``sys.modules``, because a user who passes a numpy array has already imported numpy.
"""

from __future__ import annotations

import functools
import hashlib
import io
import struct
import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS_TO_MODE = {1: "L", 3: "RGB", 4: "RGBA"}
# Modes PIL writes to PNG as they are; every other mode is converted to RGB(A) first.
_PNG_MODES = {"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"}
# The most pixels an image may have. PNG-encoding is done in the training thread and costs about
# 0.15-0.45 us a pixel (a 4096 x 4096 RGB image: 2.4-5 s at zlib level 1, measured on a loaded
# 2-core machine), so the bound keeps a call to seconds where a 100 MB image took 43 s.
MAX_IMAGE_PIXELS = 4096 * 4096
# From this many pixels PNG is written at zlib level 1 rather than 6: 1.3-1.5x faster for photos
# and noise at about 10 % more bytes (smooth images stay tiny either way); level 0 would be faster
# still but stores a smooth 2048 x 2048 image as 12.6 MB instead of 0.3 MB.
FAST_PNG_PIXELS = 1024 * 1024
FAST_PNG_LEVEL, PNG_LEVEL = 1, 6


def to_png(image: Any, max_pixels: int | None = MAX_IMAGE_PIXELS) -> tuple[bytes, int, int]:
    """Return ``(png_bytes, width, height)`` for a PIL image, PNG/JPEG bytes, a numpy array (HW or HWC
    with 1, 3 or 4 channels; uint8, or float in [0, 1]), a torch tensor (HW or CHW) or a matplotlib
    figure, of at most `max_pixels` pixels (None: any; importers keep what they read).

    Raises ``ValueError`` for bytes that do not decode as an image, for arrays of the wrong shape
    or range and for an image over `max_pixels` (before any work on it), and ``TypeError`` (naming
    the type) for anything else.
    """
    if isinstance(image, (bytes, bytearray, memoryview)):
        return _bytes_to_png(bytes(image), max_pixels)
    if _is_instance(image, "PIL.Image", "Image"):
        _check_pixels(image.width, image.height, max_pixels)
        return _pil_to_png(image)
    if _is_instance(image, "numpy", "ndarray"):
        return _array_to_png(image, max_pixels)
    if _is_instance(image, "torch", "Tensor"):
        if image.ndim >= 2:
            _check_pixels(image.shape[-1], image.shape[-2], max_pixels)  # HW or CHW: before the copy
        return _array_to_png(_tensor_to_hwc(image), max_pixels)
    if is_figure(image):
        _check_pixels(*_figure_size(image), max_pixels)
        return figure_to_png(image)
    kind = f"{type(image).__module__}.{type(image).__qualname__}"
    raise TypeError(
        f"cannot log an image of type {kind}: expected a PIL image, PNG/JPEG bytes, a numpy array "
        "(HW or HWC), a torch tensor (CHW) or a matplotlib figure"
    )


def is_figure(obj: Any) -> bool:
    """Whether `obj` is a matplotlib figure (without importing matplotlib)."""
    return _is_instance(obj, "matplotlib.figure", "Figure")


def figure_to_png(figure: Any) -> tuple[bytes, int, int]:
    """Render a matplotlib figure to PNG without touching pyplot's state (current figure, layout)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    data = buffer.getvalue()
    return (data, *png_size(data))


class OverLimit(ValueError):
    """An image of more than `MAX_IMAGE_PIXELS` pixels, refused before any work on it."""


def _check_pixels(width: int, height: int, max_pixels: int | None) -> None:
    if max_pixels is not None and width * height > max_pixels:
        raise OverLimit(
            f"an image of {width} x {height} pixels is over the limit of {max_pixels:,} pixels "
            "(4096 x 4096): encoding it would hold the training thread for many seconds; log a "
            "downscaled copy, and keep the full image with log_artifact"
        )


def _figure_size(figure: Any) -> tuple[int, int]:
    """The pixels `figure_to_png` renders: the figure's inches at savefig's dpi (or the figure's)."""
    import matplotlib

    dpi = matplotlib.rcParams["savefig.dpi"]
    dpi = figure.dpi if dpi == "figure" else dpi
    width, height = figure.get_size_inches() * dpi
    return round(width), round(height)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header (the IHDR chunk always comes first)."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _is_instance(obj: Any, module_name: str, class_name: str) -> bool:
    module = sys.modules.get(module_name)
    return module is not None and isinstance(obj, getattr(module, class_name))


def _pil() -> ModuleType:
    try:
        from PIL import Image
    except ImportError as error:  # pragma: no cover - PIL is in the media extra
        raise ImportError(
            "logging images needs Pillow: pip install 'tallyboard[media]'", name=error.name
        ) from error
    return Image


def _pil_to_png(image: Any) -> tuple[bytes, int, int]:
    if image.mode not in _PNG_MODES:
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    buffer = io.BytesIO()
    level = FAST_PNG_LEVEL if image.width * image.height >= FAST_PNG_PIXELS else PNG_LEVEL
    image.save(buffer, format="PNG", compress_level=level)
    return buffer.getvalue(), image.width, image.height


def _bytes_to_png(data: bytes, max_pixels: int | None) -> tuple[bytes, int, int]:
    """Decode fully (a truncated file fails here, not in the dashboard); PNG bytes are kept as given."""
    Image = _pil()
    try:
        with Image.open(io.BytesIO(data)) as decoded:
            _check_pixels(decoded.width, decoded.height, max_pixels)  # read from the header alone
            decoded.load()
            if decoded.format == "PNG":
                return data, decoded.width, decoded.height
            return _pil_to_png(decoded)
    except OverLimit:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise ValueError(f"image bytes ({len(data)} bytes) do not decode as an image: {error}") from error


def _tensor_to_hwc(tensor: Any) -> Any:
    """CHW (TensorBoard's layout) to HWC; half and bfloat16 are widened because numpy lacks them."""
    values = tensor.detach().cpu()
    if values.is_floating_point():
        values = values.float()
    array = values.numpy()
    if array.ndim == 3:
        if array.shape[0] not in _CHANNELS_TO_MODE:
            raise ValueError(f"a tensor image must be CHW with 1, 3 or 4 channels, got shape {array.shape}")
        array = array.transpose(1, 2, 0)
    return array


def _array_to_png(array: Any, max_pixels: int | None) -> tuple[bytes, int, int]:
    import numpy as np

    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in _CHANNELS_TO_MODE):
        raise ValueError(f"an image array must be HW or HWC with 1, 3 or 4 channels, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"an image array must not be empty, got shape {array.shape}")
    _check_pixels(array.shape[1], array.shape[0], max_pixels)
    if array.dtype == np.bool_:
        array = array.astype(np.uint8) * 255
    elif np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all() or array.min() < 0.0 or array.max() > 1.0:
            raise ValueError(
                f"a float image array must hold values in [0, 1], got [{array.min()}, {array.max()}]"
            )
        array = (array * 255.0 + 0.5).astype(np.uint8)
    elif array.dtype != np.uint8:
        raise TypeError(f"an image array must be uint8 or float in [0, 1], got dtype {array.dtype}")
    mode = "L" if array.ndim == 2 else _CHANNELS_TO_MODE[array.shape[2]]
    return _pil_to_png(_pil().fromarray(np.ascontiguousarray(array), mode=mode))


class FigureTracker:
    """Finds the open pyplot figures that are new, or have changed, since the previous call.

    A figure is compared by the hash of its rendering, so one that was redrawn after being logged is
    logged again while an untouched one never is. Figures are held through weak references: a figure
    the user closed is freed as usual.
    """

    def __init__(self) -> None:
        self._fingerprints: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()

    def changed_figures(self) -> list[tuple[Any, bytes, int, int]]:
        """Return ``(figure, png, width, height)`` for each changed open figure; never imports pyplot."""
        if "matplotlib.pyplot" not in sys.modules:
            return []
        # Gcf is pyplot's registry of open figures; unlike plt.figure(num) it does not change the
        # current figure under the user's feet.
        from matplotlib._pylab_helpers import Gcf

        changed = []
        for manager in Gcf.get_all_fig_managers():
            figure = manager.canvas.figure
            png, width, height = figure_to_png(figure)
            fingerprint = hashlib.sha256(png).digest()
            if self._fingerprints.get(figure) != fingerprint:
                self._fingerprints[figure] = fingerprint
                changed.append((figure, png, width, height))
        return changed


# pyplot.show hook --------------------------------------------------------------------------------
# One patch of pyplot.show is shared by every installed callback. If pyplot is not imported yet, a
# meta-path finder waits for it and patches it right after it loads, so that installing the hook
# never imports matplotlib itself. (Code that did `from matplotlib.pyplot import show` before the
# hook was installed keeps the unpatched function; use plt.show() or detect_and_log_figures().)

_show_callbacks: list[Callable[[], object]] = []
_show_lock = threading.Lock()
_patched: tuple[Any, Callable[..., Any], Callable[..., Any]] | None = None  # pyplot (untyped), original, ours


def install_show_hook(callback: Callable[[], object]) -> Callable[[], None]:
    """Call ``callback()`` before every ``pyplot.show()``; return a function that removes it again.

    An exception raised by the callback becomes a warning: logging must never stop a plot showing.
    """
    with _show_lock:
        _show_callbacks.append(callback)
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            _patch_show(pyplot)
        elif _WATCHER not in sys.meta_path:
            sys.meta_path.insert(0, _WATCHER)

    def uninstall() -> None:
        with _show_lock:
            if callback in _show_callbacks:
                _show_callbacks.remove(callback)
            if not _show_callbacks:
                _unpatch_show()

    return uninstall


def _run_show_callbacks() -> None:
    for callback in list(_show_callbacks):
        try:
            callback()
        except Exception as error:
            warnings.warn(f"tallyboard could not log figures before show(): {error!r}", stacklevel=3)


def _patch_show(pyplot: Any) -> None:  # matplotlib.pyplot, which has no type information
    global _patched
    if _patched is not None:
        return
    original = pyplot.show

    @functools.wraps(original)
    def show(*args: Any, **kwargs: Any) -> Any:
        _run_show_callbacks()
        return original(*args, **kwargs)

    pyplot.show = show
    _patched = (pyplot, original, show)


def _unpatch_show() -> None:
    global _patched
    if _WATCHER in sys.meta_path:
        sys.meta_path.remove(_WATCHER)
    if _patched is not None:
        pyplot, original, show = _patched
        if pyplot.show is show:
            pyplot.show = original
        _patched = None


class _PyplotImportWatcher(MetaPathFinder):
    """Lets the normal finders locate ``matplotlib.pyplot``, then patches ``show`` once it has run."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> ModuleSpec | None:
        if fullname != "matplotlib.pyplot":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


class _PatchingLoader(Loader):
    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:  # get_data, is_package, ... of the real loader
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        with _show_lock:
            if _show_callbacks:
                _patch_show(module)
            if _WATCHER in sys.meta_path:
                sys.meta_path.remove(_WATCHER)


_WATCHER = _PyplotImportWatcher()


def open_png(png: bytes) -> Any:
    """A stored PNG as a PIL image (PIL is imported only by readers that ask for images)."""
    return _pil().open(io.BytesIO(png))

"""media: everything add_image accepts becomes a PNG that decodes back to the same pixels."""

import gc
import io
import subprocess
import sys
import textwrap
import weakref

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from PIL import Image

from tallyboard.media import FigureTracker, install_show_hook, png_size, to_png


def decode(png: bytes) -> Image.Image:
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    image = Image.open(io.BytesIO(png))
    image.load()
    assert image.format == "PNG"
    return image


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def gradient(height=4, width=6, channels=3):
    return np.arange(height * width * channels, dtype=np.uint8).reshape(height, width, channels)


# --- to_png ------------------------------------------------------------------------------------


def test_pil_image_round_trips():
    original = Image.fromarray(gradient(), mode="RGB")
    png, width, height = to_png(original)
    assert (width, height) == (6, 4)
    assert np.array_equal(np.asarray(decode(png)), gradient())


def test_pil_cmyk_is_converted_to_a_png_mode():
    png, width, height = to_png(Image.new("CMYK", (3, 2), (0, 0, 0, 0)))
    assert (width, height) == (3, 2)
    assert decode(png).mode == "RGB"


def test_png_bytes_are_kept_as_they_are():
    buffer = io.BytesIO()
    Image.fromarray(gradient(channels=4), mode="RGBA").save(buffer, format="PNG")
    png, width, height = to_png(buffer.getvalue())
    assert png == buffer.getvalue()
    assert (width, height) == (6, 4)
    assert to_png(bytearray(buffer.getvalue()))[0] == png
    assert to_png(memoryview(buffer.getvalue()))[0] == png


def test_jpeg_bytes_become_png():
    buffer = io.BytesIO()
    Image.new("RGB", (8, 5), (200, 10, 10)).save(buffer, format="JPEG")
    png, width, height = to_png(buffer.getvalue())
    assert (width, height) == (8, 5)
    red, green, blue = decode(png).getpixel((4, 2))
    assert red > 180 and green < 40 and blue < 40


@pytest.mark.parametrize(
    "data",
    [b"", b"not an image at all", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40],
    ids=["empty", "text", "png-signature-only"],
)
def test_bytes_that_are_not_an_image_are_a_value_error(data):
    with pytest.raises(ValueError, match="do not decode as an image"):
        to_png(data)


def test_truncated_png_is_a_value_error():
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(
        buffer, format="PNG"
    )
    with pytest.raises(ValueError, match="do not decode as an image"):
        to_png(buffer.getvalue()[: len(buffer.getvalue()) // 2])


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_uint8_hwc_arrays(channels):
    array = gradient(channels=channels)
    png, width, height = to_png(array)
    assert (width, height) == (6, 4)
    decoded = np.asarray(decode(png))
    expected = array[:, :, 0] if channels == 1 else array
    assert np.array_equal(decoded, expected)


def test_hw_array_is_grayscale():
    array = gradient(channels=1)[:, :, 0]
    png, width, height = to_png(array)
    image = decode(png)
    assert image.mode == "L" and (width, height) == (6, 4)
    assert np.array_equal(np.asarray(image), array)


def test_float_array_in_unit_range_is_scaled_to_bytes():
    array = np.array([[0.0, 0.5, 1.0]], dtype=np.float32)
    png, _, _ = to_png(array)
    assert np.asarray(decode(png)).tolist() == [[0, 128, 255]]


def test_bool_array_is_black_and_white():
    png, _, _ = to_png(np.array([[True, False]]))
    assert np.asarray(decode(png)).tolist() == [[255, 0]]


@pytest.mark.parametrize("bad", [-0.01, 1.01, np.nan, np.inf])
def test_float_array_outside_unit_range_is_a_value_error(bad):
    array = np.zeros((2, 2), dtype=np.float64)
    array[1, 1] = bad
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        to_png(array)


@pytest.mark.parametrize("shape", [(4,), (2, 2, 2), (2, 2, 5), (1, 2, 2, 3), (0, 3)])
def test_array_of_wrong_shape_is_a_value_error(shape):
    with pytest.raises(ValueError, match="shape"):
        to_png(np.zeros(shape, dtype=np.uint8))


def test_array_of_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="int64"):
        to_png(np.zeros((2, 2), dtype=np.int64))


def test_torch_chw_tensor_is_transposed():
    hwc = gradient()
    tensor = torch.from_numpy(hwc).permute(2, 0, 1).contiguous()
    png, width, height = to_png(tensor)
    assert (width, height) == (6, 4)
    assert np.array_equal(np.asarray(decode(png)), hwc)


def test_torch_float_tensor_with_grad_and_half_precision():
    tensor = torch.full((1, 3, 2), 1.0, requires_grad=True) * 1.0
    png, width, height = to_png(tensor.half())
    assert (width, height) == (2, 3)
    assert np.asarray(decode(png)).tolist() == [[255, 255]] * 3


def test_torch_tensor_with_bad_channels_is_a_value_error():
    with pytest.raises(ValueError, match="CHW"):
        to_png(torch.zeros(2, 4, 4))


def test_matplotlib_figure():
    figure = plt.figure(figsize=(2, 1), dpi=50)
    png, width, height = to_png(figure)
    assert (width, height) == (100, 50) == decode(png).size


@pytest.mark.parametrize("value", ["image.png", 3, [[0, 1]], None])
def test_unsupported_objects_are_a_type_error_naming_the_type(value):
    with pytest.raises(TypeError, match=type(value).__qualname__):
        to_png(value)


def test_png_size_rejects_non_png():
    with pytest.raises(ValueError, match="not a PNG"):
        png_size(b"GIF89a" + b"\x00" * 30)


def test_importing_media_imports_no_heavy_package():
    code = (
        "import sys, tallyboard.media;"
        "print(sorted(m for m in ('numpy', 'PIL', 'torch', 'matplotlib') if m in sys.modules))"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "[]"


# --- FigureTracker -----------------------------------------------------------------------------


def test_new_figures_are_reported_once():
    tracker = FigureTracker()
    first = plt.figure()
    plt.plot([1, 2, 3])
    second = plt.figure()
    changed = tracker.changed_figures()
    assert [entry[0] for entry in changed] == [first, second]
    _, png, width, height = changed[0]
    assert decode(png).size == (width, height)
    assert tracker.changed_figures() == []


def test_a_changed_figure_is_reported_again():
    tracker = FigureTracker()
    figure = plt.figure()
    axes = figure.add_subplot()
    axes.plot([1, 2, 3])
    assert len(tracker.changed_figures()) == 1
    axes.plot([3, 2, 1])
    assert [entry[0] for entry in tracker.changed_figures()] == [figure]
    assert tracker.changed_figures() == []


def test_figures_are_tracked_per_tracker():
    plt.figure()
    assert len(FigureTracker().changed_figures()) == 1
    assert len(FigureTracker().changed_figures()) == 1


def test_closed_figures_are_not_kept_alive():
    tracker = FigureTracker()
    figure = plt.figure()
    plt.plot([1, 2])
    tracker.changed_figures()
    reference = weakref.ref(figure)
    plt.close(figure)
    del figure
    gc.collect()
    assert reference() is None
    assert tracker.changed_figures() == []


def test_tracking_does_not_change_the_current_figure():
    plt.figure()
    second = plt.figure()
    FigureTracker().changed_figures()
    assert plt.gcf() is second


def test_tracker_without_pyplot_imports_nothing():
    code = textwrap.dedent(
        """
        import sys
        from tallyboard.media import FigureTracker
        assert FigureTracker().changed_figures() == []
        print("matplotlib" in sys.modules)
        """
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "False"


# --- install_show_hook -------------------------------------------------------------------------


def test_show_hook_runs_before_show_and_uninstalls():
    calls = []
    uninstall = install_show_hook(lambda: calls.append(len(plt.get_fignums())))
    try:
        plt.figure()
        plt.show()
        assert calls == [1]
    finally:
        uninstall()
    plt.show()
    assert calls == [1]


def test_show_hook_restores_the_original_show_when_the_last_callback_goes():
    original = plt.show
    first = install_show_hook(lambda: None)
    second = install_show_hook(lambda: None)
    assert plt.show is not original
    first()
    assert plt.show is not original
    second()
    assert plt.show is original
    second()  # a second uninstall is harmless
    assert plt.show is original


def test_a_failing_callback_warns_and_the_plot_still_shows():
    def broken():
        raise RuntimeError("disk full")

    uninstall = install_show_hook(broken)
    try:
        with pytest.warns(UserWarning, match="disk full"):
            plt.show()
    finally:
        uninstall()


SHOW_HOOK_BEFORE_PYPLOT = textwrap.dedent(
    """
    import sys
    from tallyboard.media import FigureTracker, install_show_hook
    tracker = FigureTracker()
    logged = []
    uninstall = install_show_hook(lambda: logged.extend(f for f, *_ in tracker.changed_figures()))
    assert "matplotlib" not in sys.modules, "installing the hook imported matplotlib"
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure = plt.figure()
    plt.plot([1, 2, 3])
    plt.show()
    plt.show()
    assert logged == [figure], logged
    uninstall()
    plt.plot([3, 2, 1])
    plt.show()
    assert logged == [figure], logged
    print("ok")
    """
)


def test_show_hook_installed_before_pyplot_is_imported():
    output = subprocess.run(
        [sys.executable, "-c", SHOW_HOOK_BEFORE_PYPLOT], capture_output=True, text=True, timeout=120
    )
    assert output.returncode == 0, output.stderr
    assert output.stdout.strip() == "ok"


OVER_LIMIT = {  # each input type, one pixel column over 4096 x 4096
    "array": lambda: np.broadcast_to(np.uint8(0), (4096, 4097)),  # a view: no 16 MB allocated
    "tensor": lambda: torch.zeros(1, 4096, 4097, dtype=torch.uint8),
    "pil": lambda: Image.new("1", (4097, 4096)),
    "png bytes": lambda: _png_bytes(Image.new("1", (4097, 4096))),
    "figure": lambda: plt.figure(figsize=(40.97, 40.96), dpi=100),
}


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("kind", OVER_LIMIT)
def test_an_image_over_the_pixel_limit_is_refused_before_any_encoding(kind):
    """A 100 MB image spent 43 s PNG-encoding in the training thread: beyond MAX_IMAGE_PIXELS it
    is a ValueError naming its size, at once."""
    with pytest.raises(ValueError, match=r"4097 x 4096 pixels is over the limit of 16,777,216 pixels"):
        to_png(OVER_LIMIT[kind]())


def test_an_image_at_the_limit_is_logged_and_importers_keep_any_size():
    assert to_png(Image.new("1", (4096, 4096)))[1:] == (4096, 4096)
    assert to_png(_png_bytes(Image.new("1", (4097, 4096))), max_pixels=None)[1:] == (4097, 4096)


def _zlib_level(png: bytes) -> int:
    """FLEVEL of the first IDAT's zlib header: 0 fastest (level 1), 2 default (level 6)."""
    idat = png.index(b"IDAT") + 4
    return png[idat + 1] >> 6


def test_large_images_are_compressed_fast_small_ones_well():
    assert _zlib_level(to_png(np.zeros((1024, 1024), np.uint8))[0]) == 0
    assert _zlib_level(to_png(np.zeros((1023, 1024), np.uint8))[0]) == 2

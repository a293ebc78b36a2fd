"""Histograms: what add_histogram stores is what numpy says about the same values, on both engines,
for numpy arrays, torch tensors and plain sequences; bad input is refused at the call."""

import json
import sqlite3

import numpy as np
import pytest
import torch

import tallyboard as tb
from run.test_quarantine import refuse
from tallyboard.exchange.export import export_table
from tallyboard.exchange.formats import FORMATS
from tallyboard.exchange.reimport import import_export
from tallyboard.histogram import MAX_BINS, pack_floats, pack_ints, summarise, unpack_floats, unpack_ints
from tallyboard.run.exit_paths import end_runs


@pytest.fixture
def table(db_url):
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP, commit_interval=0.05) as table:
        yield table
        end_runs("failed")


def expected(values: np.ndarray, bins: int):
    finite = values[np.isfinite(values)].astype(np.float64)
    counts, edges = np.histogram(finite, bins=bins)
    return finite, counts, edges


def assert_matches_numpy(histogram, values: np.ndarray, bins: int) -> None:
    finite, counts, edges = expected(values, bins)
    assert histogram.count == finite.size
    assert histogram.nonfinite == values.size - finite.size
    assert histogram.minimum == finite.min() and histogram.maximum == finite.max()
    assert histogram.total == pytest.approx(finite.sum(), rel=1e-9, abs=1e-9)
    assert histogram.total_squares == pytest.approx(np.dot(finite, finite), rel=1e-5)
    assert histogram.edges == pytest.approx(edges, rel=1e-12, abs=1e-12)
    assert sum(histogram.counts) == finite.size
    # float32 values on a bucket edge may land on either side of it: allow a handful to move
    assert np.abs(np.array(histogram.counts) - counts).sum() <= 4


def test_values_round_trip_for_numpy_torch_and_lists(table):
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(300, 200)).astype(np.float32)
    grads = rng.standard_t(3, size=5000)
    ints = rng.integers(-50, 50, size=777)
    run = table.new_run("hist")
    run.add_histogram("weights", weights, step=1, epoch=0)
    run.add_histogram("weights", torch.from_numpy(weights * 2).requires_grad_(), step=2, bins=10)
    run.add_histogram("grads", grads.tolist(), step=1, bins=30)
    run.add_histogram("ints", ints, step=5)
    run.add_histogram("ints", torch.from_numpy(ints), step=6)
    run.flush()

    stored = table.load_run(run.run_id).get_histograms()
    assert [(h.tag, h.step, h.epoch, h.run_rep) for h in stored] == [
        ("grads", 1, None, 0), ("ints", 5, None, 0), ("ints", 6, None, 0),
        ("weights", 1, 0, 0), ("weights", 2, None, 0),
    ]  # fmt: skip
    assert_matches_numpy(stored[0].histogram, grads, 30)
    assert_matches_numpy(stored[1].histogram, ints.astype(np.float64), 64)
    assert stored[2].histogram == stored[1].histogram
    assert_matches_numpy(stored[3].histogram, weights.ravel(), 64)
    assert_matches_numpy(stored[4].histogram, (weights * 2).ravel(), 10)
    assert [h.step for h in run.get_histograms("weights")] == [1, 2]
    assert run.get_histograms("missing") == []


def test_nan_and_inf_are_counted_apart(table):
    values = np.array([1.0, np.nan, 2.0, np.inf, -np.inf, 3.0], dtype=np.float32)
    run = table.new_run("hist")
    run.add_histogram("x", values, bins=2)
    run.add_histogram("x", torch.from_numpy(values), step=1, bins=2)
    run.add_histogram("x", values.tolist(), step=2, bins=2)
    run.add_histogram("x", [np.nan, np.inf], step=3)
    run.add_histogram("x", [], step=4)
    run.add_histogram("x", [7, 7, 7], step=5)
    run.flush()
    first, *others, all_bad, empty, constant = [h.histogram for h in run.get_histograms("x")]
    assert (first.count, first.nonfinite, first.minimum, first.maximum) == (3, 3, 1.0, 3.0)
    assert (first.total, first.total_squares, first.edges, first.counts) == (
        6.0,
        14.0,
        (1.0, 2.0, 3.0),
        (1, 2),
    )
    assert others == [first, first]
    assert all_bad == tb.Histogram(0, 2, None, None, 0.0, 0.0, (), ())
    assert empty == tb.Histogram(0, 0, None, None, 0.0, 0.0, (), ())
    assert (constant.edges, constant.counts, constant.minimum) == ((7.0, 7.0), (3,), 7.0)


@pytest.mark.parametrize(
    ("values", "error", "message"),
    [
        ("abc", TypeError, "cannot log a histogram of str"),
        (42, TypeError, "cannot log a histogram of int"),
        ([1, "2"], TypeError, "must be numbers, got str"),
        ([1, True], TypeError, "must be numbers, got bool"),
        (np.array(["a"]), TypeError, "dtype <U1"),
        (torch.zeros(3, dtype=torch.complex64), TypeError, "complex"),
    ],
)
def test_bad_values_are_refused_at_the_call(table, values, error, message):
    run = table.new_run("hist")
    with pytest.raises(error, match=message):
        run.add_histogram("x", values)
    run.flush()
    assert run.get_histograms() == []


def test_bad_tag_and_bins_are_refused(table):
    run = table.new_run("hist")
    for tag in ("", None, 3, "a\x00b"):
        with pytest.raises((TypeError, ValueError)):
            run.add_histogram(tag, [1.0])
    for bins, error in ((0, ValueError), (MAX_BINS + 1, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="bins"):
            run.add_histogram("x", [1.0], bins=bins)
    run.flush()
    assert run.get_histograms() == []


def test_histogram_the_database_rejects_is_quarantined(table, db_url):
    refuse(db_url, "histograms", "step", "13")
    run = table.new_run("hist")
    run.add_histogram("x", [1.0, 2.0], step=12)
    run.add_histogram("x", [1.0, 2.0], step=13, bins=2)
    run.add_histogram("x", [1.0, 2.0], step=14)
    run.flush()
    assert [h.step for h in run.get_histograms()] == [12, 14]
    (set_aside,) = table.quarantined(run.run_id)
    record = json.loads(set_aside.record)
    assert (set_aside.kind, set_aside.tag, record["step"], record["counts"]) == ("histogram", "x", 13, [1, 1])


def test_blobs_are_plain_little_endian_arrays():
    assert pack_floats((1.0, -2.5)) == np.array([1.0, -2.5], dtype="<f8").tobytes()
    assert pack_ints((3, -4)) == np.array([3, -4], dtype="<i8").tobytes()
    assert unpack_floats(pack_floats((0.5,))) == (0.5,)
    assert unpack_ints(pack_ints((2**40,))) == (2**40,)


def test_stored_without_pickle(tmp_path):
    url = str(tmp_path / "r.db")
    table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("hist")
    run.add_histogram("x", [0.0, 1.0, 1.0], bins=2, flush=True)
    with sqlite3.connect(url) as conn:
        edges, counts = conn.execute("SELECT edges, counts FROM histograms").fetchone()
    assert np.frombuffer(edges, "<f8").tolist() == [0.0, 0.5, 1.0]
    assert np.frombuffer(counts, "<i8").tolist() == [1, 2]
    end_runs("finished")


def test_summarise_half_and_bfloat16_tensors():
    values = torch.linspace(-1, 1, 101)
    for dtype in (torch.float16, torch.bfloat16, torch.int32, torch.bool):
        histogram = summarise(values.to(dtype), bins=4)
        assert histogram.count == 101 and sum(histogram.counts) == 101


def logged_histograms(url: str) -> list:
    table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
    try:
        return [
            (r.tag, r.run_rep, r.step, r.epoch, r.walltime, r.histogram)
            for r in table.load_run(1).get_histograms()
        ]
    finally:
        table.close()


@pytest.mark.parametrize("file_format", FORMATS)
def test_export_and_import_carry_histograms(db_url, tmp_path, file_format):
    source = str(tmp_path / "source.db")
    table = tb.ResultTable(source, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("hist", auto_log_plt=False) as run:
        run.add_histogram("w", np.random.default_rng(2).normal(size=999), step=3, epoch=1, bins=7)
        run.add_histogram("w", [np.nan, np.inf], step=4)
        run.new_repetition()
        run.add_histogram("b", [0.1, 0.1], step=0)
    table.close()
    first, second = tmp_path / "first", tmp_path / "second"
    counts = export_table(source, first, file_format)
    assert counts["histograms"] == 3
    assert "imported 1 runs" in import_export(first, db_url)
    assert logged_histograms(db_url) == logged_histograms(source)
    export_table(db_url, second, file_format)
    assert (first / f"histograms.{file_format}").read_bytes() == (
        second / f"histograms.{file_format}"
    ).read_bytes()


def test_an_export_written_before_histograms_imports(tmp_path):
    source = str(tmp_path / "source.db")
    table = tb.ResultTable(source, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("old", auto_log_plt=False) as run:
        run.add_scalar("loss", 1.0)
    table.close()
    export_table(source, tmp_path / "old", "csv")
    (tmp_path / "old" / "histograms.csv").unlink()
    assert "imported 1 runs" in import_export(tmp_path / "old", str(tmp_path / "into.db"))


def test_the_on_device_torch_path_agrees_with_numpy(monkeypatch):
    """The kernels a CUDA tensor goes through (aminmax, histc, sums on the device), run here on the
    CPU by taking numpy away, give numpy's summary of the same values."""
    values = torch.randn(100_000, dtype=torch.float64) * 3
    values[::997] = float("nan")
    values[5] = float("inf")
    through_numpy = summarise(values, bins=50)
    monkeypatch.setattr("tallyboard.histogram._numpy_available", lambda: False)
    on_device = summarise(values, bins=50)
    assert (on_device.count, on_device.nonfinite) == (through_numpy.count, through_numpy.nonfinite)
    assert (on_device.minimum, on_device.maximum) == (through_numpy.minimum, through_numpy.maximum)
    assert on_device.total == pytest.approx(through_numpy.total, rel=1e-12)
    assert on_device.total_squares == pytest.approx(through_numpy.total_squares, rel=1e-12)
    assert on_device.edges == through_numpy.edges
    assert np.abs(np.array(on_device.counts) - through_numpy.counts).sum() <= 4
    assert summarise(torch.full((4,), 2.0), bins=3).counts == (4,)
    assert summarise(torch.tensor([float("nan")])).count == 0


def test_the_bounded_queue_counts_a_histograms_bytes():
    """What crosses the queue is flat with its buckets packed, so `record_bytes` sees its size."""
    from tallyboard.run.sink import record_bytes
    from tallyboard.store.histograms import queued_row

    small = queued_row(1, "x", 0, 0, None, 0.0, summarise(np.arange(100.0), bins=4))
    large = queued_row(1, "x", 0, 0, None, 0.0, summarise(np.arange(100.0), bins=MAX_BINS))
    assert record_bytes(large) - record_bytes(small) >= (MAX_BINS - 4) * 16

"""LogWriter through a real result table: what is logged is what is read back, bad input loses nothing."""

import decimal
import math
from array import array

import numpy as np
import pytest
import torch

import tallyboard as tb
from tallyboard.run import sink as sink_module
from tallyboard.run import writer as writer_module
from tallyboard.run.exit_paths import end_runs


@pytest.fixture
def table(db_url):
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        yield table
        end_runs("failed")  # a run a test left open must not outlive its database


@pytest.fixture
def run(table):
    with table.new_run("exp", auto_log_plt=False) as writer:
        yield writer


def values(writer, tag):
    writer.flush()
    return [(s.run_rep, s.step, s.value) for s in writer.get_scalar(tag)]


def test_scalars_get_auto_steps_per_tag_and_keep_slashes_in_tags(run):
    for value in (1.0, 2.0):
        run.add_scalar("train/loss", value)
    run.add_scalar("val/acc/top1", 0.5)
    assert values(run, "train/loss") == [(0, 0, 1.0), (0, 1, 2.0)]
    record = run.get_scalar("val/acc/top1")[0]
    assert (record.split, record.label, record.tag, record.step) == ("val", "acc/top1", "val/acc/top1", 0)
    assert run.scalars == ["train/loss", "val/acc/top1"]


@pytest.mark.parametrize(
    "value",
    [
        3,
        True,
        np.float32(0.25),
        np.int64(7),
        np.array(1.5),
        np.array([2.5]),
        torch.tensor(4.0),
        decimal.Decimal("1.5"),
        "1.5",  # a numeric string, as DeepBoard takes it
    ],
)
def test_numbers_of_every_kind_are_stored_as_floats(run, value):
    run.add_scalar("x", value)
    run.flush()
    (stored,) = run.get_scalar("x")
    assert stored.value == float(np.asarray(value).reshape(()).item() if hasattr(value, "shape") else value)


@pytest.mark.parametrize(
    "value", ["fast", b"1.0", None, [1.0], np.array([1.0, 2.0]), torch.ones(2), 1 + 2j, object()]
)
def test_a_non_number_is_a_type_error_naming_the_tag_and_writes_nothing(run, value):
    run.add_scalar("good", 1.0)
    with pytest.raises(TypeError, match="'bad/tag'"):
        run.add_scalar("bad/tag", value)
    assert values(run, "bad/tag") == []
    assert values(run, "good") == [(0, 0, 1.0)]


def test_nan_and_infinities_round_trip(run):
    for value in (math.nan, math.inf, -math.inf):
        run.add_scalar("x", value)
    read = [v for _, _, v in values(run, "x")]
    assert math.isnan(read[0]) and read[1:] == [math.inf, -math.inf]
    arrays = run.get_scalar_arrays("x", columns=("rep", "step", "epoch", "walltime", "value"))
    assert list(arrays["step"]) == [0, 1, 2] and list(arrays["epoch"]) == [-1, -1, -1]
    assert arrays["step"].dtype == np.int64 and arrays["walltime"].dtype == np.float64
    assert np.isnan(arrays["value"][0]) and list(arrays["value"][1:]) == [math.inf, -math.inf]


def test_explicit_step_epoch_and_walltime_are_kept(run):
    run.add_scalar("x", 1.0, step=10, epoch=2, walltime=12.345)
    run.flush()
    (record,) = run.get_scalar("x")
    assert (record.step, record.epoch, record.wall_time) == (10, 2, 12.345)


@pytest.mark.parametrize(("walltime", "kept"), [(1.003, 1.003), (12.3456, 12.346), (12.3454, 12.345)])
def test_a_given_walltime_is_kept_to_the_nearest_millisecond(run, walltime, kept):
    run.add_scalar("x", 1.0, walltime=walltime)
    run.flush()
    assert run.get_scalar("x")[0].wall_time == kept
    assert run.get_scalar_arrays("x", columns=("walltime",))["walltime"].tolist() == [kept]


@pytest.mark.parametrize(
    ("walltime", "error"),
    [
        (math.inf, ValueError),
        (-math.inf, ValueError),
        (math.nan, ValueError),
        (1e300, ValueError),  # finite, but its milliseconds overflow the database's 64-bit integer
        ("12.5", TypeError),
        ([1.0], TypeError),
        (object(), TypeError),
        (torch.ones(2), TypeError),
    ],
)
def test_a_bad_walltime_is_refused_at_the_call_and_the_run_keeps_working(run, walltime, error):
    run.add_scalar("good", 1.0)
    with pytest.raises(error, match=r"'bad/tag'.*walltime"):
        run.add_scalar("bad/tag", 1.0, walltime=walltime)
    run.add_scalar("good", 2.0)
    run.add_scalar("bad/tag", 3.0)
    assert values(run, "good") == [(0, 0, 1.0), (0, 1, 2.0)]  # the commit went through
    assert values(run, "bad/tag") == [(0, 0, 3.0)]  # the refused call took no step


def test_walltime_is_seconds_since_the_repetition_started(run, monkeypatch):
    now = [run._rep_start + 2.5]
    monkeypatch.setattr(writer_module, "_clock", lambda: now[0])
    run.add_scalar("x", 1.0)
    run.new_repetition()
    now[0] += 0.25
    run.add_scalar("x", 2.0)
    run.flush()
    assert [s.wall_time for s in run.get_scalar("x")] == [2.5, 0.25]


def test_bad_step_or_epoch_is_a_type_error(run):
    with pytest.raises(TypeError, match="step"):
        run.add_scalar("x", 1.0, step=1.5)
    with pytest.raises(TypeError, match="epoch"):
        run.add_scalar("x", 1.0, epoch="one")
    assert values(run, "x") == []


def position_calls(run, number):
    """Every way a step or an epoch reaches a record, each with `number`."""
    return (
        lambda: run.add_scalar("x", 1.0, step=number),
        lambda: run.add_scalar("x", 1.0, epoch=number),
        lambda: run.add_text("t", step=number),
        lambda: run.add_fragment("<b>f</b>", epoch=number),
    )


@pytest.mark.parametrize("number", [2**63, -(2**63) - 1, np.uint64(2**63)])
def test_a_step_or_epoch_beyond_64_bits_is_refused_at_the_call_and_the_run_keeps_working(run, number):
    for call in position_calls(run, number):
        with pytest.raises(ValueError, match="64-bit"):
            call()
    run.add_scalar("x", 1.0, step=2**62, epoch=-(2**63))  # within 64 bits: fine
    assert values(run, "x") == [(0, 2**62, 1.0)]


@pytest.mark.parametrize("flag", [True, False, np.True_])
def test_bools_are_not_steps_or_epochs(run, flag):
    """True would silently be step 1."""
    for call in position_calls(run, flag):
        with pytest.raises(TypeError, match=r"step|epoch"):
            call()
    assert values(run, "x") == [] and run.get_text() == [] and run.get_fragment() == []
    assert run.get_text() == []


def test_keep_each_keeps_every_nth_call_with_its_real_step(table):
    with table.new_run("keep", keep_each=3, auto_log_plt=False) as writer:
        for i in range(7):
            writer.add_scalar("x", float(i))
        assert values(writer, "x") == [(0, 0, 0.0), (0, 3, 3.0), (0, 6, 6.0)]


def test_repetitions_restart_steps_and_are_filtered_on_read(run):
    run.add_scalar("x", 1.0)
    run.new_repetition()
    run.add_scalar("x", 2.0)
    run.add_text("t")
    assert values(run, "x") == [(0, 0, 1.0), (1, 0, 2.0)]
    assert run.get_repetitions() == [0, 1]
    assert [s.value for s in run.get_scalar("x", repetition=1)] == [2.0]
    assert run.get_text(repetition=1)[0]["run_rep"] == 1
    assert list(run.get_scalar_arrays("x", repetition=0)["value"]) == [1.0]


def test_images_texts_and_fragments_round_trip(run):
    pixels = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    run.add_image(pixels, tag="samples", step=3, epoch=1)
    run.add_text("plain <b>text</b>", tag="notes")
    run.add_fragment("<table></table>")
    run.flush()
    (image,) = run.get_images(tag="samples")
    assert (image["step"], image["epoch"], image["tag"], image["width"], image["height"]) == (
        3,
        1,
        "samples",
        2,
        2,
    )
    assert np.array_equal(np.asarray(image["image"]), pixels)
    assert run.get_images(step=4) == [] and run.get_figures() == []
    assert run.get_text()[0]["fragment"] == "plain <b>text</b>"
    fragment = run.get_fragment()[0]
    assert (fragment["fragment"], fragment["tag"]) == ("<table></table>", None)


def test_bad_images_and_texts_raise_at_the_call(run):
    with pytest.raises(ValueError):
        run.add_image(b"not an image")
    with pytest.raises(TypeError):
        run.add_image({"an": "image"})
    with pytest.raises(TypeError, match="str"):
        run.add_text(b"bytes")
    run.flush()
    assert run.get_images() == [] and run.get_text() == []


def test_hparams_take_json_scalars_and_numpy_scalars(run):
    run.add_hparams({"lr": np.float32(0.5)}, layers=np.int64(3), name="resnet", pretrained=True, seed=None)
    run.flush()
    assert run.get_hparams() == {"lr": 0.5, "layers": 3, "name": "resnet", "pretrained": True, "seed": None}


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, object()])
def test_hparams_refuse_containers_and_write_nothing(run, value):
    with pytest.raises(TypeError, match=r"json\.dumps"):
        run.add_hparams(ok=1, bad=value)
    run.flush()
    assert run.get_hparams() == {}


def test_an_hparam_named_like_a_run_column_is_an_hparam_and_shadows_nothing(table, run):
    run.add_hparams(experiment="x", status="fine")
    assert run.get_hparams() == {"experiment": "x", "status": "fine"}
    row = table.get_experiment_raw(run.run_id)
    assert (row["experiment"], row["status"]) == ("exp", "running")


def test_write_result_finishes_and_makes_the_writer_read_only(table, run):
    run.add_scalar("x", 1.0)
    run.write_result(accuracy=0.9)
    assert run.status == "finished"
    assert table.get_results().data[0][-1] == 0.9
    for call in (lambda: run.add_scalar("x", 1.0), lambda: run.write_result(a=1), lambda: run.add_text("t")):
        with pytest.raises(RuntimeError, match="read-only"):
            call()
    assert values(run, "x") == [(0, 0, 1.0)]


def test_leaving_the_with_block_by_an_exception_marks_the_run_failed(table):
    with pytest.raises(KeyError), table.new_run("boom", auto_log_plt=False) as writer:
        writer.add_scalar("x", 1.0)
        raise KeyError("x")
    assert writer.status == "failed"
    assert table.load_run(writer.run_id).get_scalar("x")[0].value == 1.0


def test_a_status_set_explicitly_survives_close_and_the_with_block(table):
    failed = table.new_run("gave up", auto_log_plt=False)
    failed.set_status("failed")
    failed.close()
    assert table.load_run(failed.run_id).status == "failed"
    with table.new_run("also gave up", auto_log_plt=False) as writer:
        writer.set_status("failed")
    assert writer.status == "failed"
    resumed = table.new_run("changed its mind", auto_log_plt=False)
    resumed.set_status("failed")
    resumed.set_status("running")  # not an end state: close() still finishes the run
    resumed.close()
    assert resumed.status == "finished"


def test_close_ends_the_run_with_the_status_given(table):
    writer = table.new_run("stopped", auto_log_plt=False)
    writer.add_scalar("x", 1.0)
    with pytest.raises(ValueError, match="status"):
        writer.close(status="running")
    writer.close(status="failed")
    assert writer.status == "failed"
    assert table.load_run(writer.run_id).get_scalar("x")[0].value == 1.0
    writer.close(status="finished")  # a second close is a no-op
    assert writer.status == "failed"


def test_run_fields_note_tag_color_status(run):
    run.set_note("a note")
    run.set_tag("baseline")
    run.set_color("FF0000")
    run.flush()
    assert (run.tag, run.color) == ("baseline", "FF0000")  # as DeepBoard: no '#', its case kept
    with pytest.raises(ValueError):
        run.set_color("red")
    with pytest.raises(ValueError):
        run.set_status("done")


def test_a_disabled_writer_writes_nothing_and_raises_nothing(table, db_url):
    writer = table.new_run("off", disable=True)
    writer.add_scalar("x", "not even a number")
    writer.add_image(b"junk")
    writer.add_hparams(bad=[1])
    writer.write_result(a=1)
    writer.write_result(a=2)
    writer.set_note("n")
    writer.close()
    assert table.runs == []


def test_a_loaded_run_is_read_only_but_its_note_can_be_edited(table, run):
    run.add_scalar("x", 1.0)
    run.close()
    loaded = table.load_run(run.run_id)
    with pytest.raises(RuntimeError, match="read-only"):
        loaded.add_scalar("x", 2.0)
    loaded.set_note("looked at it")
    assert table.get_experiment_raw(run.run_id)["note"] == "looked at it"
    assert [s.value for s in loaded["x"]] == [1.0]


def test_figures_are_logged_once_until_they_change(run):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure()
    plt.plot([1, 2, 3])
    run.detect_and_log_figures(tag="curves")
    run.detect_and_log_figures(tag="curves")
    plt.plot([3, 2, 1])
    run.detect_and_log_figures(tag="curves", close_figs=True)
    run.flush()
    assert len(run.get_figures(tag="curves")) == 2
    assert not plt.fignum_exists(figure.number)


def test_auto_log_plt_logs_figures_when_plt_show_is_called_and_stops_at_close(table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    writer = table.new_run("plots")  # auto_log_plt=True is the default
    plt.figure()
    plt.plot([1, 2, 3])
    plt.show()
    writer.close()
    plt.show()  # after close: the hook is gone, nothing is logged and nothing raises
    plt.close("all")
    assert len(writer.get_figures()) == 1


def test_a_series_outgrowing_the_queue_waits_for_a_commit_and_loses_nothing(run):
    run._sink.max_queue_bytes = int(10 * sink_module.ROW_BYTES / sink_module.SCALAR_SHARE) + 1  # 10 rows
    for step in range(95):
        run.add_scalar("x", float(step))
    assert len(run._series["x"]) < 10  # the writer thread committed along the way
    assert [step for _, step, _ in values(run, "x")] == list(range(95))


def test_a_figure_shown_is_not_logged_again_by_detect_and_log_figures(table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with table.new_run("once") as writer:
        plt.figure()
        plt.plot([1, 2])
        plt.show()
        writer.detect_and_log_figures()
        plt.close("all")
    assert len(writer.get_figures()) == 1


def test_a_loaded_run_refuses_every_logging_call_a_writer_has(table, run):
    from tallyboard.run.view import LOGGING_METHODS, RunView
    from tallyboard.run.writer import LogWriter

    run.close()
    loaded = table.load_run(run.run_id)
    assert type(loaded) is RunView and loaded.enabled is False
    for name in sorted(LOGGING_METHODS):
        assert callable(getattr(LogWriter, name)), name
        with pytest.raises(RuntimeError, match="read-only"):
            getattr(loaded, name)("x")
    with pytest.raises(AttributeError):
        loaded.no_such_method  # noqa: B018


def test_a_step_logged_again_among_the_queued_columns_keeps_its_last_value(run):
    """The columns a take hands over hold both points of step 3; the store keeps the later one."""
    for step, value in ((0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0), (3, 40.0), (4, 5.0), (1, 20.0)):
        run.add_scalar("x", value, step=step)
    assert values(run, "x") == [(0, 0, 1.0), (0, 1, 20.0), (0, 2, 3.0), (0, 3, 40.0), (0, 4, 5.0)]


def test_nan_and_infinities_come_back_exactly_and_sparse_epochs_stay_where_logged(run):
    run.add_scalar("x", 1.0, step=0)
    run.add_scalar("x", math.nan, step=1, epoch=7)  # the series' first epoch: its column starts here
    run.add_scalar("x", math.inf, step=2)
    run.add_scalar("x", -math.inf, step=3, epoch=8)
    run.flush()
    got = run.get_scalar("x")
    assert [s.epoch for s in got] == [None, 7, None, 8]
    assert got[0].value == 1.0 and math.isnan(got[1].value)
    assert [s.value for s in got[2:]] == [math.inf, -math.inf]


def test_a_new_repetition_starts_new_columns_and_queued_points_keep_their_repetition(run):
    run.add_scalar("x", 1.0)
    run.add_scalar("x", 2.0)
    run.new_repetition()  # before any commit: rep 0's columns are still queued
    run.add_scalar("x", 3.0)
    assert values(run, "x") == [(0, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0)]
    assert run.global_step == {"x": 1}


def test_a_point_half_appended_when_an_exception_strikes_is_dropped_and_the_columns_stay_aligned(run):
    """An exception between two columns' appends (a signal's, say) leaves no orphan behind."""
    run.add_scalar("x", 1.0, step=0)
    series = run._series["x"]

    class Interrupting(array):
        def append(self, value):
            raise KeyboardInterrupt

    values_column = series.values
    series.values = Interrupting("d", values_column)  # the step and walltime go in, then the value fails
    with pytest.raises(KeyboardInterrupt):
        run.add_scalar("x", 2.0, step=1)
    series.values = values_column
    assert len(series.steps) == len(series.walltimes) == len(series.values)
    run.add_scalar("x", 3.0, step=2)
    assert values(run, "x") == [(0, 0, 1.0), (0, 2, 3.0)]


def test_a_step_beyond_int64_is_refused_before_anything_is_queued_or_counted(run):
    run.add_scalar("x", 1.0)
    with pytest.raises(ValueError, match="64-bit"):
        run.add_scalar("x", 2.0, step=2**63)
    run.add_scalar("x", 3.0)  # the refused call took no auto step
    assert values(run, "x") == [(0, 0, 1.0), (0, 1, 3.0)]

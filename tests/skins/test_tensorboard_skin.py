"""`from tallyboard.tensorboard import SummaryWriter`, held to torch's own writer.

The differential test runs scripts/tensorboard_training.py twice: with torch.utils.tensorboard
(its event files then imported by `tallyboard import tensorboard`) and with only the import line
changed. Both tables must hold the same scalars, images (to the pixel), texts, histogram summaries,
hparams and results. The other tests cover what torch's writer does that a table does differently.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import tallyboard as tb
from skins.peer_scripts import SCRIPTS, run_script, with_import
from tallyboard.integrations.tensorboard_import import import_logdir
from tallyboard.run.exit_paths import end_runs
from tallyboard.skins import NotStoredWarning
from tallyboard.tensorboard import SummaryWriter

TORCH_IMPORT = "from torch.utils.tensorboard import SummaryWriter"
SKIN_IMPORT = "from tallyboard.tensorboard import SummaryWriter"
FAR_FUTURE = 4e9  # an import clock this late finds every file quiet


def contents(url: str) -> dict[str, Any]:
    """What the table's one run holds, in a shape `==` compares (floats to float32, NaN as 'nan')."""
    with tb.ResultTable(url, read_only=True) as table:
        [run_id] = table.runs
        run = table.load_run(run_id)
        return {
            "scalars": {tag: [(s.step, _f32(s.value)) for s in run.get_scalar(tag)] for tag in run.scalars},
            "images": {(i["tag"], i["step"]): _pixels(i["image"]) for i in run.get_images()},
            "texts": {(t["tag"], t["step"]): t["fragment"] for t in run.get_text()},
            "histograms": {
                (h.tag, h.step): (h.histogram.count, _f32(h.histogram.minimum), _f32(h.histogram.maximum),
                                  round(h.histogram.total, 4))
                for h in run.get_histograms()
            },
            "hparams": run.get_hparams(),
            "results": {name: _f32(value) for name, value in _results(table)},
            "walltimes": [s.wall_time for s in run.get_scalar("lr")],
        }  # fmt: skip


def _pixels(image: Any) -> list[Any]:
    """An image's pixels as RGB (torch writes grey images as RGB, the skin as grey)."""
    return np.asarray(image.convert("RGB")).tolist()


def _results(table: tb.ResultTable) -> Any:
    return table.query(backend="records")[0].results.items()


def _f32(value: float | None) -> Any:
    """TensorBoard keeps scalars as float32: compare at that precision."""
    if value is None or math.isnan(value):
        return "nan"
    return float(np.float32(value))


@pytest.fixture(scope="module")
def torch_logged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("torch")
    run_script(SCRIPTS / "tensorboard_training.py", folder / "runs" / "exp", cwd=folder)
    report = import_logdir(folder / "runs", folder / "imported.db", clock=lambda: FAR_FUTURE)
    logged = contents(str(folder / "imported.db"))
    logged["skipped"] = dict(report.tally.skipped)
    return logged


def test_the_same_script_logs_the_same_as_torchs_writer(torch_logged, db_url, tmp_path: Path):
    script = with_import("tensorboard_training.py", TORCH_IMPORT, SKIN_IMPORT, tmp_path)
    done = run_script(script, tmp_path / "runs" / "exp", table=db_url, cwd=tmp_path)
    ours = contents(db_url)
    assert set(ours["scalars"]) == set(torch_logged["scalars"]) == {
        "Loss/train", "Loss/train_tensor", "train/Error", "val/Error", "lr", "odd",
    }  # fmt: skip
    for key in ("scalars", "images", "texts", "histograms", "hparams", "results"):
        assert ours[key] == torch_logged[key], key
    assert np.diff(ours["walltimes"]).tolist() == np.diff(torch_logged["walltimes"]).tolist() == [2.0] * 29
    assert torch_logged["skipped"] == {"graphs": 1, "run metadata": 1}  # what add_graph writes
    assert done.stderr.count("add_graph is not stored") == 1
    with tb.ResultTable(db_url, read_only=True) as table:
        run = table.load_run(1)
        assert (table.get_experiment_raw(1)["experiment"], run.status) == ("runs", "finished")
        assert [line.line for line in run.get_console()] == [
            "tallyboard.tensorboard: not stored in this run: add_graph x1"
        ]
    assert not (tmp_path / "runs").exists()  # no event files: the table is the log


@pytest.fixture
def table(tmp_path: Path):
    with tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP) as table:
        yield table
        end_runs("failed")


def test_a_writer_is_a_run_named_after_its_folder(table):
    with SummaryWriter("logs/mnist/lr=0.1", table=table) as writer:
        writer.add_scalar("loss", 1.0)
        assert writer.get_logdir() == "logs/mnist/lr=0.1"
    defaulted = SummaryWriter(comment="_bs64", table=table)
    defaulted.close()
    raw = [table.get_experiment_raw(run_id) for run_id in table.runs]
    assert [(r["experiment"], r["status"]) for r in raw] == [("mnist", "finished"), ("runs", "finished")]
    assert raw[0]["comment"] == "lr=0.1" and raw[1]["comment"].endswith("_bs64")
    assert defaulted.get_logdir() == f"runs{Path('/').as_posix()}{raw[1]['comment']}"


def test_a_crash_inside_the_with_block_fails_the_run_and_close_twice_is_harmless(table):
    with pytest.raises(ZeroDivisionError), SummaryWriter("runs/crash", table=table) as writer:
        writer.add_scalar("loss", 1.0, 0)
        raise ZeroDivisionError
    writer.close()
    assert table.load_run(1).status == "failed"


def test_steps_count_calls_when_none_is_given_and_bad_values_fail_at_the_call(table):
    writer = SummaryWriter("runs/steps", table=table)
    for value in (3.0, 2.0, 1.0):
        writer.add_scalar("loss", value)
    with pytest.raises(TypeError):
        writer.add_scalar("loss", "not a number")
    with pytest.raises(ValueError, match="NaN or infinity"):
        writer.add_image("bad", np.full((3, 2, 2), np.nan))
    with pytest.raises(ValueError, match="dataformats"):
        writer.add_image("bad", np.zeros((2, 2)), dataformats="CHW")
    writer.close()
    assert [(s.step, s.value) for s in table.load_run(1).get_scalar("loss")] == [(0, 3.0), (1, 2.0), (2, 1.0)]


def test_what_the_table_cannot_hold_is_counted_with_one_warning_each(table):
    writer = SummaryWriter("runs/kinds", table=table)
    with pytest.warns(NotStoredWarning, match="add_audio is not stored") as caught:
        for _ in range(3):
            writer.add_audio("sound", torch.zeros(100), 0, sample_rate=8000)
    assert len(caught) == 1 and caught[0].filename == __file__
    with pytest.warns(NotStoredWarning, match="add_video"):
        writer.add_video("clip", torch.zeros(1, 2, 3, 4, 4))
    with pytest.warns(NotStoredWarning, match="label images of add_embedding"):
        writer.add_embedding(
            torch.eye(3), metadata=["a", "b", "c"], label_img=torch.zeros(3, 3, 2, 2), tag="emb"
        )
    writer.add_pr_curve("pr", np.array([1, 0, 1, 0]), np.array([0.9, 0.8, 0.4, 0.1]), 2, num_thresholds=5)
    writer.close()
    run = table.load_run(1)
    [line] = run.get_console()
    assert line.line == (
        "tallyboard.tensorboard: not stored in this run: add_audio x3, add_video x1, "
        "the label images of add_embedding x1"
    )
    embedding = table.logged_table(1, "emb")
    assert embedding.columns.tolist() == ["label", "x0", "x1", "x2"]
    assert embedding["label"].tolist() == ["a", "b", "c"] and embedding["x1"].tolist() == [0.0, 1.0, 0.0]
    pr = table.logged_table(1, "pr", step=2)
    assert pr["threshold"].tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert pr["precision"].tolist() == [0.5, 2 / 3, 0.5, 0.5, 1.0]
    assert pr["recall"].tolist() == [1.0, 1.0, 0.5, 0.5, 0.0]


def test_figures_raw_histograms_and_hparams(table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    writer = SummaryWriter("runs/more", table=table)
    figures = [plt.figure() for _ in range(2)]
    writer.add_figure("curves", figures, 3)
    writer.add_histogram_raw("raw", 0.0, 3.0, 6, 9.0, 17.0, [1.0, 2.0, 3.0], [2, 2, 2], 1)
    writer.add_hparams({"lr": torch.tensor(0.5), "name": "x"}, {"accuracy": np.float64(0.75)})
    assert table.query(backend="records")[0].results == {"accuracy": 0.75}  # at once, run still open
    writer.close()
    run = table.load_run(1)
    assert [(f["tag"], f["step"]) for f in run.get_figures()] == [("curves", 3), ("curves", 3)]
    assert not any(plt.fignum_exists(f.number) for f in figures)  # closed, as torch closes them
    [raw] = run.get_histograms("raw")
    assert (raw.histogram.count, raw.histogram.total, raw.histogram.total_squares) == (6, 9.0, 17.0)
    assert raw.histogram.edges == (0.0, 1.0, 2.0, 3.0) and raw.histogram.counts == (2, 2, 2)
    assert run.get_hparams() == {"lr": 0.5, "name": "x"}


def test_a_script_without_the_warnings_filter_sees_each_warning_once(table):
    writer = SummaryWriter("runs/once", table=table)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            writer.add_mesh("mesh", torch.zeros(1, 3, 3))
    assert len(caught) == 1
    writer.close()

"""`import tallyboard.wandb as wandb`: a script written for W&B runs with that line changed, and
everything it logs reads back through `ResultTable`; then W&B's rules one by one (steps, config,
summary, define_metric, reinit, resume, disabled mode, what is not stored).

The same script run with the real W&B is compared with this one in test_real_peers.py;
here it is checked against what W&B's documentation promises.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tallyboard as tb
import tallyboard.wandb as wandb
from skins.peer_scripts import run_script, with_import
from tallyboard.run.exit_paths import end_runs
from tallyboard.skins import NotStoredWarning

WANDB_IMPORT = "import wandb"
SKIN_IMPORT = "import tallyboard.wandb as wandb"


def test_a_wandb_script_runs_with_only_the_import_changed(db_url: str, tmp_path: Path) -> None:
    script = with_import("wandb_training.py", WANDB_IMPORT, SKIN_IMPORT, tmp_path)
    artifacts = {"TALLYBOARD_ARTIFACTS": str(tmp_path / "artifacts")}  # PostgreSQL has no default
    done = run_script(script, "--lr", "0.5", table=db_url, cwd=tmp_path, env=artifacts)
    assert done.stdout.split() == ["1", "lr-0.5", "http://127.0.0.1:8765/runs/1"]
    with tb.ResultTable(db_url, read_only=True) as table:
        [record] = table.query(backend="records")
        assert (record.experiment, record.comment, record.status) == ("blobs", "lr-0.5", "finished")
        assert (record.tag, record.note) == ("lr-sweep", "softmax regression on three blobs")
        assert record.tags == ["baseline", "job_type=train", "numpy"]
        assert record.hparams == {"lr": 0.5, "epochs": 4, "model/kind": "softmax", "model/classes": 3}
        run = table.load_run(1)
        # W&B's steps: each log() a step; validation against the epoch (define_metric)
        assert [s.step for s in run.get_scalar("train/loss")] == [s for s in range(20) if s % 5 != 4]
        assert [s.step for s in run.get_scalar("val/acc")] == [0, 1, 2, 3]
        val_loss = [s.value for s in run.get_scalar("val/loss")]
        results = record.results
        assert results["val/loss/min"] == min(val_loss) and "val/loss" not in results
        assert results["train/loss"] == run.get_scalar("train/loss")[-1].value
        assert results["epoch"] == 3 and results["best_val_acc"] == max(
            s.value for s in run.get_scalar("val/acc")
        )
        assert [h.step for h in run.get_histograms("weights")] == [4, 9, 14, 19]
        confusion = table.logged_table(1, "confusion")
        assert confusion.columns.tolist() == ["true", "predicted", "count"] and confusion["count"].sum() == 40
        [image] = run.get_images()
        assert (image["tag"], image["width"], image["height"]) == ("inputs", 8, 8)
        [alert] = table.alerts(1)  # wandb.alert is run.alert
        assert (alert.title, alert.level, alert.rule) == ("below target", "warn", None)
        assert [a.name for a in table.list_artifacts(1)] == ["weights.npy"]  # left in run.dir


def test_a_script_that_simply_ends_still_keeps_its_summary(tmp_path: Path) -> None:
    script = with_import("wandb_training.py", WANDB_IMPORT, SKIN_IMPORT, tmp_path)
    run_script(script, "--leave-open", "--epochs", "2", table=str(tmp_path / "t.db"), cwd=tmp_path)
    with tb.ResultTable(tmp_path / "t.db", read_only=True) as table:
        [record] = table.query(backend="records")
        assert {"best_val_acc", "val/loss/min", "train/loss"} <= set(record.results)
        assert [a.name for a in table.list_artifacts(1)] == ["weights.npy"]
        # The status is the core's exit rule: a normal exit finishes a run (issue 29, elsewhere).


@pytest.fixture
def at(tmp_path: Path):
    """The table of the test (a file in its folder); a run left open is finished afterwards."""
    yield str(tmp_path / "results.db")
    wandb.finish()
    end_runs("failed")


def read(location: str, run_id: int = 1) -> tb.RunView:
    return tb.ResultTable(location, read_only=True).load_run(run_id)


def test_steps_follow_wandbs_rule(at: str) -> None:
    run = wandb.init(project="p", table=at)
    wandb.log({"a": 1.0})  # step 0, then 1
    wandb.log({"b": 2.0}, commit=False)  # step 1, stays
    wandb.log({"a": 3.0})  # step 1, then 2
    wandb.log({"a": 4.0}, step=10)  # at 10; not committed yet
    wandb.log({"b": 5.0})  # still 10, then 11
    wandb.log({"a": 6.0}, step=12, commit=True)  # 12, then 13
    assert run.step == 13
    run.finish()
    logged = read(at)
    assert [(s.step, s.value) for s in logged.get_scalar("a")] == [(0, 1.0), (1, 3.0), (10, 4.0), (12, 6.0)]
    assert [(s.step, s.value) for s in logged.get_scalar("b")] == [(1, 2.0), (10, 5.0)]


def test_values_of_every_kind_land_in_their_kind(at: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    wandb.init(project="p", table=at)
    wandb.log({
        "n": np.float32(0.5), "t": torch.tensor(2.0), "one": np.array([7.0]), "flag": True,
        "note": "plain text", "html": wandb.Html("<b>bold</b>"), "arr": np.arange(10.0), "list": [1, 2, 3],
        "imgs": [wandb.Image(torch.rand(3, 4, 4)), wandb.Image(np.zeros((4, 5), dtype=np.uint8))],
        "fig": plt.figure(), "nested": {"deeper": {"x": 1}}, "nothing": None,
    })  # fmt: skip
    wandb.finish()
    logged = read(at)
    assert sorted(logged.scalars) == ["flag", "n", "nested/deeper/x", "one", "t"]
    assert [s.value for s in logged.get_scalar("one")] == [7.0]
    assert [t["fragment"] for t in logged.get_text()] == ["plain text"]
    assert [f["fragment"] for f in logged.get_fragment()] == ["<b>bold</b>"]
    assert sorted(h.tag for h in logged.get_histograms()) == ["arr", "list"]
    assert [(i["width"], i["height"]) for i in logged.get_images()] == [(4, 4), (5, 4)]
    assert len(logged.get_figures()) == 1


def test_bad_values_fail_at_the_call(at: str) -> None:
    wandb.init(project="p", table=at)
    with pytest.raises(TypeError, match="cannot log a object"):
        wandb.log({"x": object()})
    with pytest.raises(TypeError, match="dict"):
        wandb.log([("x", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN or infinity"):
        wandb.Image(np.full((2, 2, 3), np.nan))
    with pytest.raises(ValueError, match="np_histogram"):
        wandb.Histogram()


def test_the_config_reads_as_attributes_and_items_and_every_change_is_written(at: str) -> None:
    import argparse

    wandb.init(project="p", config=argparse.Namespace(lr=0.1, layers=[64, 64]), table=at)
    wandb.config.dropout = 0.2
    wandb.config["optim"] = {"name": "adam", "betas": (0.9, 0.99)}
    wandb.config.update({"lr": 0.05}, allow_val_change=True)
    wandb.config.setdefaults({"lr": 1.0, "seed": 1})
    assert (wandb.config.lr, wandb.config["optim"]["name"], wandb.config.get("missing", 3)) == (
        0.05,
        "adam",
        3,
    )
    assert "seed" in wandb.config and len(wandb.config) == 5
    with pytest.raises(AttributeError):
        wandb.config.nope  # noqa: B018
    assert read(at).get_hparams() == {
        "lr": 0.05, "layers": "[64, 64]", "dropout": 0.2, "optim/name": "adam",
        "optim/betas": "[0.9, 0.99]", "seed": 1,
    }  # fmt: skip


def test_the_summary_is_written_as_results_while_the_run_goes_on(at: str) -> None:
    run = wandb.init(project="p", table=at)
    wandb.define_metric("loss", summary="min,max,mean")
    wandb.define_metric("acc", summary="best", goal="maximize")
    wandb.define_metric("noise", summary="none")
    for loss, acc in ((3.0, 0.1), (1.0, 0.7), (2.0, 0.4)):
        wandb.log({"loss": loss, "acc": acc, "noise": loss, "status": 1})
    wandb.summary["best_epoch"] = 1
    with tb.ResultTable(at, read_only=True) as table:
        assert table.query(backend="records")[0].results == {"best_epoch": 1}  # set: written at once
    run.summary.update({"test": {"acc": 0.6}})
    assert run.summary["loss"] == {"min": 1.0, "max": 3.0, "mean": 2.0}
    wandb.finish()
    with tb.ResultTable(at, read_only=True) as table:
        assert table.query(backend="records")[0].results == {
            "best_epoch": 1, "test/acc": 0.6, "loss/min": 1.0, "loss/max": 3.0, "loss/mean": 2.0,
            "acc/best": 0.7, "status": 1,  # a name of a run column: a result all the same
        }  # fmt: skip


def test_reinit_returns_finishes_or_adds_a_run(at: str) -> None:
    first = wandb.init(project="p", table=at)
    assert wandb.init(project="p", table=at) is first  # the default in a script: the same run
    second = wandb.init(project="p", reinit="finish_previous", table=at)
    assert read(at, 1).status == "finished" and wandb.run is second
    third = wandb.init(project="p", reinit="create_new", table=at)
    assert wandb.run is third and read(at, 2).status == "running"
    third.finish()
    assert wandb.run is None
    second.finish()
    with pytest.raises(RuntimeError, match=r"wandb.init\(\) before wandb.log"):
        wandb.log({"x": 1})
    with pytest.raises(RuntimeError, match=r"before using wandb\.config"):
        wandb.config.lr  # noqa: B018


def test_resume_continues_the_run_of_an_id(at: str) -> None:
    run = wandb.init(project="p", id="abc123", table=at)
    wandb.log({"loss": 1.0})
    wandb.log({"loss": 0.5})
    run.finish()
    again = wandb.init(project="p", id="abc123", resume="must", table=at)
    assert (again.id, again.run_id) == ("abc123", run.run_id)
    wandb.log({"loss": 0.25})
    again.finish()
    assert [(s.step, s.value) for s in read(at).get_scalar("loss")] == [(0, 1.0), (1, 0.5), (2, 0.25)]
    with pytest.raises(ValueError, match="no run of 'p' has that id"):
        wandb.init(project="p", id="other", resume="must", table=at)
    with pytest.raises(ValueError, match="that run exists"):
        wandb.init(project="p", id="abc123", resume="never", table=at)
    fresh = wandb.init(project="p", id="new1", resume="allow", table=at)
    assert fresh.run_id == 2
    fresh.finish()


def test_a_disabled_run_takes_every_call_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    with wandb.init(project="p", config={"lr": 1}) as run:
        wandb.log({"loss": 1.0, "img": wandb.Image(np.zeros((2, 2, 3)))})
        wandb.summary["x"] = 1
        assert wandb.config.lr == 1
    assert run.summary["x"] == 1 and os.listdir(tmp_path) == []


def test_an_exception_in_the_with_block_fails_the_run(at: str) -> None:
    with pytest.raises(KeyError), wandb.init(project="p", table=at):
        wandb.log({"loss": 1.0})
        raise KeyError("boom")
    assert read(at).status == "failed" and wandb.run is None


def test_what_is_not_stored_is_a_no_op_warned_about_once(at: str) -> None:
    run = wandb.init(project="p", table=at)
    with pytest.warns(NotStoredWarning, match="watch is not stored") as caught:
        wandb.watch(object(), log="all")
        wandb.watch(object())
    assert len(caught) == 1 and caught[0].filename == __file__
    with pytest.warns(NotStoredWarning) as caught:
        wandb.log(
            {"sound": wandb.Audio(np.zeros(8), sample_rate=8000), "curve": wandb.plot.line(None, "x", "y")}
        )
    assert [str(w.message).split(" is ")[0] for w in caught] == [
        "tallyboard.wandb: wandb.Audio",
        "tallyboard.wandb: wandb.plot.line",
    ]
    with pytest.warns(NotStoredWarning, match="sweeps"):
        assert wandb.sweep({"method": "grid"}) == "tallyboard-no-sweep"
    wandb.finish()
    [line] = read(at).get_console()
    assert line.line == (
        "tallyboard.wandb: not stored in this run: sweep x1, wandb.Audio x1, wandb.plot.line x1, watch x2"
    )
    assert run.url.endswith("/runs/1")


def test_files_are_kept_as_artefacts(at: str, tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "model.pt").write_bytes(b"weights")
    (tmp_path / "notes.txt").write_text("hi")
    run = wandb.init(project="p", dir=tmp_path, table=at)
    artifact = wandb.Artifact("model", type="model")
    artifact.add_dir(tmp_path / "ckpt")
    with artifact.new_file("info.txt", mode="w") as file:
        file.write("written inside")
    run.log_artifact(artifact)
    wandb.log_artifact(tmp_path / "notes.txt", type="notes")
    assert wandb.save(str(tmp_path / "ckpt" / "*.pt"), base_path=str(tmp_path)) == [
        str(tmp_path / "ckpt" / "model.pt")
    ]
    (tmp_path / "late.log").write_text("at the end")
    wandb.save(str(tmp_path / "*.log"), policy="end")
    Path(run.dir, "extra.json").write_text("{}")
    wandb.finish()
    with tb.ResultTable(at, read_only=True) as table:
        kept = {a.name: a.kind for a in table.list_artifacts(1)}
    assert kept == {
        "model/model.pt": "model", "model/info.txt": "model", "notes.txt/notes.txt": "notes",
        "ckpt/model.pt": "file", "late.log": "file", "extra.json": "file",
    }  # fmt: skip
    assert Path(run.dir).parent.parent == tmp_path and not math.isnan(run.step)


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_files_without_an_artefact_store_are_counted_not_a_crash(db_url: str, monkeypatch) -> None:
    monkeypatch.delenv("TALLYBOARD_ARTIFACTS", raising=False)
    run = wandb.init(project="p", table=db_url)
    Path(run.dir, "weights.bin").write_bytes(b"1")
    with pytest.warns(NotStoredWarning, match="saved files is not stored.*no artefact store"):
        wandb.finish()
    with tb.ResultTable(db_url, read_only=True) as table:
        run_view = table.load_run(run.run_id)
        assert run_view.status == "finished" and not table.list_artifacts(run.run_id)
        assert "saved files x1" in run_view.get_console()[0].line
    shutil.rmtree(Path(run.dir).parent)

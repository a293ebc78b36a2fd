"""`import tallyboard.mlflow as mlflow`: a script written for MLflow's tracking API runs with that
line changed, and everything it logs reads back through `ResultTable`; then MLflow's rules (one
active run, nested runs, tags, statuses, the tracking URI, what is not stored).

The same script run with the real MLflow is compared with this one in test_real_peers.py;
here it is checked against what MLflow's documentation promises.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tallyboard as tb
import tallyboard.mlflow as mlflow
from skins.peer_scripts import run_script, with_import
from tallyboard.run.exit_paths import end_runs
from tallyboard.skins import NotStoredWarning

MLFLOW_IMPORT = "import mlflow"
SKIN_IMPORT = "import tallyboard.mlflow as mlflow"


def test_an_mlflow_script_runs_with_only_the_import_changed(db_url: str, tmp_path: Path) -> None:
    script = with_import("mlflow_training.py", MLFLOW_IMPORT, SKIN_IMPORT, tmp_path)
    artifacts = {"TALLYBOARD_ARTIFACTS": str(tmp_path / "artifacts")}
    done = run_script(script, table=db_url, cwd=tmp_path, env=artifacts)
    assert done.stdout.split() == ["1", "gd-baseline", "True", "FINISHED"]
    with tb.ResultTable(db_url, read_only=True) as table:
        parent, child = table.query(backend="records")
        assert (parent.experiment, parent.comment, parent.status) == (
            "linear-regression",
            "gd-baseline",
            "finished",
        )
        assert parent.note == "plain gradient descent" and parent.tags == ["owner=tests", "stage=dev"]
        assert parent.hparams == {"learning_rate": 0.1, "steps": 25, "features": 3}
        run = table.load_run(1)
        mse = run.get_scalar("mse")
        assert [s.step for s in mse] == list(range(25)) and mse[-1].value < mse[0].value
        assert parent.results == {
            "mse": mse[-1].value,
            "final_mse": mse[-1].value,
            "bias": parent.results["bias"],
        }
        assert [f["tag"] for f in run.get_figures()] == ["loss_curve.png"]
        texts = {t["tag"]: t["fragment"] for t in run.get_text()}
        assert texts["notes.txt"] == "fitted with numpy"
        assert sorted(__import__("json").loads(texts["model/coefficients.json"])) == ["bias", "weights"]
        assert [(i["tag"], i["width"]) for i in run.get_images()] == [("residuals.png", 6)]
        assert table.logged_table(1, "weights.json")["feature"].tolist() == ["a", "b", "c"]
        assert [a.name for a in table.list_artifacts(1)] == ["reports/summary.json"]
        assert (child.comment, child.tags, child.status) == (
            "evaluation",
            ["mlflow.parentRunId=1"],
            "finished",
        )
        assert child.results == {"holdout_mse": pytest.approx(mse[-1].value * 1.05)}


def test_an_exception_inside_the_run_fails_it(tmp_path: Path) -> None:
    script = with_import("mlflow_training.py", MLFLOW_IMPORT, SKIN_IMPORT, tmp_path)
    done = run_script(script, "--fail", table=str(tmp_path / "t.db"), cwd=tmp_path, check=False)
    assert done.returncode == 1 and "diverged on purpose" in done.stderr
    with tb.ResultTable(tmp_path / "t.db", read_only=True) as table:
        [record] = table.query(backend="records")
        assert record.status == "failed" and record.results == {
            "mse": table.load_run(1).get_scalar("mse")[-1].value
        }


@pytest.fixture
def at(tmp_path: Path):
    mlflow.set_tracking_uri(tmp_path)  # a folder: results.db in it
    mlflow.set_experiment("exp")
    yield str(tmp_path / "results.db")
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_experiment("Default")
    end_runs("failed")


def test_one_active_run_unless_nested(at: str) -> None:
    first = mlflow.start_run()
    with pytest.raises(mlflow.MlflowException, match="already active"):
        mlflow.start_run()
    child = mlflow.start_run(nested=True)
    assert mlflow.active_run() is child
    mlflow.end_run()
    assert mlflow.active_run() is first
    mlflow.end_run(status="KILLED")
    assert mlflow.active_run() is None and mlflow.last_active_run() is first
    with tb.ResultTable(at, read_only=True) as table:
        assert [table.load_run(i).status for i in (1, 2)] == ["failed", "finished"]
    with pytest.raises(mlflow.MlflowException, match="status"):
        mlflow.end_run(status="DONE")


def test_logging_without_a_run_starts_one_and_tags_are_replaced(at: str) -> None:
    mlflow.log_metric("loss", 0.5)  # MLflow starts a run for it
    mlflow.log_metric("loss", 0.25, timestamp=int((mlflow.active_run()._launched.started + 3) * 1000))
    mlflow.set_tag("stage", "dev")
    mlflow.set_tag("stage", "prod")
    mlflow.set_tag("mlflow.note.content", "the note")
    assert mlflow.log_param("lr", np.float64(0.1)) == 0.1
    run_id = mlflow.active_run().info.run_id
    with pytest.raises(mlflow.MlflowException, match="active run"):
        mlflow.log_params({"x": 1}, run_id="999")
    mlflow.end_run()
    with tb.ResultTable(at, read_only=True) as table:
        run = table.load_run(int(run_id))
        assert [(s.step, s.value) for s in run.get_scalar("loss")] == [(0, 0.5), (1, 0.25)]
        assert run.get_scalar("loss")[1].wall_time == pytest.approx(3.0, abs=0.002)  # milliseconds
        assert run.get_tags() == ["stage=prod"] and table.get_experiment_raw(1)["note"] == "the note"
        assert run.get_hparams() == {"lr": 0.1}


def test_a_run_id_continues_that_run(at: str) -> None:
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 1.0, step=0)
    with mlflow.start_run(run_id=run.info.run_id):
        mlflow.log_metric("loss", 0.5, step=1)
    with tb.ResultTable(at, read_only=True) as table:
        assert table.runs == [1] and [s.value for s in table.load_run(1).get_scalar("loss")] == [1.0, 0.5]


def test_the_tracking_uri_names_the_table(tmp_path: Path, at: str) -> None:
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'other.db'}")
    assert mlflow.get_tracking_uri() == str(tmp_path / "other.db")
    with mlflow.start_run():
        mlflow.log_metric("x", 1.0)
    assert (tmp_path / "other.db").exists() and mlflow.get_experiment_by_name("exp").experiment_id == "exp"
    assert mlflow.get_experiment_by_name("nope") is None
    with pytest.raises(mlflow.MlflowException, match="not to a server"):
        mlflow.set_tracking_uri("http://mlflow.example:5000")


def test_models_and_autologging_are_counted_not_stored(at: str) -> None:
    with pytest.warns(NotStoredWarning, match="autolog"):
        mlflow.autolog()
    with mlflow.start_run():
        with pytest.warns(NotStoredWarning, match=r"pytorch\.log_model is not stored") as caught:
            mlflow.pytorch.log_model(object(), "model")
            mlflow.pytorch.log_model(object(), "model")
        assert len(caught) == 1
        with pytest.warns(NotStoredWarning, match="log_figure of a dict"):
            mlflow.log_figure({"data": []}, "plotly.html")
    with tb.ResultTable(at, read_only=True) as table:
        [line] = table.load_run(1).get_console()
        assert (
            line.line
            == "tallyboard.mlflow: not stored in this run: log_figure of a dict x1, pytorch.log_model x2"
        )


def test_images_out_of_range_are_refused_at_the_call(at: str) -> None:
    with mlflow.start_run(), pytest.raises(ValueError, match=r"\[0, 255\]"):
        mlflow.log_image(np.full((2, 2), 300), "bad.png")

"""The skins side by side with the real W&B and MLflow: one script, run once with the real package
(W&B offline, MLflow on its local file store) and once with only its import line changed. What the
real package recorded, read back with its own classes, must be what our table holds: the same
names, config, steps, values, summaries, tables, images, tags and files.

The real packages are references only, installed by the test lock; no skin imports them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import tallyboard as tb
from skins.peer_scripts import SCRIPTS, run_script, with_import
from skins.wandb_records import read_offline_run

# W&B and MLflow each start slowly (a service process, a large import): one run of each per test
pytestmark = pytest.mark.timeout(600)


def flattened(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of 'a/b' keys, the way the skins store a nested config or summary."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(flattened(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@pytest.fixture(scope="module")
def real_wandb(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("real-wandb")
    env = {"WANDB_MODE": "offline", "WANDB_DIR": str(folder), "WANDB_SILENT": "true", "WANDB_CONSOLE": "off"}
    done = run_script(SCRIPTS / "wandb_training.py", "--lr", "0.5", cwd=folder, env=env)
    return read_offline_run(folder), done.stdout.split()


def test_a_wandb_script_logs_what_real_wandb_records(real_wandb, tmp_path: Path) -> None:
    real, printed = real_wandb
    script = with_import("wandb_training.py", "import wandb", "import tallyboard.wandb as wandb", tmp_path)
    done = run_script(script, "--lr", "0.5", table=str(tmp_path / "r.db"), cwd=tmp_path)
    assert done.stdout.split()[1] == printed[1]  # run.name (ids and urls are each tool's own)
    with tb.ResultTable(str(tmp_path / "r.db"), read_only=True) as table:
        [record] = table.query(backend="records")
        run = table.load_run(record.run_id)
        init = real.fields
        assert (record.experiment, record.comment, record.tag, record.note) == (
            init.project, init.display_name, init.run_group, init.notes,
        )  # fmt: skip
        assert sorted(record.tags) == sorted([*init.tags, f"job_type={init.job_type}"])
        assert record.hparams == flattened(real.config)
        for key in ("train/loss", "train/acc"):  # every log() a step
            assert [(s.step, s.value) for s in run.get_scalar(key)] == real.series(key)
        for key in ("val/loss", "val/acc"):  # define_metric("val/*", step_metric="epoch")
            assert [(s.step, s.value) for s in run.get_scalar(key)] == real.series(key, x="epoch")
        histograms = [row for row in real.history if row.get("weights/_type") == "histogram"]
        assert [(h.step, h.histogram.count) for h in run.get_histograms("weights")] == [
            (row["_step"], sum(row["weights/values"])) for row in histograms
        ]
        [logged] = [row for row in real.history if "confusion/path" in row]
        real_table = json.loads((real.files / logged["confusion/path"]).read_text())
        ours = table.logged_table(record.run_id, "confusion")
        assert (ours.columns.tolist(), ours.values.tolist()) == (real_table["columns"], real_table["data"])
        [image] = run.get_images()
        with Image.open(real.files / logged["inputs/path"]) as real_image:
            real_pixels = np.asarray(real_image.convert("RGB"))
        assert np.array_equal(np.asarray(image["image"].convert("RGB")), real_pixels)
        summary = {
            key: value
            for key, value in flattened(real.summary).items()
            if not key.startswith("_") and "/_" not in key and not isinstance(value, str)
            and not key.startswith(("confusion/", "inputs/", "weights/"))
        }  # fmt: skip
        assert record.results == summary
        [(title, text, level)] = real.alerts
        [alert] = table.alerts(record.run_id)
        assert (alert.title, alert.text, alert.level) == (title, text, level.lower())


def mlflow_env(folder: Path) -> dict[str, str]:
    return {"MLFLOW_TRACKING_URI": (folder / "mlruns").as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}


def artefact_paths(client: Any, run_id: str, path: str | None = None) -> list[str]:
    """Every file MLflow keeps with a run, folders walked."""
    found = []
    for item in client.list_artifacts(run_id, path):
        found += artefact_paths(client, run_id, item.path) if item.is_dir else [item.path]
    return found


def logged_tables(client: Any, run_id: str, into: Path) -> dict[str, Any]:
    """The tables `log_table` wrote, by file: JSON of `columns` and `data`."""
    found = {}
    for path in artefact_paths(client, run_id):
        if path.endswith(".json"):
            content = json.loads(Path(client.download_artifacts(run_id, path, str(into))).read_text())
            if set(content) == {"columns", "data"}:
                found[path] = content
    return found


@pytest.fixture(scope="module")
def real_mlflow(tmp_path_factory: pytest.TempPathFactory):
    from mlflow.tracking import MlflowClient

    folder = tmp_path_factory.mktemp("real-mlflow")
    env = mlflow_env(folder)
    run_script(SCRIPTS / "mlflow_training.py", cwd=folder, env=env)
    os.environ.update(env)  # the client reads it too
    try:
        client = MlflowClient(env["MLFLOW_TRACKING_URI"])
        experiment = client.get_experiment_by_name("linear-regression")
        runs = {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}
        return {
            name: {
                "status": run.info.status.lower(),
                "params": run.data.params,
                "tags": {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")},
                "note": run.data.tags.get("mlflow.note.content"),
                "parent": run.data.tags.get("mlflow.parentRunId"),
                "id": run.info.run_id,
                "metrics": run.data.metrics,
                "mse": [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "mse")],
                "files": sorted(artefact_paths(client, run.info.run_id)),
                "tables": logged_tables(client, run.info.run_id, folder / run.info.run_id),
            }
            for name, run in runs.items()
        }
    finally:
        for key in env:
            os.environ.pop(key, None)


def test_an_mlflow_script_logs_what_real_mlflow_records(real_mlflow, tmp_path: Path) -> None:
    skin = "import tallyboard.mlflow as mlflow"
    script = with_import("mlflow_training.py", "import mlflow", skin, tmp_path)
    run_script(script, table=str(tmp_path / "r.db"), cwd=tmp_path)
    with tb.ResultTable(str(tmp_path / "r.db"), read_only=True) as table:
        records = {record.comment: record for record in table.query(backend="records")}
        assert sorted(records) == sorted(real_mlflow)
        ids = {real["id"]: records[name].run_id for name, real in real_mlflow.items()}
        for name, real in real_mlflow.items():
            record, run = records[name], table.load_run(records[name].run_id)
            assert (record.experiment, record.status) == ("linear-regression", real["status"])
            assert record.note == real["note"]
            assert {key: str(value) for key, value in record.hparams.items()} == real["params"]
            parent = [] if real["parent"] is None else [f"mlflow.parentRunId={ids[real['parent']]}"]
            assert sorted(record.tags) == sorted([f"{k}={v}" for k, v in real["tags"].items()] + parent)
            assert record.results == real["metrics"]  # each metric's last value
            assert [(s.step, s.value) for s in run.get_scalar("mse")] == real["mse"]
            kept = [f["tag"] for f in run.get_figures()] + [i["tag"] for i in run.get_images()]
            kept += [t["tag"] for t in run.get_text()] + [a.name for a in table.list_artifacts(record.run_id)]
            for name, content in real["tables"].items():  # a logged table of ours, not a file
                ours = table.logged_table(record.run_id, name)
                assert ours.columns.tolist() == content["columns"]
                # MLflow writes floats to 10 digits (pandas' to_json); the table keeps every digit
                assert ours.values.tolist() == [
                    [pytest.approx(cell, rel=1e-9) if isinstance(cell, float) else cell for cell in row]
                    for row in content["data"]
                ]
            assert sorted(kept + list(real["tables"])) == real["files"]

"""An exception leaving a skin's `with` block fails the run and keeps how it failed, as for a core
run: W&B's `with wandb.init()`, MLflow's `with mlflow.start_run()`, torch's `with SummaryWriter()`."""

from __future__ import annotations

import pytest

import tallyboard as tb
import tallyboard.mlflow as mlflow
import tallyboard.wandb as wandb
from tallyboard.tensorboard import SummaryWriter


def failure_of(path: str) -> tuple[str, dict[str, str] | None]:
    with tb.ResultTable(path, read_only=True) as table:
        run = table.load_run(1)
        return run.status, run.error


def test_wandb(tmp_path):
    path = str(tmp_path / "results.db")
    with pytest.raises(ValueError), wandb.init(project="p", table=path):
        raise ValueError("wandb block")
    status, error = failure_of(path)
    assert (status, error["type"], error["message"]) == ("failed", "ValueError", "wandb block")


def test_mlflow(tmp_path):
    path = str(tmp_path / "results.db")
    mlflow.set_tracking_uri(path)
    with pytest.raises(KeyError), mlflow.start_run():
        raise KeyError("mlflow block")
    status, error = failure_of(path)
    assert (status, error["type"]) == ("failed", "KeyError")


def test_tensorboard(tmp_path):
    path = str(tmp_path / "results.db")
    with pytest.raises(RuntimeError), SummaryWriter(table=path) as writer:
        writer.add_scalar("loss", 1.0, 0)
        raise RuntimeError("tensorboard block")
    status, error = failure_of(path)
    assert (status, error["message"]) == ("failed", "tensorboard block")

"""TallyboardLogger: a tiny Lightning model trained for 2 epochs on CPU, logged to a real table."""

import os

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tallyboard.integrations.lightning import TallyboardLogger


class TinyRegression(pl.LightningModule):
    def __init__(self, lr: float = 0.05, hidden: int = 4, fail_at_step: int | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(2, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
        )

    def training_step(self, batch, batch_idx):
        if self.hparams.fail_at_step is not None and self.global_step == self.hparams.fail_at_step:
            raise RuntimeError("diverged")
        features, target = batch
        loss = torch.nn.functional.mse_loss(self.net(features), target)
        self.log("train/loss", loss, on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch, batch_idx):
        features, target = batch
        self.log("val/loss", torch.nn.functional.mse_loss(self.net(features), target), on_epoch=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def loader():
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(32, 2, generator=generator)
    target = features.sum(dim=1, keepdim=True)
    return DataLoader(TensorDataset(features, target), batch_size=8)


def fit(logger, root, model, **trainer_options):
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=2,
        logger=logger,
        default_root_dir=root,
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        **trainer_options,
    )
    trainer.fit(model, loader(), loader())
    return trainer


def test_two_epochs_log_hparams_metrics_checkpoints_and_results(table, results_of, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="tiny-regression", comment="lightning test")
    trainer = fit(logger, tmp_path, TinyRegression(lr=0.05, hidden=4))
    run = table.load_run(logger.version)
    assert run.status == "finished"
    assert table.get_experiment_raw(logger.version)["experiment"] == "tiny-regression"
    # "hidden" is a column of every run (the hidden flag), so the hparam is renamed, not refused.
    assert run.get_hparams() == {"lr": 0.05, "hparams/hidden": 4, "fail_at_step": None}

    train_loss = run.get_scalar("train/loss")
    assert [point.step for point in train_loss] == list(range(8))  # 4 batches x 2 epochs
    assert [point.epoch for point in train_loss] == [0] * 4 + [1] * 4
    val_loss = run.get_scalar("val/loss")
    assert [(point.step, point.epoch) for point in val_loss] == [(3, 0), (7, 1)]
    assert val_loss[-1].value == pytest.approx(trainer.callback_metrics["val/loss"].item())

    row = results_of(logger.version)
    assert row["val/loss"] == pytest.approx(val_loss[-1].value)
    assert row["train/loss"] == pytest.approx(train_loss[-1].value)

    # One record per checkpoint written (top-1 by default: the epoch-0 file was replaced since).
    checkpoints = run.get_text(tag="checkpoints/best")
    assert [record["step"] for record in checkpoints] == [3, 7]
    assert checkpoints[-1]["fragment"] == trainer.checkpoint_callback.best_model_path
    assert os.path.isfile(checkpoints[-1]["fragment"])


def test_an_existing_writer_and_results_written_by_hand(table, results_of, tmp_path):
    writer = table.new_run("given writer")
    logger = TallyboardLogger(writer, write_result_at_end=False)
    fit(logger, tmp_path, TinyRegression(), enable_checkpointing=False)
    assert logger.experiment is writer
    assert table.load_run(writer.run_id).status == "running"
    writer.add_scalar("test/extra", 1.5)  # the run is still open after fit
    logger.write_result(test_score=0.75)
    assert table.load_run(writer.run_id).status == "finished"
    row = results_of(writer.run_id)
    assert row["test_score"] == 0.75 and "val/loss" in row


def test_a_failing_fit_marks_the_run_failed(table, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="diverges")
    with pytest.raises(RuntimeError, match="diverged"):
        fit(logger, tmp_path, TinyRegression(fail_at_step=5), enable_checkpointing=False)
    run = table.load_run(logger.version)
    assert run.status == "failed"
    assert [point.step for point in run.get_scalar("train/loss")] == list(range(5))
    with pytest.raises(RuntimeError, match="read-only"):  # ended for good, not just relabelled
        logger.experiment.add_scalar("train/loss", 0.0)

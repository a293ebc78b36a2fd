"""A tiny Lightning job: imported by the tests, and run as a process of its own by those that need one
(DDP, ddp_spawn, the end of a process, a killed and requeued job).

    python lightning_job.py <table> <root> '<json options>'

Options: ``logger`` (TallyboardLogger keywords), ``trainer`` (Trainer keywords), ``model``
(TinyRegression keywords), ``ckpt_path``, ``test`` (run trainer.test after fit). Every process that
gets to the end prints one JSON line: its rank and what its logger says.
"""

import json
import os
import signal
import sys

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from tallyboard.integrations.lightning import TallyboardLogger


class TinyRegression(pl.LightningModule):
    def __init__(
        self,
        lr: float = 0.05,
        hidden: int = 4,
        fail_at_step: int | None = None,
        fail_on_rank: int = 0,
        kill_at_step: int | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(2, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
        )

    def training_step(self, batch, batch_idx):
        if self.global_step == self.hparams.fail_at_step and self.global_rank == self.hparams.fail_on_rank:
            raise RuntimeError("diverged")
        if self.global_step == self.hparams.kill_at_step:
            self.logger.experiment.flush()  # what SIGKILL would lose is the sink's business, not ours
            os.kill(os.getpid(), signal.SIGKILL)
        features, target = batch
        loss = torch.nn.functional.mse_loss(self.net(features), target)
        self.log("train/loss", loss, on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch, batch_idx):
        features, target = batch
        self.log("val/loss", torch.nn.functional.mse_loss(self.net(features), target), on_epoch=True)

    def test_step(self, batch, batch_idx):
        features, target = batch
        self.log("test/loss", torch.nn.functional.mse_loss(self.net(features), target), on_epoch=True)

    def predict_step(self, batch, batch_idx):
        return self.net(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def loader():
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(32, 2, generator=generator)
    target = features.sum(dim=1, keepdim=True)
    return DataLoader(TensorDataset(features, target), batch_size=8)


def trainer(logger, root, **options):
    settings = {
        "accelerator": "cpu",
        "devices": 1,
        "max_epochs": 2,
        "logger": logger,
        "default_root_dir": root,
        "log_every_n_steps": 1,
        "enable_progress_bar": False,
        "enable_model_summary": False,
    }
    return pl.Trainer(**{**settings, **options})


def fit(logger, root, model, ckpt_path=None, **options):
    trained = trainer(logger, root, **options)
    trained.fit(model, loader(), loader(), ckpt_path=ckpt_path)
    return trained


def main(table, root, options):
    logger = TallyboardLogger(table=table, experiment_name="job", **options.get("logger", {}))
    model = TinyRegression(**options.get("model", {}))
    trained = fit(logger, root, model, options.get("ckpt_path"), **options.get("trainer", {}))
    if options.get("test"):
        trained.test(model, loader(), verbose=False)
    said = {"rank": trained.global_rank, "version": logger.version, "name": logger.name}
    said.update(save_dir=logger.save_dir, log_dir=logger.log_dir, trainer_log_dir=trained.log_dir)
    # One write per line: the ranks of a DDP job share stdout, and print() may split a line in two
    # writes that another rank's line lands between (a pipe keeps a write under 4 kB whole).
    sys.stdout.flush()
    os.write(1, ("JOB " + json.dumps(said) + "\n").encode())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))

"""``TallyboardLogger``: a Lightning logger that writes to a tallyboard result table.

    trainer = lightning.pytorch.Trainer(logger=TallyboardLogger(table="results.db", experiment_name="mnist"))

Hyperparameters become the run's hparams, every ``self.log(...)`` a scalar at the trainer's global
step (with its epoch), every checkpoint saved a text record holding its path, and a successful
``fit`` ends with ``write_result`` of each metric's last value. A failing fit marks the run failed.
"""

from __future__ import annotations

import os
from argparse import Namespace
from typing import TYPE_CHECKING, Any

from tallyboard.integrations import FrameworkRun, missing_framework

try:
    from lightning.pytorch.loggers import Logger
    from lightning.pytorch.loggers.logger import rank_zero_experiment
    from lightning.pytorch.loggers.utilities import _scan_checkpoints
    from lightning.pytorch.utilities import rank_zero_only
except ImportError as error:
    raise missing_framework(error, "tallyboard.integrations.lightning") from error

if TYPE_CHECKING:  # pragma: no cover
    from lightning.pytorch.callbacks import ModelCheckpoint

    from tallyboard.table import ResultTable
    from tallyboard.writer import LogWriter


class TallyboardLogger(Logger):
    """Log a Lightning run to a tallyboard run.

    Pass an open ``writer`` (from ``ResultTable.new_run``), or let the logger create the run on first
    use in the rank-zero process with ``table.new_run(experiment_name, **run_kwargs)``.

    ``write_result_at_end=True`` (the default) writes the results row when ``fit`` succeeds, which
    makes the run read-only. To log ``trainer.test`` as well, pass ``False`` and call
    ``logger.write_result(**extra)`` after the last stage.
    """

    def __init__(
        self,
        writer: LogWriter | None = None,
        *,
        table: str | os.PathLike[str] | ResultTable = "results.db",
        experiment_name: str = "lightning",
        write_result_at_end: bool = True,
        **run_kwargs: Any,
    ) -> None:
        super().__init__()
        self._run = FrameworkRun(writer, table, experiment_name, run_kwargs)
        self._write_result_at_end = write_result_at_end
        self._last_step: int | None = None
        self._checkpoint_times: dict[str, float] = {}

    @property
    def name(self) -> str:
        return self._run.experiment_name

    @property
    def version(self) -> int | None:
        return self._run.writer.run_id if self._run.started else None

    @property
    @rank_zero_experiment
    def experiment(self) -> LogWriter:
        """The LogWriter, for what Lightning does not log itself (``logger.experiment.add_image``)."""
        return self._run.writer

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        params = vars(params) if isinstance(params, Namespace) else params
        if params:
            self._run.log_hparams(params)

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        metrics = dict(metrics)
        epoch = metrics.pop("epoch", None)
        self._run.log_metrics(metrics, step=step, epoch=None if epoch is None else int(epoch))
        if step is not None:
            self._last_step = step

    @rank_zero_only
    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        """Record the path of every new or rewritten checkpoint, tagged ``checkpoints/<kind>`` where
        kind is ``latest``, ``best`` or ``best_k``."""
        for mtime, path, _score, kind in _scan_checkpoints(checkpoint_callback, self._checkpoint_times):
            self._checkpoint_times[path] = mtime
            self.experiment.add_text(str(path), tag=f"checkpoints/{kind}", step=self._last_step)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """Lightning calls this at the end of every stage: "success", "failed", or "finished" (SIGTERM)."""
        if not self._run.started or self._run.finished:
            return
        if status == "failed":
            self._run.fail()
        elif status == "success" and self._write_result_at_end:
            self._run.finish()
        else:
            self._run.writer.flush()

    def write_result(self, **results: Any) -> None:
        """Finish the run: its results row is each metric's last value, updated with ``results``."""
        self._run.finish(**results)

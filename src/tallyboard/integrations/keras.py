"""``TallyboardCallback``: a Keras 3 callback that writes to a tallyboard result table.

    model.fit(x, y, validation_data=(xv, yv), callbacks=[TallyboardCallback(table="results.db")])

Any Keras 3 backend works (torch, jax, tensorflow): the callback only reads the numbers Keras hands
it. Every training batch logs ``train/<metric>`` at the global step (``epoch * steps + batch``, so a
fit restarted with ``initial_epoch`` continues the series), every epoch its ``val_<metric>`` as
``val/<metric>``, and ``model.evaluate()`` outside of ``fit`` logs ``test/<metric>``. ``fit``,
``evaluate`` and ``predict`` log into one run, which ends with the process or with
``callback.write_result()``; the process ending inside one of them marks it failed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any

from tallyboard.extras import missing_framework
from tallyboard.integrations import FrameworkRun

try:
    from keras.callbacks import Callback
except ImportError as error:
    raise missing_framework(error, "tallyboard.integrations.keras") from error

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.alerts.rules import Rule
    from tallyboard.run.writer import LogWriter
    from tallyboard.table import ResultTable


def _numbers(logs: Mapping[str, Any] | None, prefix: str = "") -> dict[str, float]:
    """The metrics of a Keras ``logs`` dict whose name starts with ``prefix``, without it."""
    return {
        key[len(prefix) :]: float(value)
        for key, value in (logs or {}).items()
        if key.startswith(prefix) and isinstance(value, Real) and not isinstance(value, bool)
    }


class TallyboardCallback(Callback):  # type: ignore[misc]
    """Log a Keras model's ``fit``, ``evaluate`` and ``predict`` to a tallyboard run.

    Pass an open ``writer``, or let the callback start the run when the first of them begins, with
    ``table.new_run(experiment_name, **run_kwargs)``; ``run_id=`` continues an existing run, as do
    ``TALLYBOARD_RUN_ID`` and a requeued SLURM job. ``unique=True`` refuses (``DuplicateRunError``, when
    ``fit`` begins, before any batch) a run whose experiment, hparams and config match another's.
    ``rules`` (tallyboard.alerts) watch the run; ``stop_on_alert=True`` stops ``fit``
    (``model.stop_training``) after the batch at which one with ``stop=True`` is known to have fired.
    """

    def __init__(
        self,
        writer: LogWriter | None = None,
        *,
        table: str | os.PathLike[str] | ResultTable | None = None,
        experiment_name: str = "keras",
        run_id: int | None = None,
        unique: bool = False,
        rules: Sequence[Rule] = (),
        stop_on_alert: bool = False,
        **run_kwargs: Any,
    ) -> None:
        super().__init__()
        self._run = FrameworkRun(writer, table, experiment_name, run_kwargs, unique=unique, run_id=run_id,
                                 rules=rules, stop_on_alert=stop_on_alert)  # fmt: skip
        self._fitting = False
        self._epoch = 0
        self._step = 0

    @property
    def writer(self) -> LogWriter:
        return self._run.writer

    def _begin(self, hparams: Mapping[str, Any] | None = None) -> None:
        started = self._run.started
        self._run.start(hparams)
        if hparams and not started:
            self._run.log_hparams(hparams)
        self._run.in_phase = True

    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        self._fitting = True
        self._begin(self._hparams())

    def _hparams(self) -> dict[str, Any]:
        params = {key: self.params.get(key) for key in ("epochs", "steps") if self.params}
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None:
            # Its class, not its name: Keras numbers the names of later instances (sgd, sgd_1...).
            params["optimizer"] = {"name": type(optimizer).__name__}
            learning_rate = optimizer.get_config().get("learning_rate")
            if isinstance(learning_rate, Real):
                params["optimizer"]["learning_rate"] = learning_rate
        return params

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._epoch = epoch
        steps = (self.params or {}).get("steps")
        if steps:
            self._step = epoch * steps

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        metrics = {f"train/{name}": value for name, value in _numbers(logs).items()}
        self._run.log_metrics(metrics, step=self._step, epoch=self._epoch)
        if self._run.stop_early("Keras fit", self._step):
            self.model.stop_training = True
        self._step += 1

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        """Only the validation metrics: the training ones are the last batch's running means."""
        metrics = {f"val/{name}": value for name, value in _numbers(logs, "val_").items()}
        self._run.log_metrics(metrics, step=max(self._step - 1, 0), epoch=epoch)

    def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
        self._fitting = False
        self._run.release()

    def on_test_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        if not self._fitting:  # fit's validation runs evaluate() too; it is part of fit
            self._begin()

    def on_test_end(self, logs: Mapping[str, Any] | None = None) -> None:
        if not self._fitting:
            metrics = {f"test/{name}": value for name, value in _numbers(logs).items()}
            self._run.log_metrics(metrics, step=self._step, epoch=None)
            self._run.release()

    def on_predict_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        self._begin()

    def on_predict_end(self, logs: Mapping[str, Any] | None = None) -> None:
        self._run.release()

    def write_result(self, **results: Any) -> None:
        """End the run now: its results row is each metric's last value, updated with ``results``."""
        self._run.finish(**results)

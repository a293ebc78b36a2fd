"""``TallyboardLogger``: a Lightning logger that writes to a tallyboard result table.

    trainer = lightning.pytorch.Trainer(logger=TallyboardLogger(table="results.db", experiment_name="mnist"))

Hyperparameters become the run's hparams, every ``self.log(...)`` a scalar at the trainer's global
step (with its epoch), every checkpoint saved a text record holding its path; with
``log_model=True`` the checkpoints left at the end of training are kept as artefacts of the run
(``log_model="all"``: every checkpoint as it is saved), as WandbLogger does. Each launch is a run
of its own (``logger.version`` is its id), which every stage (fit, validate, test, predict) logs
into; it ends with the process, or with ``logger.write_result()``. A failing stage marks it failed.

The run is created when the logger is, in the launching process (global rank zero), so that its id
is known before Lightning starts other processes: ``ddp`` children find it in the environment
(``LAUNCHED_RUNS``), ``ddp_spawn`` workers receive it with the pickled logger.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from argparse import Namespace
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tallyboard.extras import missing_framework
from tallyboard.integrations import FrameworkRun

try:
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.loggers import Logger
    from lightning.pytorch.loggers.logger import rank_zero_experiment
    from lightning.pytorch.loggers.utilities import _scan_checkpoints
    from lightning.pytorch.utilities import rank_zero_only
except ImportError as error:
    raise missing_framework(error, "tallyboard.integrations.lightning") from error


def _rank() -> int:
    """This process's rank, which Lightning sets on `rank_zero_only` (its type does not say so)."""
    rank: int = rank_zero_only.rank  # type: ignore[attr-defined]
    return rank


if TYPE_CHECKING:  # pragma: no cover
    from lightning.pytorch.callbacks import ModelCheckpoint

    from tallyboard.alerts.rules import Rule
    from tallyboard.run.writer import LogWriter
    from tallyboard.table import ResultTable

# The ids of the runs the launching process created, in the order its loggers were made; a ``ddp``
# child process runs the same script, so its n-th logger is the launcher's n-th.
LAUNCHED_RUNS = "TALLYBOARD_LAUNCHED_RUNS"
_loggers_made = itertools.count()


class TallyboardLogger(Logger):
    """Log a Lightning run to a tallyboard run.

    Pass an open ``writer`` (from ``ResultTable.new_run``), or let the logger start the run with
    ``table.new_run(experiment_name, **run_kwargs)``. ``version=<run id>`` continues that run (resume
    from a checkpoint of it); ``TALLYBOARD_RUN_ID`` and a requeued SLURM job do the same without it.

    ``unique=True`` refuses (``DuplicateRunError``, raised here, before any training) a run whose
    experiment, ``hparams`` and config match a visible, non-failed run; pass the hyperparameters
    that make the run what it is as ``hparams``, since Lightning only reports them inside ``fit``.

    ``rules`` (tallyboard.alerts) watch the run; with ``stop_on_alert=True``, the callback
    ``StopOnAlert()`` (a logger cannot stop a trainer) stops ``fit`` once one with ``stop=True`` fired.
    """

    def __init__(
        self,
        writer: LogWriter | None = None,
        *,
        table: str | os.PathLike[str] | ResultTable = "results.db",
        experiment_name: str = "lightning",
        save_dir: str | os.PathLike[str] | None = None,
        version: int | None = None,
        unique: bool = False,
        hparams: Mapping[str, Any] | Namespace | None = None,
        log_model: bool | Literal["all"] = False,
        rules: Sequence[Rule] = (),
        stop_on_alert: bool = False,
        **run_kwargs: Any,
    ) -> None:
        super().__init__()
        if log_model not in (True, False, "all"):
            raise ValueError(f"log_model is True, False or 'all', got {log_model!r}")
        self._log_model = log_model
        self._checkpoint_callback: ModelCheckpoint | None = None
        self._model_times: dict[str, float] = {}  # checkpoints kept as artefacts, by path: mtime
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise TypeError(f"version is the id of the run to continue, an int; got {version!r}")
        self._save_dir = None if save_dir is None else os.fspath(save_dir)
        self._checkpoint_times: dict[str, float] = {}
        self._last_step: int | None = None
        position = next(_loggers_made)
        launched = [int(i) if i else None for i in os.environ.get(LAUNCHED_RUNS, "").split(",")]
        if _rank() != 0:  # a ddp child: the launcher made the run and named it
            version = version if version is not None else _nth(launched, position)
            self._run = FrameworkRun(None, table, experiment_name, run_kwargs, run_id=version)
            return
        self._run = FrameworkRun(writer, table, experiment_name, run_kwargs, unique=unique, run_id=version,
                                 rules=rules, stop_on_alert=stop_on_alert)  # fmt: skip
        params = _as_mapping(hparams)
        self._run.start(params)
        if params:
            self._run.log_hparams(params)
        known = ["" if run_id is None else str(run_id) for run_id in launched[:position]]
        os.environ[LAUNCHED_RUNS] = ",".join([*known, *[""] * (position - len(known)), str(self._run.run_id)])

    @property
    def name(self) -> str:
        return self._run.experiment_name

    @property
    def version(self) -> int | None:
        """The run's id."""
        return self._run.run_id

    @property
    def save_dir(self) -> str | None:
        """The root folder given (Lightning puts checkpoints under ``save_dir/name/version_<id>``)."""
        return self._save_dir

    @property
    def root_dir(self) -> str | None:
        return None if self._save_dir is None else os.path.join(self._save_dir, self.name)

    @property
    def log_dir(self) -> str | None:
        """``save_dir/name/version_<run id>``, the folder of this run's files, as CSVLogger names it."""
        root = self.root_dir
        return None if root is None else os.path.join(root, f"version_{self.version}")

    @property
    @rank_zero_experiment
    def experiment(self) -> LogWriter:
        """The LogWriter, for what Lightning does not log itself (``logger.experiment.add_image``)."""
        return self._run.writer

    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        """Namespaces, nested dicts and dataclasses are flattened to ``a/b`` columns."""
        params = _as_mapping(params)
        if params:
            self._run.log_hparams(params)

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        """A result table has no place for a graph: nothing is logged."""

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
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
        self._checkpoint_callback = checkpoint_callback
        if self._log_model == "all":
            self._log_checkpoints(checkpoint_callback, step=self._last_step)

    def _log_checkpoints(self, checkpoint_callback: ModelCheckpoint, step: int | None) -> None:
        """Keep the checkpoints not kept yet (or rewritten since) as artefacts of kind 'model', and
        wait for their copies: ModelCheckpoint deletes a file once a better one exists, so the copy
        must be done before training goes on. That wait is the cost of ``log_model="all"``; with
        ``log_model=True`` it is paid once, at the end."""
        for mtime, path, _score, _kind in _scan_checkpoints(checkpoint_callback, self._model_times):
            self._model_times[path] = mtime
            self.experiment.log_artifact(path, kind="model", step=step)
        self.experiment.flush()

    def finalize(self, status: str) -> None:
        """Lightning calls this at the end of every stage: "success", "failed", or "finished" (SIGTERM,
        SLURM's requeue signal). Only a failure ends the run; on any rank it marks the run failed.
        After a successful stage, ``log_model`` keeps the checkpoints left (as WandbLogger does)."""
        callback = self._checkpoint_callback
        if status == "success" and self._log_model and callback is not None and _rank() == 0:
            self._log_checkpoints(callback, step=None)
        if status != "failed":
            if _rank() == 0:
                self._run.release()
        elif _rank() == 0:
            self._run.fail()
        elif self._run.run_id is not None:
            self._run.open_table().load_run(self._run.run_id).set_status("failed")

    def write_result(self, **results: Any) -> None:
        """End the run now: its results row is each metric's last value, updated with ``results``."""
        self._run.finish(**results)


class StopOnAlert(Callback):  # type: ignore[misc]
    """Stops ``fit`` (``trainer.should_stop``) when a ``TallyboardLogger(stop_on_alert=True)`` of the
    trainer says a rule with ``stop=True`` fired; the run records that it stopped early, and why."""

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, TallyboardLogger) and logger._run.stop_early(
                "Lightning", trainer.global_step
            ):
                trainer.should_stop = True


def _as_mapping(params: Any) -> dict[str, Any]:
    """Hyperparameters as Lightning and users hand them over: a mapping, a Namespace, a dataclass."""
    if params is None:
        return {}
    if isinstance(params, Namespace):
        return vars(params)
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        return dataclasses.asdict(params)
    return dict(params)


def _nth(ids: list[int | None], position: int) -> int | None:
    return ids[position] if position < len(ids) else None

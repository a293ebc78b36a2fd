"""``TallyboardCallback``: a Hugging Face ``Trainer`` callback that writes to a tallyboard result table.

    trainer = Trainer(..., callbacks=[TallyboardCallback(table="results.db", experiment_name="bert")])

The ``TrainingArguments`` that matter (``training_hparams``) become the run's hparams; every log
becomes scalars at the global step, renamed to tallyboard's ``split/name`` tags the way other
trackers do (``loss`` -> ``train/loss``, ``eval_loss`` -> ``eval/loss``, ``test_acc`` ->
``test/acc``); every checkpoint saved becomes a text record holding its directory; the end of
training writes each metric's last value as the results row.
"""

from __future__ import annotations

import dataclasses
import math
import os
from numbers import Real
from typing import TYPE_CHECKING, Any

from tallyboard.integrations import FrameworkRun, missing_framework

try:
    from transformers import TrainerCallback
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
except ImportError as error:
    raise missing_framework(error, "tallyboard.integrations.transformers") from error

if TYPE_CHECKING:  # pragma: no cover
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from tallyboard.table import ResultTable
    from tallyboard.writer import LogWriter

_SPLIT_PREFIXES = (("eval_", "eval/"), ("test_", "test/"))
_CORE_ARGUMENTS = frozenset(
    {"learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size", "seed"}
)


def split_tag(key: str) -> str:
    """``eval_loss`` -> ``eval/loss``, ``test_f1`` -> ``test/f1``, anything else -> ``train/<key>``."""
    for prefix, split in _SPLIT_PREFIXES:
        if key.startswith(prefix):
            return split + key[len(prefix) :]
    return f"train/{key}"


def training_hparams(args: TrainingArguments) -> dict[str, Any]:
    """The ``TrainingArguments`` worth a column: the core ones and those changed from their defaults.

    All ~120 of them would bury the few that differ between runs under columns that never do.
    """
    defaults = {
        field.name: field.default
        for field in dataclasses.fields(args)
        if field.default is not dataclasses.MISSING
    }
    return {
        name: value
        for name, value in args.to_sanitized_dict().items()
        if name in _CORE_ARGUMENTS or name not in defaults or getattr(args, name, None) != defaults[name]
    }


class TallyboardCallback(TrainerCallback):
    """Log a Transformers ``Trainer`` run to a tallyboard run (from the main process only).

    Pass an open ``writer`` (from ``ResultTable.new_run``), or let the callback create the run when
    training begins with ``table.new_run(experiment_name, **run_kwargs)``.

    ``write_result_at_end=True`` (the default) writes the results row when training ends, which makes
    the run read-only. To also log a later ``trainer.evaluate()``, pass ``False`` and call
    ``callback.write_result(**extra)`` at the end.
    """

    def __init__(
        self,
        writer: LogWriter | None = None,
        *,
        table: str | os.PathLike[str] | ResultTable = "results.db",
        experiment_name: str = "transformers",
        write_result_at_end: bool = True,
        **run_kwargs: Any,
    ) -> None:
        self._run = FrameworkRun(writer, table, experiment_name, run_kwargs)
        self._write_result_at_end = write_result_at_end

    @property
    def writer(self) -> LogWriter:
        return self._run.writer

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if state.is_world_process_zero:
            self._run.log_hparams(training_hparams(args))

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not state.is_world_process_zero or not logs:
            return
        metrics = {
            split_tag(key): value
            for key, value in logs.items()
            if key != "epoch" and isinstance(value, Real) and not isinstance(value, bool)
        }
        # HF's epoch is fractional progress (1.0 once the first epoch is done); ours is the index of
        # the epoch the step belongs to.
        epoch = None if state.epoch is None else max(0, math.ceil(state.epoch) - 1)
        self._run.log_metrics(metrics, step=state.global_step, epoch=epoch)

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if state.is_world_process_zero:
            path = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
            self._run.writer.add_text(path, tag="checkpoints/latest", step=state.global_step)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero or not self._run.started:
            return
        if self._write_result_at_end:
            self._run.finish()
        else:
            self._run.writer.flush()

    def write_result(self, **results: Any) -> None:
        """Finish the run: its results row is each metric's last value, updated with ``results``."""
        self._run.finish(**results)

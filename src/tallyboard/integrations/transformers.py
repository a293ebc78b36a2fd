"""``TallyboardCallback``: a Hugging Face ``Trainer`` callback that writes to a tallyboard result table.

    trainer = Trainer(..., callbacks=[TallyboardCallback(table="results.db", experiment_name="bert")])

or, after ``tallyboard.integrations.transformers.register()``, ``TrainingArguments(report_to="tallyboard")``.

The whole ``TrainingArguments`` and the model's config are stored as the run's config (JSON); the
arguments the user set (``training_hparams``) become hparam columns. Every log
becomes scalars at the global step, renamed to tallyboard's ``split/name`` tags the way other
trackers do (``loss`` -> ``train/loss``, ``eval_loss`` -> ``eval/loss``, ``test_acc`` ->
``test/acc``; the fractional ``epoch`` is ``train/epoch``); every checkpoint saved becomes a text
record holding its directory, and holds the run's id (``RUN_FILE``) so that
``train(resume_from_checkpoint=...)`` continues the run. ``train``, ``evaluate`` and ``predict`` log
into one run, which ends with the process or with ``callback.write_result()``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
from collections.abc import Callable, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any, cast

from tallyboard.extras import missing_framework
from tallyboard.integrations import FrameworkRun

try:
    from transformers import TrainerCallback
    from transformers.integrations import integration_utils
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
except ImportError as error:
    raise missing_framework(error, "tallyboard.integrations.transformers") from error

if TYPE_CHECKING:  # pragma: no cover
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from tallyboard.alerts.rules import Rule
    from tallyboard.run.writer import LogWriter
    from tallyboard.table import ResultTable

_SPLIT_PREFIXES = (("eval_", "eval/"), ("test_", "test/"), ("predict_", "predict/"))
# Written into every checkpoint folder: the run that checkpoint belongs to.
RUN_FILE = "tallyboard_run.json"
REPORT_TO_NAME = "tallyboard"


def split_tag(key: str) -> str:
    """``eval_loss`` -> ``eval/loss``, ``test_f1`` -> ``test/f1``, ``predict_loss`` -> ``predict/loss``,
    anything else -> ``train/<key>``."""
    for prefix, split in _SPLIT_PREFIXES:
        if key.startswith(prefix):
            return split + key[len(prefix) :]
    return f"train/{key}"


def training_hparams(args: TrainingArguments) -> dict[str, Any]:
    """The ``TrainingArguments`` the user set: the hparam columns of the run.

    All ~120 of them would bury the few that differ between runs under columns that never do; the
    whole set is the run's config. An argument counts as set when it is a field (the batch sizes
    are properties) whose value is neither its declared default nor what ``__post_init__`` puts
    there when it was left alone: an unset default (None, '', 'none') filled with False, an empty
    list or a default object (``disable_tqdm``, ``debug``, ``report_to``, ``accelerator_config``),
    or a value derived from the other arguments (`_FILLED_IN`). So an argument set explicitly to
    such a value (``disable_tqdm=False``) is not a column either: it changes nothing.
    Building a ``TrainingArguments`` to compare with is no way to find them: every build sets up
    the devices, which resets accelerate's state under the running ``Trainer``.
    """
    sanitized = args.to_sanitized_dict()
    return {
        field.name: sanitized[field.name]
        for field in dataclasses.fields(args)
        if field.init and field.name in sanitized and not _left_alone(args, field)
    }


# What __post_init__ derives from the other arguments where an argument was left at its default
# (transformers 4.4x-5.x): each predicate says the value is that derived one.
_FILLED_IN: dict[str, Callable[[Any], bool]] = {
    "output_dir": lambda args: args.output_dir == "trainer_output",
    "gradient_checkpointing": lambda args: args.gradient_checkpointing == args.activation_checkpointing,
    "gradient_checkpointing_kwargs": lambda args: (
        args.gradient_checkpointing_kwargs == args.activation_checkpointing_kwargs
    ),
    "include_num_input_tokens_seen": lambda args: args.include_num_input_tokens_seen == "no",
    "do_eval": lambda args: args.eval_strategy != "no",
    "eval_steps": lambda args: args.eval_steps == args.logging_steps,
    "metric_for_best_model": lambda args: args.metric_for_best_model == "loss",
    "greater_is_better": lambda args: args.greater_is_better != args.metric_for_best_model.endswith("loss"),
    "dataloader_pin_memory": lambda args: args.use_cpu,
    "torch_compile": lambda args: bool(args.torch_compile_backend or args.torch_compile_mode),
}


def _left_alone(args: TrainingArguments, field: dataclasses.Field[Any]) -> bool:
    value = getattr(args, field.name)
    default = field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
    if value == default:
        return True
    if default in (None, "", "none") and _empty(value):
        return True
    filled = _FILLED_IN.get(field.name)
    try:
        return filled is not None and bool(filled(args))
    except (AttributeError, TypeError):  # an argument this version of transformers does not have
        return False


def _empty(value: Any) -> bool:
    """None, False, an empty text or container, or a config object with every default."""
    if value is None or value is False or (isinstance(value, (str, list, tuple, dict)) and not value):
        return True
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return False
    try:
        return bool(value == type(value)())
    except TypeError:  # fields without defaults: not a default object
        return False


def run_config(args: TrainingArguments, model: Any) -> str:
    """The run's config: every training argument and the model's config, as JSON."""
    config = getattr(model, "config", None)
    whole = {
        "training_arguments": args.to_dict(),
        "model_config": None if config is None else config.to_dict(),
    }
    return json.dumps(whole, indent=2, sort_keys=True, default=str)


def checkpoint_run(folder: str | os.PathLike[str]) -> int | None:
    """The id of the run a checkpoint folder belongs to, or None if it holds none."""
    try:
        with open(os.path.join(folder, RUN_FILE), encoding="utf-8") as file:
            return int(json.load(file)["run_id"])
    except FileNotFoundError:
        return None


def register() -> None:
    """Make ``TrainingArguments(report_to="tallyboard")`` add a ``TallyboardCallback()``: the table is
    ``$TALLYBOARD_URL`` (else ``results.db``), the experiment the arguments' ``run_name``."""
    integration_utils.INTEGRATION_TO_CALLBACK[REPORT_TO_NAME] = TallyboardCallback


class TallyboardCallback(TrainerCallback):
    """Log a Transformers ``Trainer`` run to a tallyboard run (from the main process only).

    Pass an open ``writer`` (from ``ResultTable.new_run``), or let the callback start the run when
    training begins with ``table.new_run(experiment_name, configfile=<arguments + model config>,
    **run_kwargs)``. Resuming from a checkpoint this callback saved continues its run, as do
    ``TALLYBOARD_RUN_ID`` and a requeued SLURM job.

    ``unique=True`` starts the run when the ``Trainer`` is built, and refuses it there
    (``DuplicateRunError``, before any training) if a visible, non-failed run has the same
    experiment, changed arguments, model config and config.

    ``rules`` (tallyboard.alerts) watch the run; ``stop_on_alert=True`` stops training
    (``control.should_training_stop``) at the next log once one with ``stop=True`` fired.
    """

    def __init__(
        self,
        writer: LogWriter | None = None,
        *,
        table: str | os.PathLike[str] | ResultTable | None = None,
        experiment_name: str | None = None,
        unique: bool = False,
        rules: Sequence[Rule] = (),
        stop_on_alert: bool = False,
        **run_kwargs: Any,
    ) -> None:
        self._experiment_name = experiment_name
        self._run = FrameworkRun(writer, table, experiment_name or "transformers", run_kwargs, unique=unique,
                                 rules=rules, stop_on_alert=stop_on_alert)  # fmt: skip

    @property
    def writer(self) -> LogWriter:
        return self._run.writer

    def _start(self, args: TrainingArguments, model: Any, resume_from: str | None) -> None:
        if self._run.started:
            return
        if self._experiment_name is None and args.run_name and args.run_name != args.output_dir:
            self._run.experiment_name = args.run_name
        if resume_from is not None:
            self._run.follow(checkpoint_run(resume_from))
        run_kwargs = self._run.run_kwargs
        if "configfile" not in run_kwargs:
            run_kwargs["configfile"] = io.StringIO(run_config(args, model))
        hparams = training_hparams(args)
        self._run.start({**hparams, "model": _model_config(model)})
        self._run.log_hparams(hparams)

    def on_init_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._run.unique and state.is_world_process_zero:
            self._start(args, kwargs.get("model"), args.resume_from_checkpoint)

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero:
            return
        resumed = _checkpoint(args, state.global_step)
        self._start(args, kwargs.get("model"), resumed if state.global_step > 0 else None)
        self._run.in_phase = True

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
        self._start(args, kwargs.get("model"), None)  # evaluate() or predict() without train()
        metrics = {
            split_tag(key): value
            for key, value in logs.items()
            if isinstance(value, Real) and not isinstance(value, bool)
        }
        # HF's epoch is fractional progress (1.0 once the first epoch is done), kept as train/epoch;
        # ours is the index of the epoch the step belongs to.
        epoch = None if state.epoch is None else max(0, math.ceil(state.epoch) - 1)
        self._run.log_metrics(cast("dict[str, float]", metrics), step=state.global_step, epoch=epoch)
        if self._run.stop_early("the Trainer", state.global_step):
            control.should_training_stop = True

    def on_predict(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """``predict`` reports its metrics (``test_loss``...) here only, never through ``on_log``."""
        self.on_log(args, state, control, logs=metrics, **kwargs)

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero:
            return
        path = _checkpoint(args, state.global_step)
        self._run.writer.add_text(path, tag="checkpoints/latest", step=state.global_step)
        if os.path.isdir(path):
            with open(os.path.join(path, RUN_FILE), "w", encoding="utf-8") as file:
                json.dump({"run_id": self._run.run_id}, file)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if state.is_world_process_zero:
            self._run.release()

    def write_result(self, **results: Any) -> None:
        """End the run now: its results row is each metric's last value, updated with ``results``."""
        self._run.finish(**results)


def _model_config(model: Any) -> Any:
    config = getattr(model, "config", None)
    return None if config is None else json.dumps(config.to_diff_dict(), sort_keys=True, default=str)


def _checkpoint(args: TrainingArguments, step: int) -> str:
    """The folder where the Trainer saves the checkpoint of `step`."""
    return os.path.join(args.output_dir or "", f"{PREFIX_CHECKPOINT_DIR}-{step}")

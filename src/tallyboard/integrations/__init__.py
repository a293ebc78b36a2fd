"""Adapters between tallyboard and other tools: torch.monitor, Lightning, Transformers.

Each adapter lives in its own module and imports its framework only when that module is imported,
so ``import tallyboard`` never pays for a framework the user does not use. What the framework
adapters have in common (a run opened on first use, hyperparameters flattened to table columns,
the last value of each metric written as the run's result) is ``FrameworkRun``.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
from argparse import Namespace
from collections.abc import Mapping, Sequence
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tallyboard.extras import missing_framework
from tallyboard.run.relaunch import record_launch, run_to_resume
from tallyboard.store.location import Location

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.alerts.rules import Rule
    from tallyboard.run.writer import LogWriter
    from tallyboard.table import ResultTable

log = logging.getLogger(__name__)

JsonScalar = str | int | float | bool | None


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module``, or fail with the ImportError of ``missing_framework``."""
    try:
        return import_module(module)
    except ImportError as error:
        raise missing_framework(error, purpose) from error


def flat_hparams(params: Mapping[str, Any], prefix: str = "") -> dict[str, JsonScalar]:
    """Nested dicts, namespaces and dataclasses flattened to ``a/b`` keys, values made JSON scalars.

    Numpy scalars and 0-d tensors become Python numbers; anything else that is not a JSON scalar (a list,
    a class, a function) is stored as its ``str()``, because an hparam column holds one scalar.
    """
    flat: dict[str, JsonScalar] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Namespace):
            value = vars(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        if isinstance(value, Mapping):
            flat.update(flat_hparams(value, prefix=f"{name}/"))
        else:
            flat[name] = _json_scalar(value)
    return flat


def _json_scalar(value: Any) -> JsonScalar:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # numpy scalar, 0-d tensor
        return value.item()
    return str(value)


_LOCATIONS = (str, os.PathLike, Location)  # what names a table not yet opened


class FrameworkRun:
    """The run a framework adapter logs to, and the rules of its life.

    - Identity: a given writer; else a known run id (``version=``, a checkpoint) continued with
      ``ResultTable.resume_run``; else the run ``relaunch.run_to_resume`` names (``TALLYBOARD_RUN_ID``,
      a requeued SLURM job); else a new run. A new run is a launch of its own (``unique=False``),
      unless the adapter opted in to uniqueness on (experiment, hparams, config).
    - Life: a trainer's phases (fit, validate, test, predict...) all log into it. It ends when the
      user ends it (``finish``) or when the process ends: as finished with its results row, or as
      failed if the process ends inside a phase (``in_phase``) or a crash already failed it.
    - Distribution: only the process that started or resumed the run ends it (``owner``). A process
      spawned to log into it (a ``ddp_spawn`` worker) attaches to it and detaches when done.
    - Alerts: ``rules`` (tallyboard.alerts) are added to the run when it starts; with
      ``stop_on_alert``, ``stop_early`` tells the adapter to stop training through its framework's
      own mechanism once a rule with ``stop=True`` fired, and the run records that it stopped, and why.
    """

    def __init__(
        self,
        writer: LogWriter | None,
        table: str | os.PathLike[str] | Location | ResultTable | None,
        experiment_name: str,
        run_kwargs: dict[str, Any],
        *,
        unique: bool = False,
        run_id: int | None = None,
        rules: Sequence[Rule] = (),
        stop_on_alert: bool = False,
    ) -> None:
        self._writer = writer
        self._table = table
        self._own_table = False  # opened here from a path (closed when the run ends), not the user's
        self.experiment_name = experiment_name
        self.run_kwargs = run_kwargs
        self.unique = unique
        self._run_id = writer.run_id if writer is not None else run_id
        self._pid = os.getpid()  # a copy unpickled in another process attaches instead of starting
        self.owner = True
        self.in_phase = False
        self.rules = list(rules)
        self.stop_on_alert = stop_on_alert
        self._stopped = False
        if writer is not None:
            self._add_rules(writer)

    def __getstate__(self) -> dict[str, Any]:
        """What a spawned process needs: the run's id and the table's location, not open connections."""
        state = dict(self.__dict__, _writer=None)
        if self._table is not None and not isinstance(self._table, _LOCATIONS):
            state["_table"] = self._table.location  # with its password: the worker must connect
        return state

    @property
    def run_id(self) -> int | None:
        return self._run_id

    def follow(self, run_id: int | None) -> None:
        """Continue run ``run_id`` (found in a checkpoint, say) rather than start one; before ``start``."""
        if run_id is not None and not self.started:
            self._run_id = run_id

    @property
    def started(self) -> bool:
        return self._writer is not None

    def open_table(self) -> ResultTable:
        from tallyboard.table import ResultTable

        if not isinstance(self._table, ResultTable):
            self._table = ResultTable(self._table)
            self._own_table = True
        return self._table

    def _close_own_table(self) -> None:
        """A table this run opened from a path is its own to close once the run ended, instead of
        leaving its connection to the garbage collector; a later read reconnects."""
        if self._own_table and self._table is not None and not isinstance(self._table, _LOCATIONS):
            self._table.close()

    @property
    def writer(self) -> LogWriter:
        if self._writer is None:
            if self._run_id is not None and os.getpid() != self._pid:
                return self.attach()
            return self.start()
        return self._writer

    def start(self, hparams: Mapping[str, Any] | None = None) -> LogWriter:
        """Continue the known or relaunched run, or create one (refused as a duplicate, in unique
        mode, when a run of the same experiment, ``hparams`` and config exists)."""
        if self._writer is not None:
            return self._writer
        table = self.open_table()
        run_id = self._run_id if self._run_id is not None else run_to_resume(table, self.experiment_name)
        if run_id is not None:
            self._writer = table.resume_run(run_id)
        else:
            unique: bool | dict[str, Any] = bool(self.unique)
            if self.unique and hparams:
                unique = flat_hparams(hparams)
            refuse = {"on_duplicate": "raise"} if self.unique else {}  # what opting in to uniqueness asks
            self._writer = table.new_run(self.experiment_name, unique=unique, **{**refuse, **self.run_kwargs})
            record_launch(self._writer)
        self._run_id = self._writer.run_id
        self._add_rules(self._writer)
        atexit.register(self._at_exit)
        return self._writer

    def _add_rules(self, writer: LogWriter) -> None:
        for rule in self.rules:
            writer.add_rule(rule)

    def stop_early(self, framework: str, step: int | None = None) -> bool:
        """Whether the adapter should stop training now (opted in, and a stop rule fired); the
        first time, the run records an alert 'stopped early' that names the rule's alert."""
        if not (self.stop_on_alert and self.writable) or not self.writer.should_stop():
            return False
        reason = self.writer.stop_reason
        if not self._stopped and reason is not None:
            self._stopped = True
            text = f"{framework} stopped training: {reason.title} ({reason.text})"
            self.writer.alert("stopped early", text, level="warn", step=step)
        return True

    def attach(self) -> LogWriter:
        """Log into the run another process started and ends (this one is a spawned worker)."""
        assert self._run_id is not None
        self.owner = False
        self._writer = self.open_table().resume_run(self._run_id)
        return self._writer

    def log_hparams(self, params: Mapping[str, Any]) -> None:
        self.writer.add_hparams(flat_hparams(params))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None, epoch: int | None) -> None:
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, value, step=step, epoch=epoch)

    @property
    def writable(self) -> bool:
        return self._writer is not None and self._writer.enabled

    def finish(self, **results: Any) -> None:
        """End the run as finished; its results row is the last value of every scalar it holds
        (logged by any process, before any resume), updated with ``results``. Once; a run that
        another process (a crashed rank) marked failed stays failed."""
        if not self.writable:
            return
        atexit.unregister(self._at_exit)
        writer = self.writer
        if not self.owner:
            writer.detach()
        elif writer.status == "failed":
            writer.close("failed")
        else:
            writer.write_result(**{**last_values(writer), **results})
        self._close_own_table()

    def release(self) -> None:
        """A phase ended well: make what it logged durable; a worker lets go of the run."""
        self.in_phase = False
        if self.writable:
            if self.owner:
                self.writer.flush()
            else:
                self.writer.detach()

    def fail(self) -> None:
        """End the run as failed, durably, exactly as leaving its ``with`` block on an exception does."""
        self.in_phase = False
        atexit.unregister(self._at_exit)
        if self.writable:
            self.writer.close(status="failed")
        self._close_own_table()

    def _at_exit(self) -> None:
        """The process is ending: so is the run, unless the user or a crash ended it already."""
        atexit.unregister(self._at_exit)
        if not (self.writable and self.owner):
            return
        try:
            self.fail() if self.in_phase else self.finish()
        except Exception:  # the interpreter is going away; say so, never raise from here
            log.exception("tallyboard: could not end run %s at exit", self._run_id)


def last_values(writer: LogWriter) -> dict[str, float]:
    """The last logged value of each scalar tag of the run, read back from the store."""
    writer.flush()
    values = {}
    for tag in writer.scalars:
        series = writer.get_scalar_arrays(tag, columns=("value",))["value"]
        if len(series):
            values[tag] = float(series[-1])
    return values

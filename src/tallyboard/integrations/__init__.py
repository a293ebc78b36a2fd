"""Adapters between tallyboard and other tools: torch.monitor, Lightning, Transformers.

Each adapter lives in its own module and imports its framework only when that module is imported,
so ``import tallyboard`` never pays for a framework the user does not use. What the framework
adapters have in common (a run opened on first use, hyperparameters flattened to table columns,
the last value of each metric written as the run's result) is ``FrameworkRun``.
"""

from __future__ import annotations

import dataclasses
import os
from argparse import Namespace
from collections.abc import Mapping
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.table import ResultTable
    from tallyboard.writer import LogWriter

JsonScalar = str | int | float | bool | None


def missing_framework(error: ImportError, purpose: str) -> ImportError:
    """The error to raise when a framework import fails: it names the pip extra that installs it."""
    return ImportError(
        f"{purpose} needs {error.name or 'a package'!r}, which is not installed: "
        "pip install 'tallyboard[integrations]'",
        name=error.name,
    )


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


class FrameworkRun:
    """The run a framework adapter logs to: given, or created on first use with ``table.new_run``.

    Creating it late matters in distributed training, where only the process that logs (rank zero)
    may create a row in the table.
    """

    def __init__(
        self,
        writer: LogWriter | None,
        table: str | os.PathLike[str] | ResultTable,
        experiment_name: str,
        run_kwargs: dict[str, Any],
    ) -> None:
        self._writer = writer
        self._table = table
        self.experiment_name = experiment_name
        self._run_kwargs = run_kwargs
        self.last_metrics: dict[str, float] = {}
        self.finished = False

    @property
    def started(self) -> bool:
        return self._writer is not None

    @property
    def writer(self) -> LogWriter:
        if self._writer is None:
            from tallyboard.table import ResultTable

            table = self._table if isinstance(self._table, ResultTable) else ResultTable(self._table)
            self._writer = table.new_run(self.experiment_name, **self._run_kwargs)
        return self._writer

    def log_hparams(self, params: Mapping[str, Any]) -> None:
        self.writer.add_hparams(_clear_of_run_fields(flat_hparams(params), "hparams"))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None, epoch: int | None) -> None:
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, value, step=step, epoch=epoch)
            self.last_metrics[tag] = float(value)

    def finish(self, **results: Any) -> None:
        """Write the final row: the last value of every metric, updated with ``results``; once."""
        if not self.finished:
            self.finished = True
            self.writer.write_result(**_clear_of_run_fields({**self.last_metrics, **results}, "results"))

    def fail(self) -> None:
        """End the run as failed, durably, exactly as leaving its ``with`` block on an exception does."""
        if self.started and not self.finished:
            self.finished = True
            self.writer.close(status="failed")


def _clear_of_run_fields(values: dict[str, Any], kind: str) -> dict[str, Any]:
    """Frameworks name things freely; a name that is a column of every run (``hidden``, ``tag``,
    ``status``...) is renamed ``<kind>/<name>`` rather than refused."""
    from tallyboard.store.base import RUN_FIELDS

    return {f"{kind}/{name}" if name in RUN_FIELDS else name: value for name, value in values.items()}

"""`import tallyboard.mlflow as mlflow`: MLflow's tracking functions, logging into a result table
(docs/coming-from.md).

An MLflow experiment is the table's experiment, a run one of its runs: params are hparams, metrics
scalars (their latest values become the run's results when it ends, as MLflow's runs table shows
them), tags run tags 'key=value' ('mlflow.note.content' is the note), `log_figure`/`log_image`/
`log_text`/`log_dict`/`log_table` the run's figures, images, texts and tables under the artefact
file's name, `log_artifact(s)` files kept with the run. The table: `set_tracking_uri` (a path, a
folder, 'sqlite:///file.db' or a postgresql:// URL), else $TALLYBOARD_URL, else results.db here.
Run ids are the table's (as strings, like MLflow's). A metric logged without `step` gets the next
step of its series (MLflow writes 0). Models, datasets and autologging are not stored: counted and
warned about once (skins/not_stored.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tallyboard.skins import images
from tallyboard.skins.launch import Launched, default_location, launch
from tallyboard.skins.names import scalar
from tallyboard.skins.not_stored import NotStored

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "ActiveRun", "Experiment", "MlflowException", "active_run", "autolog", "create_experiment",
    "delete_tag", "end_run", "get_experiment_by_name", "get_tracking_uri", "last_active_run",
    "log_artifact", "log_artifacts", "log_dict", "log_figure", "log_image", "log_input", "log_metric",
    "log_metrics", "log_param", "log_params", "log_table", "log_text", "set_experiment", "set_tag",
    "set_tags", "set_tracking_uri", "start_run",
]  # fmt: skip

DEFAULT_EXPERIMENT = "Default"  # MLflow's experiment when none is set
NOTE_TAG = "mlflow.note.content"


class MlflowException(Exception):
    """What MLflow raises for a misuse (a second run started without `nested=True`...)."""


@dataclass
class Experiment:
    """An experiment: its id is its name (the table keys experiments by name)."""

    name: str
    experiment_id: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    lifecycle_stage: str = "active"

    def __post_init__(self) -> None:
        self.experiment_id = self.experiment_id or self.name


@dataclass
class RunInfo:
    run_id: str
    run_name: str | None
    experiment_id: str
    start_time: int  # milliseconds since the epoch, as MLflow's
    status: str = "RUNNING"
    end_time: int | None = None
    artifact_uri: str | None = None

    @property
    def run_uuid(self) -> str:
        return self.run_id


@dataclass
class RunData:
    """What this process logged into the run (MLflow reads it from its server)."""

    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)  # the latest value of each
    tags: dict[str, str] = field(default_factory=dict)


class ActiveRun:
    """A run started by `start_run`; a context manager that ends it (FAILED when an exception
    leaves the block, which the run keeps as how it failed)."""

    _failure: BaseException | None = None  # the exception leaving the `with` block

    def __init__(self, launched: Launched, experiment: str, run_name: str | None) -> None:
        self._launched = launched
        self.writer = launched.writer
        started = int(launched.started * 1000)
        self.info = RunInfo(str(self.writer.run_id), run_name, experiment, started, artifact_uri=None)
        self.data = RunData()
        self._not_stored = NotStored("mlflow")
        self.writer.before_end(self._at_end)

    def _at_end(self) -> None:
        """However the run ends: the latest metrics as results, what was not stored."""
        self.writer.update_results(**self.data.metrics)
        self._not_stored.report_to(self.writer)

    def end(self, status: str) -> None:
        if self._failure is not None:
            self.writer.__exit__(type(self._failure), self._failure, self._failure.__traceback__)
        self.writer.close("finished" if status == "FINISHED" else "failed")  # (no-op once ended)
        self._launched.close_table()
        self.info.status, self.info.end_time = status, int(time.time() * 1000)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self in _active:
            self._failure = exc
            end_run("FINISHED" if exc_type is None else "FAILED")


_tracking_uri: str | None = None
_experiment = DEFAULT_EXPERIMENT
_active: list[ActiveRun] = []  # nested runs on top
_last: ActiveRun | None = None
_no_run = NotStored("mlflow")  # calls made with no run to count them


# ---- where and which experiment --------------------------------------------------------------------
def set_tracking_uri(uri: str | os.PathLike[str]) -> None:
    """Where runs go: a table file, a folder (results.db in it), 'sqlite:///file.db' or a
    postgresql:// URL. An MLflow server's URL has no table behind it: refused."""
    global _tracking_uri
    text = os.fspath(uri)
    if text.startswith(("http://", "https://", "databricks")):
        raise MlflowException(f"tallyboard.mlflow logs into a result table, not to a server: {text!r}")
    text = text.removeprefix("file://").removeprefix("sqlite:///")
    _tracking_uri = default_location(text) if os.path.isdir(text) and "://" not in text else text


def get_tracking_uri() -> str:
    return _tracking_uri or default_location()


def set_experiment(experiment_name: str | None = None, experiment_id: str | None = None) -> Experiment:
    """The experiment the next runs belong to (the id is the name)."""
    global _experiment
    name = experiment_name or experiment_id
    if not name:
        raise MlflowException("set_experiment needs an experiment name (or id)")
    _experiment = name
    return Experiment(name)


def create_experiment(
    name: str, artifact_location: str | None = None, tags: Mapping[str, Any] | None = None
) -> str:
    """An experiment exists once a run of it starts; this only gives its id (its name)."""
    return name


def get_experiment_by_name(name: str) -> Experiment | None:
    """The experiment if a run of it is in the table."""
    from tallyboard.table import ResultTable

    if not os.path.exists(get_tracking_uri()) and "://" not in get_tracking_uri():
        return None
    with ResultTable(get_tracking_uri(), read_only=True) as table:
        found = any(run.experiment == name for run in table.query(backend="records", show_hidden=True))
    return Experiment(name) if found else None


# ---- runs ------------------------------------------------------------------------------------------------
def start_run(
    run_id: str | None = None,
    experiment_id: str | None = None,
    run_name: str | None = None,
    nested: bool = False,
    parent_run_id: str | None = None,
    tags: Mapping[str, Any] | None = None,
    description: str | None = None,
    log_system_metrics: bool | None = None,
) -> ActiveRun:
    """Start a run (or continue run `run_id`); a second one needs `nested=True`."""
    global _last
    if _active and not nested:
        raise MlflowException(
            f"run {_active[-1].info.run_id} is already active: end it with mlflow.end_run(), or start "
            "a nested run with start_run(nested=True)"
        )
    experiment = experiment_id or _experiment
    resumed = None if run_id is None else int(run_id)
    started = launch(
        get_tracking_uri(), experiment, run_name, run_id=resumed, system_metrics=bool(log_system_metrics)
    )
    active = ActiveRun(started, experiment, run_name)
    _active.append(active)
    _last = active
    parent = parent_run_id or (_active[-2].info.run_id if nested and len(_active) > 1 else None)
    set_tags({**({"mlflow.parentRunId": parent} if parent else {}), **(tags or {})})
    if description:
        set_tag(NOTE_TAG, description)
    return active


def active_run() -> ActiveRun | None:
    return _active[-1] if _active else None


def last_active_run() -> ActiveRun | None:
    return _last


def end_run(status: str = "FINISHED") -> None:
    """End the active run: FINISHED is finished; FAILED and KILLED are failed."""
    if status not in ("FINISHED", "FAILED", "KILLED"):
        raise MlflowException(f"status must be FINISHED, FAILED or KILLED, got {status!r}")
    global _last
    if _active:
        _last = _active.pop()
        _last.end(status)


def _run(call: str, run_id: str | None = None) -> ActiveRun:
    """The active run; one is started (as MLflow does) when there is none."""
    active = _active[-1] if _active else start_run()
    if run_id is not None and str(run_id) != active.info.run_id:
        raise MlflowException(
            f"{call}: tallyboard.mlflow logs into the active run ({active.info.run_id}) only"
        )
    return active


# ---- params, metrics, tags -------------------------------------------------------------------------------
def log_param(key: str, value: Any, synchronous: bool | None = None) -> Any:
    log_params({key: value})
    return value


def log_params(params: Mapping[str, Any], synchronous: bool | None = None, run_id: str | None = None) -> None:
    active = _run("log_params", run_id)
    values = {str(key): scalar(value) for key, value in params.items()}
    active.writer.add_hparams(values)
    active.data.params.update(values)


def log_metric(
    key: str,
    value: float,
    step: int | None = None,
    synchronous: bool | None = None,
    timestamp: int | None = None,
    run_id: str | None = None,
    **options: Any,
) -> None:
    """A metric's value at `step`; `timestamp` (milliseconds since the epoch) is its wall time."""
    active = _run("log_metric", run_id)
    walltime = None if timestamp is None else timestamp / 1000 - active._launched.started
    active.writer.add_scalar(key, value, step, walltime=walltime)
    active.data.metrics[key] = float(value)


def log_metrics(
    metrics: Mapping[str, float],
    step: int | None = None,
    synchronous: bool | None = None,
    run_id: str | None = None,
    timestamp: int | None = None,
    **options: Any,
) -> None:
    for key, value in metrics.items():
        log_metric(key, value, step, timestamp=timestamp, run_id=run_id)


def set_tag(key: str, value: Any, synchronous: bool | None = None) -> None:
    set_tags({key: value})


def set_tags(tags: Mapping[str, Any], synchronous: bool | None = None) -> None:
    """Tags as run tags 'key=value' (a key set again replaces its value); the note tag is the note."""
    active = _run("set_tags")
    for key, value in tags.items():
        if key == NOTE_TAG:
            active.writer.set_note(str(value))
        else:
            delete_tag(key)
            active.writer.add_tags(f"{key}={value}")
        active.data.tags[key] = str(value)


def delete_tag(key: str) -> None:
    active = _run("delete_tag")
    active.writer.remove_tags(*(tag for tag in active.writer.get_tags() if tag.startswith(f"{key}=")))
    active.data.tags.pop(key, None)


# ---- artefacts, figures, images, texts, tables ----------------------------------------------------------
def log_artifact(
    local_path: str | os.PathLike[str], artifact_path: str | None = None, run_id: str | None = None
) -> None:
    """Keep a file with the run, as '<artifact_path>/<file name>'. Returns once it is copied, as
    MLflow's does: the file may be deleted right after."""
    _keep(_run("log_artifact", run_id), [(Path(local_path), Path(local_path).name)], artifact_path)


def log_artifacts(
    local_dir: str | os.PathLike[str], artifact_path: str | None = None, run_id: str | None = None
) -> None:
    """Keep every file under a folder with the run, named by its path in it (copied on return)."""
    root = Path(local_dir)
    if not root.is_dir():
        raise NotADirectoryError(f"cannot log the artefacts of {os.fspath(local_dir)!r}: not a folder")
    files = [(file, file.relative_to(root).as_posix()) for file in sorted(root.rglob("*")) if file.is_file()]
    _keep(_run("log_artifacts", run_id), files, artifact_path)


def _keep(active: ActiveRun, files: list[tuple[Path, str]], artifact_path: str | None) -> None:
    for path, name in files:
        active.writer.log_artifact(path, f"{artifact_path}/{name}" if artifact_path else name)
    active.writer.flush()  # the copies are made: the caller may remove the files now


def log_figure(figure: Any, artifact_file: str, *, save_kwargs: Mapping[str, Any] | None = None) -> None:
    """A matplotlib figure, shown with the run's figures under `artifact_file`."""
    from tallyboard import media

    active = _run("log_figure")
    if not media.is_figure(figure):
        return active._not_stored.skip(f"log_figure of a {type(figure).__name__}", "only matplotlib figures")
    active.writer.add_figure(figure, tag=artifact_file)
    return None


def log_image(
    image: Any,
    artifact_file: str | None = None,
    *,
    key: str | None = None,
    step: int | None = None,
    timestamp: int | None = None,
    synchronous: bool | None = None,
) -> None:
    """A PIL image or an HW/HWC array (floats in [0, 1], integers in [0, 255]) under `key` or
    `artifact_file`."""
    if type(image).__module__.split(".")[0] in ("numpy", "torch"):
        import numpy as np

        array = images.as_array(image)
        if np.issubdtype(array.dtype, np.integer):
            if array.size and (array.min() < 0 or array.max() > 255):
                raise ValueError("an integer image must hold values in [0, 255]")
            array = array.astype(np.uint8)
        image = array
    _run("log_image").writer.add_image(image, step, tag=key or artifact_file)


def log_text(text: str, artifact_file: str, synchronous: bool | None = None) -> None:
    _run("log_text").writer.add_text(text, tag=artifact_file)


def log_dict(dictionary: Mapping[str, Any], artifact_file: str, synchronous: bool | None = None) -> None:
    """A dict as a text under `artifact_file`: YAML for a .yaml/.yml name when PyYAML is there,
    else JSON."""
    text = json.dumps(dictionary, indent=2, default=str)
    if artifact_file.endswith((".yaml", ".yml")):
        try:
            import yaml

            text = yaml.safe_dump(dict(dictionary), sort_keys=False)
        except ImportError:
            pass
    _run("log_dict").writer.add_text(text, tag=artifact_file)


def log_table(data: Any, artifact_file: str, run_id: str | None = None) -> None:
    """A dict of columns or a pandas DataFrame, as one of the run's tables."""
    if isinstance(data, Mapping):
        columns = [str(name) for name in data]
        rows: Any = zip(*(list(values) for values in data.values()), strict=True)
    else:
        columns = [str(name) for name in data.columns]
        rows = data.itertuples(index=False, name=None)
    _run("log_table", run_id).writer.add_table(columns, rows, tag=artifact_file)


# ---- what the table does not hold --------------------------------------------------------------------------
def _skipped(call: str, why: str) -> Any:
    def skipped(*args: Any, **kwargs: Any) -> None:
        (_active[-1]._not_stored if _active else _no_run).skip(call, why, stacklevel=3)

    skipped.__name__ = skipped.__qualname__ = call.rsplit(".", 1)[-1]
    skipped.__doc__ = f"Not stored by tallyboard.mlflow ({call}): counted, warned about once."
    return skipped


autolog = _skipped("autolog", "log what you need with log_metric and log_param")
log_input = _skipped("log_input", "datasets")
log_model = _skipped("log_model", "models: keep the file with log_artifact")
register_model = _skipped("register_model", "a model registry")


class _Flavor:
    """`mlflow.pytorch`, `mlflow.sklearn`...: their `log_model`, `autolog` and the rest are not stored."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, call: str) -> Any:
        if call.startswith("__"):
            raise AttributeError(call)
        return _skipped(f"{self._name}.{call}", "models and autologging")


pytorch, sklearn, keras, tensorflow, transformers, lightning = map(
    _Flavor, ("pytorch", "sklearn", "keras", "tensorflow", "transformers", "lightning")
)

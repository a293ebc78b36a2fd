"""`import tallyboard.wandb as wandb`: W&B's module API, logging into a result table (docs/coming-from.md).

`wandb.init` starts a run of the table: `project` is its experiment, `name` its comment, `config`
its hparams, `notes` its note, `tags` its tags, `group` its tag field; `wandb.log`, `wandb.summary`,
`wandb.finish`, `define_metric`, `Image`, `Histogram`, `Table`, `save`, `log_artifact` are the
run's (skins/wandb_run.py). The table: `table=` (ours), else $TALLYBOARD_URL, else `results.db`
in `dir` (default: the working directory). Nothing is sent anywhere: modes 'online' and 'offline'
both log into the table, 'disabled' (or WANDB_MODE=disabled) ignores every call.

Each launch is a new run. `id=` with `resume=` 'allow', 'must', 'auto' or True continues the run
started with that id (kept as its tag 'wandb_id=<id>'); `reinit` decides what a second `init` does.
What the table cannot hold (watch, sweeps, audio, video, plots) is a no-op, counted and warned
about once, so a script never stops at it.
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tallyboard.run.relaunch import resumable_id
from tallyboard.skins.launch import launch, open_table
from tallyboard.skins.not_stored import NotStored
from tallyboard.skins.wandb_data import Artifact, Histogram, Html, Image, Table, not_stored_media
from tallyboard.skins.wandb_run import WANDB_ID_TAG, Config, Metric, Run, Settings, Summary, as_dict

__all__ = [
    "AlertLevel", "Artifact", "Audio", "Config", "Histogram", "Html", "Image", "Metric", "Molecule",
    "Object3D", "Run", "Settings", "Summary", "Table", "Video", "agent", "alert", "config",
    "define_metric", "finish", "init", "log", "log_artifact", "login", "mark_preempting", "plot",
    "run", "save", "setup", "summary", "sweep", "teardown", "unwatch", "use_artifact", "watch",
]  # fmt: skip

Audio = not_stored_media("Audio")
Video = not_stored_media("Video")
Object3D = not_stored_media("Object3D")
Molecule = not_stored_media("Molecule")
Plotly = not_stored_media("Plotly")


class AlertLevel(enum.Enum):
    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


class _BeforeInit:
    """`wandb.config` / `wandb.summary` before `init` (and after `finish`): any use says why."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"call wandb.init() before using {self._name}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._refuse()

    __setattr__ = __getitem__ = __setitem__ = __contains__ = __iter__ = _refuse


run: Run | None = None
config: Config | Any = _BeforeInit("wandb.config")
summary: Summary | Any = _BeforeInit("wandb.summary")
_before_any_run = NotStored("wandb")  # calls made with no run to count them


def _env(value: Any, variable: str) -> Any:
    return value if value is not None else (os.environ.get(variable) or None)


def init(
    project: str | None = None,
    entity: str | None = None,
    config: Mapping[str, Any] | Any = None,
    name: str | None = None,
    notes: str | None = None,
    tags: Sequence[str] | None = None,
    group: str | None = None,
    job_type: str | None = None,
    dir: str | os.PathLike[str] | None = None,
    mode: str | None = None,
    reinit: bool | str | None = None,
    resume: bool | str | None = None,
    id: str | None = None,
    resume_from: str | None = None,
    fork_from: str | None = None,
    save_code: bool | None = None,
    anonymous: str | None = None,
    allow_val_change: bool | None = None,
    config_exclude_keys: Sequence[str] | None = None,
    config_include_keys: Sequence[str] | None = None,
    settings: Settings | Mapping[str, Any] | None = None,
    sync_tensorboard: bool | None = None,
    monitor_gym: bool | None = None,
    *,
    table: Any = None,
) -> Run:
    """Start a run (or, per `reinit`, return the one running); W&B's environment variables
    (WANDB_PROJECT, WANDB_MODE, WANDB_NAME, WANDB_NOTES, WANDB_TAGS, WANDB_RUN_GROUP, WANDB_RUN_ID,
    WANDB_RESUME, WANDB_DIR) fill what is not given."""
    active = run
    policy = reinit if reinit is not None else (settings or {}).get("reinit")
    if active is not None and policy in (None, False, "default", "return_previous"):
        return active
    if active is not None and policy in (True, "finish_previous"):
        active.finish()
    mode = _env(mode if mode is not None else (settings or {}).get("mode"), "WANDB_MODE")
    disabled = mode == "disabled" or os.environ.get("WANDB_DISABLED", "").lower() in ("true", "1")
    project = _env(project, "WANDB_PROJECT") or "uncategorized"
    wandb_id, resume = _env(id, "WANDB_RUN_ID"), _env(resume, "WANDB_RESUME")
    folder = _env(dir, "WANDB_DIR")
    name = _env(name, "WANDB_NAME")
    if disabled:
        started = launch(None, project, disable=True)
    else:
        opened, own = open_table(table, folder)
        try:
            resumed = _run_to_resume(opened, project, wandb_id, resume)
            started = launch(opened, project, name, run_id=resumed)
        except BaseException:
            if own:
                opened.close()
            raise
        started.own_table = own
    new = Run(started, project, name, wandb_id, folder, _forget)
    tags = tags if tags is not None else os.environ.get("WANDB_TAGS")
    new.describe(
        _env(notes, "WANDB_NOTES"), tags, _env(group, "WANDB_RUN_GROUP"), _env(job_type, "WANDB_JOB_TYPE")
    )
    new.config.update(_chosen_keys(config, config_include_keys, config_exclude_keys))
    _make_current(new)
    return new


def _run_to_resume(table: Any, project: str, wandb_id: str | None, resume: Any) -> int | None:
    """The run to continue for `id` + `resume`, None for a new one; 'must' without one, or 'never'
    with one, is an error."""
    if wandb_id is None or resume in (None, False):
        return None
    tag = WANDB_ID_TAG.format(wandb_id)
    found = [r.run_id for r in table.query(backend="records") if r.experiment == project and tag in r.tags]
    if resume == "never" and found:
        raise ValueError(f"wandb.init(id={wandb_id!r}, resume='never'): that run exists (run {found[-1]})")
    if resume == "must" and not found:
        raise ValueError(f"wandb.init(id={wandb_id!r}, resume='must'): no run of {project!r} has that id")
    # found in this table: through a spool (a server), by the spool's id; resumed by the server's
    return resumable_id(table, found[-1]) if found and resume != "never" else None


def _chosen_keys(values: Any, include: Sequence[str] | None, exclude: Sequence[str] | None) -> dict[str, Any]:
    chosen = as_dict(values)
    if include:
        chosen = {key: value for key, value in chosen.items() if key in include}
    return {key: value for key, value in chosen.items() if key not in (exclude or ())}


def _make_current(new: Run) -> None:
    global run, config, summary
    run, config, summary = new, new.config, new.summary


def _forget(ended: Run) -> None:
    """A finished run stops being `wandb.run` (its object keeps its config and summary)."""
    global run, config, summary
    if run is ended:
        run, config, summary = None, _BeforeInit("wandb.config"), _BeforeInit("wandb.summary")


def _current(call: str) -> Run:
    if run is None:
        raise RuntimeError(f"call wandb.init() before wandb.{call}()")
    return run


# ---- the current run's calls ----------------------------------------------------------------------------
def log(
    data: Mapping[str, Any], step: int | None = None, commit: bool | None = None, sync: bool | None = None
) -> None:
    """`run.log` of the current run."""
    _current("log").log_at(data, step, commit, depth=2)


def finish(exit_code: int | None = None, quiet: bool | None = None) -> None:
    """End the current run (none running: nothing to do)."""
    if run is not None:
        run.finish(exit_code, quiet)


def define_metric(name: str, step_metric: str | None = None, step_sync: bool | None = None,
                  hidden: bool | None = None, summary: str | None = None, goal: str | None = None,
                  overwrite: bool | None = None) -> Metric:  # fmt: skip
    return _current("define_metric").define_metric(
        name, step_metric, step_sync, hidden, summary, goal, overwrite
    )


def save(glob_str: str, base_path: str | None = None, policy: str = "live") -> list[str]:
    return _current("save").save(glob_str, base_path, policy)


def log_artifact(artifact_or_path: Any, name: str | None = None, type: str | None = None,
                 aliases: Any = None, tags: Any = None) -> Artifact:  # fmt: skip
    return _current("log_artifact").log_artifact(artifact_or_path, name, type, aliases, tags)


def alert(title: str, text: str, level: Any = None, wait_duration: Any = None) -> None:
    _current("alert").alert(title, text, level, wait_duration)


def _on_run(call: str, why: str = "", returns: Any = None) -> Callable[..., Any]:
    """A module function the table cannot do: counted in the current run (or before any)."""

    def skipped(*args: Any, **kwargs: Any) -> Any:
        (run._not_stored if run is not None else _before_any_run).skip(call, why, stacklevel=3)
        return returns

    skipped.__name__ = skipped.__qualname__ = call
    skipped.__doc__ = f"Not stored by tallyboard.wandb ({call}): counted, warned about once."
    return skipped


watch = _on_run("watch", "gradients and parameters of a model")
unwatch = _on_run("unwatch")
use_artifact = _on_run("use_artifact", "reading W&B artifacts")
mark_preempting = _on_run("mark_preempting")
sweep = _on_run("sweep", "sweeps run nothing here", returns="tallyboard-no-sweep")
agent = _on_run("agent", "sweeps run nothing here: the function was not called")


def login(*args: Any, **kwargs: Any) -> bool:
    """Nothing to log in to: the table is local (or the database's own credentials)."""
    return True


def setup(settings: Any = None) -> None:
    """Nothing to set up."""


def teardown(exit_code: int | None = None) -> None:
    finish(exit_code)


def termlog(message: str = "", **options: Any) -> None:
    print(f"wandb: {message}", file=sys.stderr)


termwarn = termerror = termlog


class _Plots:
    """`wandb.plot.<chart>(...)`: charts W&B draws from tables; logged, each is counted as not stored."""

    def __getattr__(self, chart: str) -> Callable[..., Any]:
        if chart.startswith("__"):
            raise AttributeError(chart)
        return lambda *args, **kwargs: not_stored_media(f"plot.{chart}")()


plot = _Plots()

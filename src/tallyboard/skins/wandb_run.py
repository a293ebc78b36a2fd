"""The W&B run of `tallyboard.wandb`: its config, summary, step counter and metric rules, over one
`LogWriter`.

- `config` is the run's hparams: attribute and item access, nested dicts (stored as 'a/b'),
  `update`; every change is written at once.
- `log(dict, step=, commit=)` follows W&B's step rule: a call without `step` logs at the current
  step and moves on (unless `commit=False`); `step=N` logs at N, and a later step moves the current
  one. Nested dicts become 'split/name' tags; numbers are scalars, strings texts, arrays and lists of
  numbers histograms; `Image`, `Histogram`, `Table`, `Html` and figures their own kinds.
- `summary` holds the last value of each logged number (or what `define_metric(summary=...)` asks
  for, nested as 'loss/min'), and what the script sets; it becomes the run's results: what is set
  at once, the rest when the run ends (however it ends: `before_end`).
"""

from __future__ import annotations

import fnmatch
import glob
import numbers
import os
from argparse import Namespace
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tallyboard.errors import ArtifactError
from tallyboard.skins.names import flat, scalar
from tallyboard.skins.not_stored import NotStored, not_stored_method
from tallyboard.skins.wandb_data import Artifact, Histogram, Html, Image, NotStoredMedia, Table
from tallyboard.values import to_int

if TYPE_CHECKING:
    from typing_extensions import Self

    from tallyboard.skins.launch import Launched

DASHBOARD = "http://127.0.0.1:8765"  # where `tallyboard serve` listens by default
WANDB_ID_TAG = "wandb_id={}"  # the run tag that keeps a W&B id given to `init` (for `resume`)
SUMMARY_WORDS = ("min", "max", "mean", "first", "last", "best", "none", "copy")


class Settings(dict[str, Any]):
    """`wandb.Settings(...)`: accepted as W&B's; only `mode` is read."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(settings)


def as_dict(values: Any) -> dict[str, Any]:
    """A config given as a dict or an argparse Namespace, as a dict."""
    if values is None:
        return {}
    if isinstance(values, Namespace):
        return dict(vars(values))
    if isinstance(values, Mapping):
        return dict(values)
    raise TypeError(f"expected a dict or an argparse Namespace, got {type(values).__name__}")


class _Store:
    """What Config and Summary share: a dict read by item and attribute, changed through `_changed`."""

    _items: dict[str, Any]
    _changed: Callable[[dict[str, Any]], None]

    def __init__(self, changed: Callable[[dict[str, Any]], None]) -> None:
        object.__setattr__(self, "_items", {})
        object.__setattr__(self, "_changed", changed)

    def update(self, values: Any = None, allow_val_change: bool | None = None, **more: Any) -> None:
        changes = {**as_dict(values), **more}
        self._items.update(changes)
        self._changed(changes)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._items[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__.lower()} has no key {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self.update({name: value})

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str, default: Any = None) -> Any:
        return self._items.get(key, default)

    def keys(self) -> Any:
        return self._items.keys()

    def items(self) -> Any:
        return self._items.items()

    def values(self) -> Any:
        return self._items.values()

    def as_dict(self) -> dict[str, Any]:
        return dict(self._items)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._items!r})"


class Config(_Store):
    """`wandb.config`: the run's hyperparameters, written as hparams at every change."""

    def setdefaults(self, values: Any) -> None:
        """Set the keys not set yet."""
        self.update({key: value for key, value in as_dict(values).items() if key not in self._items})


class Summary(_Store):
    """`run.summary`: what the run's results will be; a value the script sets is written at once."""

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def track(self, key: str, value: Any) -> None:
        """A value `log` put in the summary (written when the run ends, not at every step)."""
        self._items[key] = value

    def results(self) -> dict[str, Any]:
        """The summary as results: nested values as 'key/sub', W&B's media objects left out."""
        return _summary_results(self._items)


@dataclass
class Metric:
    """What `define_metric` said about the metrics named `name` (a glob: 'val/*')."""

    name: str
    step_metric: str | None = None
    summary: tuple[str, ...] = ()
    goal: str | None = None
    hidden: bool | None = None


class Run:
    """A W&B run (what `wandb.init` returns), logging into one run of the table."""

    def __init__(
        self,
        launched: Launched,
        project: str,
        name: str | None,
        wandb_id: str | None,
        folder: str | os.PathLike[str] | None,
        on_finish: Callable[[Run], None],
    ) -> None:
        self._launched = launched
        self._writer = launched.writer
        self.project = project
        self.group: str | None = None
        self.job_type: str | None = None
        self.entity: str | None = None
        self._name, self._folder, self._on_finish = name, folder, on_finish
        self._notes: str | None = None
        self._id = wandb_id or str(self._writer.run_id)
        self._not_stored = NotStored("wandb")
        self.config = Config(self._write_config)
        self.summary = Summary(self._write_summary)
        self._metrics: list[Metric] = []
        self._rules: dict[str, Metric | None] = {}  # key -> its metric rule, found once per key
        self._stats: dict[str, list[float]] = {}  # key -> [count, sum, min, max, first, last]
        self._step = max(self._writer.global_step.values(), default=0)  # a resumed run goes on
        self._saves: list[tuple[str, str | None]] = []
        self._artifacts: list[Artifact] = []  # held until the end: their new_file()s live with them
        self._dir: Path | None = None
        self._writer.before_end(self._at_end)

    # ---- who the run is ---------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> str:
        return self._name or f"run-{self._writer.run_id}"

    @property
    def run_id(self) -> int:
        """The run's id in the table (`ResultTable.load_run(run.run_id)`)."""
        return self._writer.run_id

    @property
    def url(self) -> str:
        """The run's page in the dashboard (`tallyboard serve` on its default port)."""
        return f"{DASHBOARD}/runs/{self._writer.run_id}"

    @property
    def dir(self) -> str:
        """A folder of the run's own: the files left in it are kept with the run when it ends."""
        if self._dir is None:
            self._dir = Path(self._folder or ".") / "tallyboard-files" / f"run-{self._writer.run_id}"
            self._dir.mkdir(parents=True, exist_ok=True)
        return str(self._dir)

    @property
    def step(self) -> int:
        return self._step

    @property
    def notes(self) -> str | None:
        return self._notes

    @notes.setter
    def notes(self, text: str) -> None:
        self._writer.set_note(text)
        self._notes = text

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(self._writer.get_tags())

    @tags.setter
    def tags(self, tags: tuple[str, ...] | list[str]) -> None:
        self._writer.remove_tags(*(set(self._writer.get_tags()) - set(tags)))
        self._writer.add_tags(*tags)

    def describe(self, notes: str | None, tags: Sequence[str] | str | None, group: str | None,
                 job_type: str | None) -> None:  # fmt: skip
        """What `init` says about the run: notes, tags (a list, or comma-separated), group (the
        run's tag field), job type (a tag 'job_type=...'), and a W&B id (a tag 'wandb_id=...')."""
        tag_list = tags.split(",") if isinstance(tags, str) else list(tags or ())
        labels = [tag.strip() for tag in tag_list if tag.strip()]
        if job_type:
            labels.append(f"job_type={job_type}")
        if self._id != str(self._writer.run_id):
            labels.append(WANDB_ID_TAG.format(self._id))
        if labels:
            self._writer.add_tags(*labels)
        if notes:
            self.notes = notes
        if group:
            self._writer.set_tag(group)
        self.group, self.job_type = group, job_type

    # ---- logging ----------------------------------------------------------------------------------
    def log(self, data: Mapping[str, Any], step: int | None = None, commit: bool | None = None,
            sync: bool | None = None) -> None:  # fmt: skip
        """Log a dict of values at the current step (see the module docstring for the rule)."""
        self.log_at(data, step, commit, depth=1)

    def log_at(self, data: Mapping[str, Any], step: int | None, commit: bool | None, depth: int) -> None:
        """`log`, called `depth` frames below the user's line (for where warnings point)."""
        if not isinstance(data, Mapping):
            raise TypeError(f"wandb.log takes a dict of name: value, got {type(data).__name__}")
        if step is not None:
            step = to_int("wandb.log step", step)
            self._step = max(self._step, step)
        at = self._step if step is None else step
        values = flat(data)
        epoch = _whole(values.get("epoch"))
        for key, value in values.items():
            self._log_one(key, value, self._step_of(key, values, at), epoch, depth + 3)
        if commit if commit is not None else step is None:
            self._step = max(self._step, at + 1)

    def _step_of(self, key: str, values: dict[str, Any], at: int) -> int:
        """`at`, or for a metric with a `step_metric` that metric's value (this call's, else its last)."""
        rule = self._rule(key)
        if rule is None or rule.step_metric is None or rule.step_metric == key:
            return at
        chosen = _whole(values.get(rule.step_metric, self._stats.get(rule.step_metric, [None] * 6)[5]))
        return at if chosen is None else chosen

    def _log_one(self, tag: str, value: Any, step: int, epoch: int | None, depth: int) -> None:
        from tallyboard import media

        writer = self._writer
        if value is None:
            return
        if isinstance(value, numbers.Number) or getattr(value, "ndim", None) == 0 or _one_element(value):
            writer.add_scalar(tag, value, step, epoch)
            self._summarise(tag, value)
        elif isinstance(value, str):
            writer.add_text(value, step, tag, epoch)
        elif isinstance(value, Image) or (
            isinstance(value, (list, tuple)) and value and isinstance(value[0], Image)
        ):
            for image in value if isinstance(value, (list, tuple)) else [value]:
                if image.overlays:
                    self._not_stored.skip("the boxes and masks of wandb.Image", stacklevel=depth)
                writer.add_image(image.png, step, tag, epoch)
        elif isinstance(value, Histogram):
            writer.add_histogram(tag, value.histogram, step, epoch)
        elif isinstance(value, Table):
            rows, dropped = value.stored_rows()
            if dropped:
                self._not_stored.skip("media inside a wandb.Table", "stored as empty cells", depth)
            writer.add_table(value.columns, rows, step, tag, epoch)
        elif isinstance(value, Html):
            writer.add_fragment(value.html, step, tag, epoch)
        elif isinstance(value, NotStoredMedia):
            self._not_stored.skip(value.kind, stacklevel=depth)
        elif media.is_figure(value):
            writer.add_figure(value, step, tag, epoch)
        elif hasattr(value, "shape") or isinstance(value, (list, tuple)):
            writer.add_histogram(tag, value, step, epoch)  # W&B makes arrays and lists histograms
        else:
            raise TypeError(f"wandb.log: cannot log a {type(value).__name__} as {tag!r}")

    def _rule(self, key: str) -> Metric | None:
        try:
            return self._rules[key]
        except KeyError:
            exact = [m for m in self._metrics if m.name == key]
            matching = exact or [m for m in self._metrics if fnmatch.fnmatchcase(key, m.name)]
            found = matching[-1] if matching else None
            self._rules[key] = found
            return found

    def _summarise(self, key: str, value: Any) -> None:
        plain = value.item() if hasattr(value, "item") else value  # an int stays an int
        number = float(plain)
        stats = self._stats.get(key)
        if stats is None:
            stats = self._stats[key] = [0, 0.0, number, number, number, number]
        stats[0] += 1
        stats[1] += number
        stats[2], stats[3], stats[5] = min(stats[2], number), max(stats[3], number), number
        rule = self._rule(key)
        if rule is None or not rule.summary:
            self.summary.track(key, plain)
        elif "none" not in rule.summary:
            best = stats[2] if (rule.goal or "").startswith("min") else stats[3]
            chosen = {"min": stats[2], "max": stats[3], "mean": stats[1] / stats[0], "first": stats[4],
                      "last": stats[5], "best": best, "copy": number}  # fmt: skip
            self.summary.track(key, {word: chosen[word] for word in rule.summary})

    def define_metric(self, name: str, step_metric: str | None = None, step_sync: bool | None = None,
                      hidden: bool | None = None, summary: str | None = None, goal: str | None = None,
                      overwrite: bool | None = None) -> Metric:  # fmt: skip
        """Say which metric is the x axis of `name` (a glob), and what its summary keeps
        ('min', 'max', 'mean', 'first', 'last', 'best' with `goal`, 'none'; comma-separated)."""
        words = tuple(word.strip() for word in summary.split(",")) if summary else ()
        unknown = [word for word in words if word not in SUMMARY_WORDS]
        if unknown:
            raise ValueError(f"define_metric summary: unknown {unknown}; choose from {SUMMARY_WORDS}")
        if goal is not None and goal not in ("minimize", "maximize", "min", "max"):
            raise ValueError(f"define_metric goal must be 'minimize' or 'maximize', got {goal!r}")
        metric = Metric(name, step_metric, words, goal, hidden)
        self._metrics.append(metric)
        self._rules.clear()
        return metric

    def alert(self, title: str, text: str, level: Any = None, wait_duration: Any = None) -> None:
        """`run.alert` (tallyboard/alerts): recorded in the run, shown by the dashboard and handed to
        the alert handlers; another of the same title within `wait_duration` (seconds or a
        timedelta; a minute by default, as W&B's) is held back."""
        self._writer.alert(title, text, level or "info", self._step, wait_duration)

    # ---- files --------------------------------------------------------------------------------------
    def save(self, glob_str: str, base_path: str | None = None, policy: str = "live") -> list[str]:
        """Keep the files matching `glob_str` with the run: now ('now'), now and again when the run
        ends ('live'), or when it ends ('end'); named relative to `base_path`, else by file name."""
        if policy not in ("live", "now", "end"):
            raise ValueError(f"policy must be 'live', 'now' or 'end', got {policy!r}")
        if policy != "now":
            self._saves.append((glob_str, base_path))
        return self._save_now(glob_str, base_path) if policy != "end" else []

    def _save_now(self, pattern: str, base_path: str | None) -> list[str]:
        saved = []
        for path in sorted(glob.glob(os.path.expanduser(pattern), recursive=True)):
            if os.path.isfile(path):
                name = os.path.relpath(path, base_path) if base_path else os.path.basename(path)
                self._writer.log_artifact(path, Path(name).as_posix())
                saved.append(path)
        return saved

    def log_artifact(self, artifact_or_path: Artifact | str | os.PathLike[str], name: str | None = None,
                     type: str | None = None, aliases: Any = None, tags: Any = None) -> Artifact:  # fmt: skip
        """Keep a file, a folder or an `Artifact`'s files with the run, as '<name>/<file>'."""
        if isinstance(artifact_or_path, Artifact):
            artifact = artifact_or_path
        else:
            path = Path(artifact_or_path)
            artifact = Artifact(name or path.name, type or "file")
            (artifact.add_dir if path.is_dir() else artifact.add_file)(path)
        for inside, path in artifact.files.items():
            self._writer.log_artifact(path, f"{artifact.name}/{inside}", kind=artifact.type)
        self._writer.flush()  # copied now, as W&B stages them: the files may change or go after
        self._artifacts.append(artifact)
        return artifact

    watch = not_stored_method("wandb", "watch", "gradients and parameters of a model")
    unwatch = not_stored_method("wandb", "unwatch")
    use_artifact = not_stored_method("wandb", "use_artifact", "reading W&B artifacts")
    log_code = not_stored_method("wandb", "log_code", "the diff of the git checkout is stored")
    log_model = not_stored_method("wandb", "log_model", "use log_artifact")
    link_model = not_stored_method("wandb", "link_model")
    mark_preempting = not_stored_method("wandb", "mark_preempting")

    # ---- the end ------------------------------------------------------------------------------------
    def _write_config(self, changes: dict[str, Any]) -> None:
        values = {name: scalar(value) for name, value in flat(changes).items()}
        self._writer.add_hparams(values)

    def _write_summary(self, changes: dict[str, Any]) -> None:
        self._writer.update_results(**_summary_results(changes))

    def _at_end(self) -> None:
        """However the run ends: the files asked for, the summary as results, what was not stored."""
        try:
            for pattern, base_path in self._saves:
                self._save_now(pattern, base_path)
            if self._dir is not None:
                self._writer.log_artifacts(self._dir)
        except ArtifactError as error:
            self._not_stored.skip("saved files", str(error), stacklevel=2)
        self._writer.update_results(**self.summary.results())
        self._not_stored.report_to(self._writer)

    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None:
        """End the run: failed for a non-zero `exit_code`, else finished; a second call does nothing."""
        self._end(None if exit_code in (None, 0) else "failed", None)

    def _end(self, status: str | None, error: BaseException | None) -> None:
        """End the run with `status`; an exception leaving its `with` block fails it and is kept
        as how it failed (the traceback on its page, as for a core run)."""
        if error is None:
            self._writer.close(status)  # type: ignore[arg-type]
        else:
            self._writer.__exit__(type(error), error, error.__traceback__)
        self._launched.close_table()
        for artifact in self._artifacts:  # copied into the artefact store by now
            artifact.discard_new_files()
        self._on_finish(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._end("failed" if exc is not None else None, exc)


def _summary_results(changes: dict[str, Any]) -> dict[str, Any]:
    """Summary values as results: nested ones as 'key/sub', W&B's media objects left out."""
    media = (Image, Histogram, Table, Html, NotStoredMedia)
    return {name: scalar(value) for name, value in flat(changes).items() if not isinstance(value, media)}


def _whole(value: Any) -> int | None:
    """An integral number as an int (an epoch, a step metric's value), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


def _one_element(value: Any) -> bool:
    """A tensor or array of one element: a scalar, as W&B takes it."""
    count = value.numel() if hasattr(value, "numel") else getattr(value, "size", None)
    return hasattr(value, "shape") and count == 1

"""`tallyboard import tensorboard LOGDIR`: TensorBoard event files into a result table.

Read with TensorBoard's own `EventAccumulator`, told to keep every event (its defaults sample
scalars down to 10,000 and images to 4 per tag, which is exactly the loss this import exists to
avoid). Each directory that holds event files is one run, named by its path inside LOGDIR (or by
LOGDIR's own name when the event files sit at its top):
- scalars keep their steps; wall times become seconds since the run's first event, which is the
  run's start time (the schema keeps them to the millisecond);
- images keep their PNG bytes; text summaries (plugin "text") become text records under the tag
  the user wrote (torch appends "/text_summary", which is dropped);
- hparams come from the hparams plugin's session-start info. `SummaryWriter.add_hparams` writes
  them into a child directory next to its metric values: such a child is folded into its parent
  run, its metrics becoming the parent's results.
A run that is already in the table (same experiment name and start time) is skipped, so importing
a log directory twice adds nothing the second time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tallyboard.exchange.bundle import RunBundle, import_bundles, nan_to_none

TEXT_SUFFIX = "/text_summary"


@dataclass
class EventRun:
    """One directory of event files, loaded."""

    name: str
    accumulator: Any

    def tags(self, kind: str) -> list[str]:
        return list(self.accumulator.Tags().get(kind, []))

    def hparams(self) -> dict[str, Any]:
        from tensorboard.plugins.hparams import plugin_data_pb2

        try:
            contents = self.accumulator.PluginTagToContent("hparams")
        except KeyError:
            return {}
        found: dict[str, Any] = {}
        for content in contents.values():
            data = plugin_data_pb2.HParamsPluginData.FromString(content)
            if data.HasField("session_start_info"):
                for name, value in data.session_start_info.hparams.items():
                    found[name] = _hparam_value(value)
        return found

    def first_walltime(self) -> float | None:
        times = [events[0].wall_time for events in self._all_events() if events]
        return min(times) if times else None

    def _all_events(self) -> list[list[Any]]:
        acc = self.accumulator
        return (
            [acc.Scalars(tag) for tag in self.tags("scalars")]
            + [acc.Images(tag) for tag in self.tags("images")]
            + [acc.Tensors(tag) for tag in self.tags("tensors")]
        )


def _hparam_value(value: Any) -> Any:
    """A protobuf `Value` as a Python scalar (TensorBoard stores every number as a double)."""
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def find_run_directories(logdir: Path) -> list[Path]:
    """Every directory under `logdir` (itself included) that holds at least one event file."""
    found = []
    for directory, _, files in os.walk(logdir):
        if any("tfevents" in name for name in files):
            found.append(Path(directory))
    return sorted(found)


def load_run(logdir: Path, directory: Path) -> EventRun:
    from tensorboard.backend.event_processing import event_accumulator as ea

    keep_all = {ea.SCALARS: 0, ea.IMAGES: 0, ea.TENSORS: 0, ea.HISTOGRAMS: 1, ea.AUDIO: 1}
    accumulator = ea.EventAccumulator(str(directory), size_guidance=keep_all)
    accumulator.Reload()
    name = directory.relative_to(logdir).as_posix()
    # A log directory that is itself a run (event files at its top) is named after the directory.
    return EventRun(name=logdir.resolve().name if name == "." else name, accumulator=accumulator)


def is_hparams_session(run: EventRun) -> bool:
    """A child directory written by `SummaryWriter.add_hparams`: hparams and metric scalars only."""
    return bool(run.hparams()) and not run.tags("images") and not run.tags("tensors")


def to_bundle(run: EventRun, source: Path, sessions: list[EventRun]) -> RunBundle | None:
    """The run as a bundle, with the hparams sessions found below it folded in; None if empty."""
    acc = run.accumulator
    start = run.first_walltime()
    if start is None and not sessions:
        return None
    if start is None:
        start = min(session.first_walltime() or 0.0 for session in sessions)
    bundle = RunBundle(
        fields={
            "experiment": run.name,
            "comment": f"imported from TensorBoard: {source}",
            "start_time": start,
            "status": "finished",
        },
        hparams=run.hparams(),
        repetitions={0: start},
    )
    for tag in run.tags("scalars"):
        bundle.scalars[tag] = [
            (0, event.step, None, event.wall_time - start, nan_to_none(event.value))
            for event in acc.Scalars(tag)
        ]
    for tag in run.tags("images"):
        bundle.media.extend(_image(tag, event, start) for event in acc.Images(tag))
    for tag in run.tags("tensors"):
        if acc.SummaryMetadata(tag).plugin_data.plugin_name == "text":
            bundle.texts.extend(_texts(tag, event, start) for event in acc.Tensors(tag))
    for session in sessions:
        bundle.hparams.update(session.hparams())
        for tag in session.tags("scalars"):
            bundle.results[tag] = session.accumulator.Scalars(tag)[-1].value
    return bundle


def _image(tag: str, event: Any, start: float) -> tuple:
    from tallyboard.media import to_png

    png, _, _ = to_png(event.encoded_image_string)
    return (tag, 0, event.step, None, event.wall_time - start, "image", png)


def _texts(tag: str, event: Any, start: float) -> tuple:
    from tensorboard.util import tensor_util

    values = tensor_util.make_ndarray(event.tensor_proto).reshape(-1)
    content = "\n".join(value.decode("utf-8", "replace") for value in values)
    tag = tag.removesuffix(TEXT_SUFFIX)
    return (tag, 0, event.step, None, event.wall_time - start, "text", content)


def read_logdir(logdir: str | os.PathLike[str], progress: bool = False) -> list[RunBundle]:
    """Every run under `logdir` as a bundle, in path order."""
    from tallyboard.progress import progress_bar

    root = Path(logdir)
    if not root.is_dir():
        raise FileNotFoundError(f"no TensorBoard log directory at {str(logdir)!r}")
    directories = find_run_directories(root)
    if not directories:
        raise ValueError(f"no TensorBoard event files under {str(logdir)!r}")
    runs: dict[Path, EventRun] = {}
    with progress_bar(len(directories), "reading event files", enabled=progress, unit="run") as bar:
        for directory in directories:
            runs[directory] = load_run(root, directory)
            bar.update()
    sessions: dict[Path, list[EventRun]] = {}
    for directory, run in runs.items():
        if directory.parent in runs and is_hparams_session(run):
            sessions.setdefault(directory.parent, []).append(run)
    folded = {id(run) for found in sessions.values() for run in found}
    bundles = []
    for directory, run in runs.items():
        if id(run) in folded:
            continue
        bundle = to_bundle(run, directory.resolve(), sessions.get(directory, []))
        if bundle is not None:
            bundles.append(bundle)
    return bundles


def import_tensorboard(logdir: str | os.PathLike[str], into: str, progress: bool = False) -> str:
    """Import every run under `logdir` into the table at `into`; returns a one-line summary."""
    from tallyboard.exchange.target import open_target

    bundles = read_logdir(logdir, progress)
    with open_target(into) as store:
        imported = import_bundles(store, bundles, progress, "importing TensorBoard runs")
    return f"imported {imported} TensorBoard runs ({len(bundles) - imported} already present)"

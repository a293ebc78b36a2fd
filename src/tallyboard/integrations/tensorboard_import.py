"""`tallyboard import tensorboard LOGDIR`: TensorBoard event files into a result table, streamed.

The event files are read directly (record framing and CRCs: `tb_records`; summaries: `tb_summaries`;
one run streamed into the store: `tb_run`), one run at a time, so memory stays flat whatever the
size of the logs. Each directory that holds event files is one run, named by its path inside LOGDIR
(or by LOGDIR's own name when the event files sit at its top):
- scalars keep their steps, every point (several at one step included); wall times become seconds
  since the run's first event, which is the run's start time;
- images keep their PNG bytes; text summaries become text records under the tag the user wrote;
  histograms become the table's histograms (tb_histograms.py); hparams come from the hparams plugin.
  `SummaryWriter.add_hparams` writes them into a child directory next to its metric values: such a
  child (its first summary is hparams) is folded into its parent run, its metrics becoming results;
- `add_scalars(main, {key: value})` writes a directory per key (torch 'main_key', tensorboardX
  'main/key') holding the scalar `main`: each is folded into the run as the series 'key/main', the
  dashboard's one chart `main` with a line per key (what `tallyboard.tensorboard` logs too);
- everything else (audio, graphs, PR curves, other plugins, `add_embedding`'s projector files) is
  counted and reported as skipped.
Importing again adds exactly what was written since (the table remembers how far each file was read).
A run created by an import that stopped before its first records were committed (with the files'
read positions) is incomplete, and the next import writes it afresh. Event files are read only
inside LOGDIR: one that is a symlink leading out of it is refused, and nothing is imported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from tallyboard.exchange.bundle import create_run, identities_in, reclaim_incomplete, run_identity
from tallyboard.integrations.tb_records import Damage, FileRead, read_records
from tallyboard.integrations.tb_run import RunImport, Tally, Target, event_files, newest_change
from tallyboard.progress import ProgressBar
from tallyboard.store.base import Store
from tallyboard.store.confined import confined_path
from tallyboard.store.imported import FileProgress
from tallyboard.store.location import LocationLike

# A run whose files were modified less than this long ago is `running`. Ten minutes: longer than
# the two minutes torch's and TensorFlow's writers may hold events before they flush them.
QUIET_SECONDS = 600.0


def find_run_directories(logdir: Path) -> list[Path]:
    """Every directory under `logdir` (itself included) that holds at least one event file, in
    path order (a parent before its children)."""
    found = []
    for directory, _, files in os.walk(logdir):
        if any("tfevents" in name for name in files):
            found.append(Path(directory))
    return sorted(found)


def check_inside(logdir: Path, directories: list[Path]) -> None:
    """Raise OutsideSourceError unless every event file of `directories` lies inside `logdir` once
    resolved: an event file that is a symlink leading out of the log directory is refused (before
    anything is imported), not read (store/confined.py)."""
    for directory in directories:
        for path in event_files(directory):
            confined_path(logdir, path.relative_to(logdir), "the TensorBoard log directory")


def run_name(logdir: Path, directory: Path) -> str:
    name = directory.relative_to(logdir).as_posix()
    # A log directory that is itself a run (event files at its top) is named after the directory.
    return logdir.resolve().name if name == "." else name


def first_value(directory: Path) -> Any | None:
    """The first summary value in the directory's first event file (None before any): what tells a
    run directory from the child directories `SummaryWriter.add_hparams` and `add_scalars` write."""
    from tensorboard.compat.proto import event_pb2

    files = event_files(directory)
    if not files:
        return None
    with files[0].open("rb") as file:
        for data, _ in read_records(file, str(files[0]), 0, FileRead(str(files[0]), 0)):
            event = event_pb2.Event.FromString(data)
            for value in event.summary.value:
                return value
    return None


def series_key(inside: str, tag: str) -> str | None:
    """The key of an `add_scalars(tag, {key: value})` series whose directory is `inside` (its path
    in the run's directory): torch writes '<tag, '/' as '_'>_<key>', tensorboardX '<tag>/<key>'."""
    for prefix in (tag.replace("/", "_") + "_", tag + "/"):
        key = inside.removeprefix(prefix)
        if inside.startswith(prefix) and key and "/" not in key:
            return key
    return None


def child_of(directory: Path, run_directory: Path) -> tuple[bool, str | None]:
    """(an `add_hparams` session?, the `add_scalars` key or None) of a directory inside a run's."""
    value = first_value(directory)
    if value is None:
        return False, None
    plugin = value.metadata.plugin_data.plugin_name
    if plugin == "hparams":
        return True, None
    if value.WhichOneof("value") == "simple_value" or plugin == "scalars":
        return False, series_key(directory.relative_to(run_directory).as_posix(), value.tag)
    return False, None


@dataclass
class ImportReport:
    """What one pass over a log directory did, by run and by kind of record."""

    new: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)  # imported before read positions were kept
    running: list[str] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": {
                "new": self.new,
                "updated": self.updated,
                "unchanged": self.unchanged,
                "already_present": self.already_present,
                "running": self.running,
            },
            "imported": dict(sorted(self.tally.imported.items())),
            "skipped": dict(sorted(self.tally.skipped.items())),
            "damaged": [
                {"file": damage.path, "offset": damage.offset, "reason": damage.reason}
                for damage in self.tally.damage
            ],
        }

    def text(self) -> str:
        imported = len(self.new) + len(self.updated)
        lines = [
            f"imported {imported} TensorBoard runs ({len(self.new)} new, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.already_present)} already present; "
            f"{len(self.running)} still running)"
        ]
        for title, counts in (("imported", self.tally.imported), ("skipped", self.tally.skipped)):
            if counts:
                lines.append(f"  {title}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())))
        lines.extend(
            f"  damaged: {damage.path} at byte {damage.offset}: {damage.reason}"
            " (everything before it imported)"
            for damage in self.tally.damage
        )
        return "\n".join(lines)


class LogdirImport:
    """One pass over a log directory into an open store."""

    def __init__(self, store: Store, logdir: Path, clock: Callable[[], float], quiet_seconds: float) -> None:
        self.store, self.logdir, self.clock, self.quiet = store, logdir, clock, quiet_seconds
        self.report = ImportReport()
        self.present = identities_in(store)
        self.targets: dict[Path, Target] = {}
        self.skipped: set[Path] = set()

    def run(self, progress: bool = False) -> ImportReport:
        from tallyboard.progress import progress_bar

        directories = find_run_directories(self.logdir)
        check_inside(self.logdir, directories)
        with progress_bar(self._unread(directories), "importing TensorBoard logs", progress, "B") as bar:
            for directory in directories:
                self._directory(directory, bar)
        return self.report

    def _unread(self, directories: list[Path]) -> int:
        """Bytes of event files not imported yet (what the progress bar counts)."""
        total = 0
        for directory in directories:
            done = self.store.import_progress(str(directory.resolve()))
            for path in event_files(directory):
                total += max(0, path.stat().st_size - (done[path.name].read_to if path.name in done else 0))
        return total

    def _directory(self, directory: Path, bar: ProgressBar) -> None:
        progress = self.store.import_progress(str(directory.resolve()))
        name = run_name(self.logdir, directory)
        target = self._resumed(name, progress)
        if target is None:  # never imported, or its run was deleted from the table since: afresh
            target, progress = Target(name), {}
        if directory.parent in self.skipped:  # a session of a run imported before read positions were kept
            self.skipped.add(directory)
            return
        owner = self._run_above(directory)
        if owner is not None and (not progress or target.run_id == self.targets[owner].run_id):
            session, key = child_of(directory, owner)
            parent = self.targets[owner]
            if session or key is not None:
                target = Target(parent.name, parent.run_id, parent.start, session=session, series=key)
        self.targets[directory] = target
        run = RunImport(self.store, directory, target, self.report.tally, self._new_run, bar)
        if not run.read(progress):
            self.report.already_present.append(name)
            self.skipped.add(directory)
            return
        if target.session or target.series is not None:
            run.finish(None)
            return
        quiet = self.clock() - newest_change(directory) >= self.quiet
        self._truncations(run, quiet)
        status = self._status(run, target, quiet)
        run.finish(status)
        if target.run_id is None:
            return
        changed = run.added or status is not None
        (
            self.report.new if not progress else self.report.updated if changed else self.report.unchanged
        ).append(name)
        if not quiet:
            self.report.running.append(name)

    def _run_above(self, directory: Path) -> Path | None:
        """The nearest directory above `directory` imported as a run of its own in this pass."""
        for above in directory.parents:
            if above in self.targets:
                target = self.targets[above]
                return above if target.run_id is not None and not target.session else None
            if above == self.logdir:
                return None
        return None

    def _resumed(self, name: str, progress: dict[str, FileProgress]) -> Target | None:
        if not progress:
            return None
        run_id = next(iter(progress.values())).run_id
        row = self.store.run(run_id)
        if row is None:  # the run was deleted from the table: import it afresh
            return None
        return Target(name, run_id, row.start_time)

    def _new_run(self, directory: Path, start: float) -> int | None:
        fields = {
            "experiment": run_name(self.logdir, directory),
            "comment": f"imported from TensorBoard: {directory.resolve()}",
            "start_time": start,
            "status": "running",
        }
        identity = run_identity(fields)
        if identity in self.present:  # imported before read positions were kept, or left incomplete
            reclaimed = reclaim_incomplete(self.store, {identity})
            if identity not in reclaimed:
                return None
            fields["run_id"] = reclaimed[identity]
        return create_run(self.store, fields)

    def _status(self, run: RunImport, target: Target, quiet: bool) -> dict[str, Any] | None:
        """The run's new status and end, or None when it stays as it is."""
        if target.run_id is None:
            return None
        row = self.store.run(target.run_id)
        status = "finished" if quiet else "running"
        if row is None or (row.status == status and not run.added):
            return None
        return {"status": status, "end_time": run.last_wall if quiet else None}

    def _truncations(self, run: RunImport, quiet: bool) -> None:
        """An unfinished last record is a writer at work while the run is running; once its files
        have been quiet for `quiet_seconds`, it is a truncated file, reported as damage."""
        if not quiet:
            return
        for path, offset in run.incomplete.items():
            if offset is not None:
                self.report.tally.damage.append(Damage(path, offset, "file ends inside a record (truncated)"))


def import_logdir(
    logdir: str | os.PathLike[str],
    into: LocationLike,
    clock: Callable[[], float] = time.time,
    quiet_seconds: float = QUIET_SECONDS,
    progress: bool = False,
) -> ImportReport:
    """Import what is new under `logdir` into the table at `into` (created when missing); with
    `progress`, a bar on stderr counts the bytes read."""
    from tallyboard.exchange.target import open_target

    root = Path(logdir)
    if not root.is_dir():
        raise FileNotFoundError(f"no TensorBoard log directory at {str(logdir)!r}")
    if not find_run_directories(root):
        raise ValueError(f"no TensorBoard event files under {str(logdir)!r}")
    with open_target(into) as store:
        return LogdirImport(store, root, clock, quiet_seconds).run(progress)


def follow(
    logdir: str | os.PathLike[str],
    into: LocationLike,
    show: Callable[[ImportReport], None],
    quiet_seconds: float = QUIET_SECONDS,
    interval: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> NoReturn:
    """`--watch`: import what is new every `interval` seconds until interrupted (Ctrl-C), showing
    each pass that found something. A log directory without event files yet is waited on."""
    root = Path(logdir)
    while True:
        if not root.is_dir() or find_run_directories(root):
            report = import_logdir(logdir, into, clock, quiet_seconds)
            if report.new or report.updated or report.tally.damage:
                show(report)
        sleep(interval)


def import_tensorboard(
    logdir: str | os.PathLike[str],
    into: LocationLike,
    progress: bool = False,
    finished_after: float | None = None,
    watch: bool = False,
    on_pass: Callable[[ImportReport], None] | None = None,
) -> ImportReport:
    """The `tensorboard` importer (`ResultTable.import_tensorboard`, `tallyboard import tensorboard`):
    one pass over `logdir` into `into`, its report handed to `on_pass` and returned. A run whose
    files have not changed for `finished_after` seconds (default 600) is finished. With `watch`,
    pass after pass until interrupted (KeyboardInterrupt), `on_pass` seeing each that found something."""
    quiet_seconds = QUIET_SECONDS if finished_after is None else finished_after
    if not quiet_seconds >= 0:
        raise ValueError(f"--finished-after must be a number of seconds >= 0, not {finished_after}")
    show = on_pass or (lambda report: None)
    if watch:
        follow(logdir, into, show, quiet_seconds)  # ends only by KeyboardInterrupt
    report = import_logdir(logdir, into, quiet_seconds=quiet_seconds, progress=progress)
    show(report)
    return report

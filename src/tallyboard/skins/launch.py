"""Where a skin logs and how it starts a run: the peers' habits, over `ResultTable`.

- The table: the one the script names (a skin's `table=` argument, or a peer's own setting such as
  `mlflow.set_tracking_uri`), else `$TALLYBOARD_URL`, else `results.db` in the working directory
  (W&B's `dir=` moves that default into its folder). `tallyboard serve results.db` shows it.
- A run per launch, as every peer makes one: `unique=False`, so running a script again is a new
  run, never a `DuplicateRunError`. A relaunched process (`TALLYBOARD_RUN_ID`, a requeued SLURM
  job: run/relaunch.py) continues its run instead, as the framework adapters do.
- No uncommitted-changes warning: the peers give none; the diff is still stored with the run.
- pyplot's `show()` is not hooked: a peer logs the figures it is handed, and nothing else.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tallyboard.run.relaunch import record_launch, run_to_resume
from tallyboard.run.start import NoCommitAction

if TYPE_CHECKING:
    from tallyboard.run.writer import LogWriter
    from tallyboard.table import ResultTable

DEFAULT_FILE = "results.db"


def default_location(folder: str | os.PathLike[str] | None = None) -> str:
    """$TALLYBOARD_URL, else `results.db` in `folder` (the working directory when None)."""
    return os.environ.get("TALLYBOARD_URL") or os.path.join(os.fspath(folder or "."), DEFAULT_FILE)


@dataclass
class Launched:
    """A run a skin started, the table it is in, and whether the skin opened that table (and so
    closes it once the run has ended)."""

    writer: LogWriter
    table: ResultTable
    own_table: bool
    started: float = field(default_factory=time.time)  # seconds since the epoch, for given walltimes
    scratch: tempfile.TemporaryDirectory[str] | None = None  # a disabled run's table, thrown away

    def relative(self, walltime: float | None) -> float | None:
        """A peer's walltime (seconds since the epoch) as the run's (seconds since it started)."""
        return None if walltime is None else float(walltime) - self.started

    def close_table(self) -> None:
        if self.own_table:
            self.table.close()
        if self.scratch is not None:
            self.scratch.cleanup()


def open_table(
    location: Any = None, folder: str | os.PathLike[str] | None = None
) -> tuple[ResultTable, bool]:
    """The table to log into (see the module docstring) and whether it was opened here."""
    from tallyboard.table import ResultTable

    if isinstance(location, ResultTable):
        return location, False
    where = default_location(folder) if location is None else location
    return ResultTable(where, nocommit_action=NoCommitAction.NOP), True


def launch(
    location: Any,
    experiment: str,
    comment: str | None = None,
    *,
    folder: str | os.PathLike[str] | None = None,
    run_id: int | None = None,
    disable: bool = False,
    system_metrics: bool = False,
) -> Launched:
    """Continue run `run_id` (or the run a relaunched process continues), else start a new run of
    `experiment`; `disable` gives a run that ignores every call, as a peer's disabled mode does,
    in a throw-away table (the table named is not even created)."""
    if disable:
        scratch = tempfile.TemporaryDirectory(prefix="tallyboard-disabled-")
        table, _ = open_table(os.path.join(scratch.name, DEFAULT_FILE))
        return Launched(table.new_run(experiment, disable=True), table, True, scratch=scratch)
    table, own = open_table(location, folder)
    try:
        resumed = run_id if run_id is not None else run_to_resume(table, experiment)
        if resumed is not None:
            return Launched(table.resume_run(resumed, auto_log_plt=False), table, own)
        writer = table.new_run(
            experiment, comment=comment, unique=False, auto_log_plt=False, system_metrics=system_metrics
        )
    except BaseException:
        if own:
            table.close()
        raise
    record_launch(writer)
    return Launched(writer, table, own)

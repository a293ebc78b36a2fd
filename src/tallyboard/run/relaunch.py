"""Which run a relaunched process continues: the one named by ``TALLYBOARD_RUN_ID``, or, for a SLURM
job that was requeued (after preemption, or by ``scontrol requeue``), the run that job started.

SLURM keeps ``SLURM_JOB_ID`` across a requeue and counts the restarts in ``SLURM_RESTART_COUNT``, so
a run records the job that started it (the hparam ``slurm_job_id``) and a restarted job finds it
again. The framework adapters share this one rule; a script of one's own calls ``run_to_resume``
and then ``ResultTable.resume_run``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from tallyboard.run.view import RunView
    from tallyboard.run.writer import LogWriter

RUN_ID_VARIABLE = "TALLYBOARD_RUN_ID"
SLURM_JOB_HPARAM = "slurm_job_id"


class Table(Protocol):
    """What `run_to_resume` reads of a table: a `ResultTable`, named by what it offers because the
    write path never imports the facade above it (tests/test_layering.py)."""

    @property
    def runs(self) -> list[int]: ...

    def get_experiment_raw(self, run_id: int) -> dict[str, Any]: ...

    def load_run(self, run_id: int) -> RunView: ...

    def database_run_id(self, run_id: int) -> int | None: ...


def slurm_job_id() -> str | None:
    """The SLURM job this process belongs to, or None outside SLURM."""
    return os.environ.get("SLURM_JOB_ID") or None


def slurm_restarts() -> int:
    """How many times SLURM restarted this job (0 for its first start)."""
    count = os.environ.get("SLURM_RESTART_COUNT", "0").strip() or "0"
    if not count.isdigit():
        raise ValueError(f"SLURM_RESTART_COUNT must be a count, got {count!r}")
    return int(count)


def run_to_resume(table: Table, experiment_name: str) -> int | None:
    """The id of the run this process should continue, or None to start a new one.

    ``TALLYBOARD_RUN_ID`` wins; otherwise a requeued SLURM job continues the newest run of
    ``experiment_name`` that recorded the same job id.
    """
    named = os.environ.get(RUN_ID_VARIABLE, "").strip()
    if named:
        try:
            return int(named)
        except ValueError:
            raise ValueError(f"{RUN_ID_VARIABLE} must be a run id (an integer), got {named!r}") from None
    job = slurm_job_id()
    if job is None or slurm_restarts() == 0:
        return None
    for run_id in sorted(table.runs, reverse=True):
        if table.get_experiment_raw(run_id)["experiment"] != experiment_name:
            continue
        if str(table.load_run(run_id).get_hparams().get(SLURM_JOB_HPARAM)) == job:
            return resumable_id(table, run_id)
    return None


def resumable_id(table: Table, run_id: int) -> int:
    """The id `resume_run` takes for a run found in `table`: through a spool, the database's (a
    run found in the spool is known by the spool's id), so its start must have shipped."""
    found = table.database_run_id(run_id)
    if found is None:
        raise RuntimeError(
            f"run {run_id} of this spool has not reached its database yet, so it cannot be resumed:"
            " let the spool ship (`tallyboard sync SPOOL`), then launch again"
        )
    return found


def record_launch(writer: LogWriter) -> None:
    """Remember the SLURM job that started a run, so that a requeue of that job finds it."""
    job = slurm_job_id()
    if job is not None:
        writer.add_hparams({SLURM_JOB_HPARAM: job})

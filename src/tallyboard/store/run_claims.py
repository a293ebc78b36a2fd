"""Which spool may append to which run: a run reopened through a spool (`ResultTable.resume_run`
through a tallyboard server or a PostgreSQL spool), and which spool wrote to a run last.

The rule (docs/server.md, "Resuming a run"): any writer may reopen any run (a write token of the
server; a database login for a PostgreSQL spool), and the reopening spool is granted the right
to append to it (`tallyboard_spool_grants`), for good. A run that is `running` and that another
spool shipped entries for in the last `LEASE` seconds (`tallyboard_run_writers`, kept by every
shipment) is being written: reopening it is refused (`RunInUse`), with the seconds to wait. A run
whose writer died keeps `running`, and can be reopened once its lease has run out; a run that
ended can be reopened at once. The same spool may always reopen its runs (the processes of a
node share it, and a requeued job comes back to it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tallyboard.errors import NotFoundError, StoreError
from tallyboard.store.base import Store

LEASE = 60.0  # seconds a spool's last shipment for a run holds it as that spool's
DDL = (
    "CREATE TABLE IF NOT EXISTS tallyboard_spool_grants (spool_id TEXT NOT NULL, run_id BIGINT NOT NULL,"
    " PRIMARY KEY (spool_id, run_id))",
    "CREATE TABLE IF NOT EXISTS tallyboard_run_writers (run_id BIGINT PRIMARY KEY, spool_id TEXT NOT NULL,"
    " written_at DOUBLE PRECISION NOT NULL)",
)
# The run fields a reopening client copies into its spool (its id and bookkeeping are the server's).
MIRRORED = ("experiment", "tag", "config_path", "comment", "config_hash", "cli", "command", "note",
            "color", "start_time", "git_commit", "git_diff", "config_content")  # fmt: skip


class RunInUse(StoreError):
    """The run is being written by another spool: reopen it later (`retry_after` seconds)."""

    def __init__(self, run_id: int, retry_after: float) -> None:
        super().__init__(
            f"run {run_id} is being written by another process (its spool shipped entries for it"
            f" {LEASE - retry_after:.0f} s ago): resume it once that process has ended, or in"
            f" {retry_after:.0f} s if it died"
        )
        self.retry_after = retry_after


def note_writes(db: Store, spool_id: str, run_ids: Iterable[int], now: float) -> None:
    """Inside a shipment's transaction: `spool_id` wrote to these runs at `now`."""
    db.executemany(
        "INSERT INTO tallyboard_run_writers (run_id, spool_id, written_at) VALUES (?, ?, ?)"
        " ON CONFLICT (run_id) DO UPDATE SET spool_id = excluded.spool_id, written_at = excluded.written_at",
        [(run_id, spool_id, now) for run_id in sorted(run_ids)],
    )


def granted(db: Store, spool_id: str, run_id: int) -> bool:
    return bool(
        db.execute(
            "SELECT 1 FROM tallyboard_spool_grants WHERE spool_id = ? AND run_id = ?", (spool_id, run_id)
        )
    )


def reopen(db: Store, spool_id: str, run_id: int, check: bool, now: float) -> dict[str, Any]:
    """Reopen run `run_id` for `spool_id` (one transaction): refused while another spool writes
    it; otherwise set running again (`Store.reopen_run`, `check` its uniqueness), granted to the
    spool, and answered with where it stopped and the fields the spool's copy of it needs."""

    def work() -> dict[str, Any]:
        row = db.run(run_id)
        if row is None:
            raise NotFoundError(f"no run with id {run_id}")
        writer = db.execute(
            "SELECT spool_id, written_at FROM tallyboard_run_writers WHERE run_id = ?", (run_id,)
        )
        if row.status == "running" and writer and writer[0][0] != spool_id and now - writer[0][1] < LEASE:
            raise RunInUse(run_id, LEASE - (now - writer[0][1]))
        point = db.reopen_run(run_id, check)
        db.execute(
            "INSERT INTO tallyboard_spool_grants (spool_id, run_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (spool_id, run_id),
        )
        note_writes(db, spool_id, [run_id], now)
        fields = {name: getattr(row, name) for name in MIRRORED}
        return {"run": run_id, "rep": point.rep, "rep_start": point.rep_start,
                "next_steps": point.next_steps, "fields": fields}  # fmt: skip

    return db.atomic(work)

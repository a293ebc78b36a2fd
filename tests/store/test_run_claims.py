"""run_claims: who may reopen a run, on the lease's own clock (`now` is given, never waited for)."""

from __future__ import annotations

import pytest

import tallyboard as tb
from tallyboard.store import open_store
from tallyboard.store.run_claims import DDL, LEASE, RunInUse, granted, note_writes, reopen


@pytest.fixture
def store(tmp_path):
    table = tb.ResultTable(tmp_path / "served.db", nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("served", auto_log_plt=False, environment=False)
    run.add_scalar("loss", 1.0, step=3)
    run.flush()  # the run stays running, as a process that is still logging leaves it
    db = open_store(str(tmp_path / "served.db"))
    for statement in DDL:
        db.execute(statement)
    yield db, run.run_id
    db.close()
    run.close()
    table.close()


def test_a_running_run_is_another_spools_until_its_lease_runs_out(store):
    db, run_id = store
    note_writes(db, "spool-a", [run_id], now=1000.0)
    with pytest.raises(
        RunInUse, match=f"resume it once that process has ended, or in {LEASE - 30:.0f} s"
    ) as refused:
        reopen(db, "spool-b", run_id, check=True, now=1030.0)
    assert refused.value.retry_after == pytest.approx(LEASE - 30)
    assert not granted(db, "spool-b", run_id)
    answer = reopen(db, "spool-b", run_id, check=True, now=1000.0 + LEASE)
    assert answer["run"] == run_id and answer["next_steps"]
    assert granted(db, "spool-b", run_id)
    with pytest.raises(RunInUse):  # the lease is spool-b's now, from the reopening on
        reopen(db, "spool-a", run_id, check=True, now=1000.0 + LEASE + 1)


def test_the_spool_that_holds_the_lease_reopens_at_once(store):
    db, run_id = store
    note_writes(db, "spool-a", [run_id], now=1000.0)
    assert reopen(db, "spool-a", run_id, check=True, now=1001.0)["run"] == run_id
    assert granted(db, "spool-a", run_id)

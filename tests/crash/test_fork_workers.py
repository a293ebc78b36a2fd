"""`multiprocessing` workers that open a run, log and return without `close()`: a worker ends
through `os._exit`, which runs no atexit hook, but multiprocessing runs its finalizers first, and
one of them ends the worker's runs. Nothing is lost and no run is left `running`."""

import multiprocessing
import sqlite3

import tallyboard as tb

ROWS = 20_000


def log_without_closing(args: tuple[str, int]) -> int:
    db, index = args
    run = tb.ResultTable(db, nocommit_action=tb.NoCommitAction.NOP).new_run(f"worker-{index}", unique=False)
    for step in range(ROWS):
        run.add_scalar("loss", float(step), step=step)
    return index


def test_pool_workers_that_never_close_their_runs_lose_nothing(tmp_path):
    db = str(tmp_path / "results.db")
    tb.ResultTable(db, nocommit_action=tb.NoCommitAction.NOP)  # the schema, before the workers race
    pool = multiprocessing.get_context("fork").Pool(4, maxtasksperchild=1)
    try:
        assert sorted(pool.map(log_without_closing, [(db, i) for i in range(8)])) == list(range(8))
    finally:
        pool.close()
        pool.join()
    conn = sqlite3.connect(db)
    runs = conn.execute(
        "SELECT r.status, (SELECT COALESCE(SUM(n), 0) FROM scalar_blocks s WHERE s.run_id = r.run_id)"
        " FROM runs r"
    ).fetchall()
    conn.close()
    assert runs == [("finished", ROWS)] * 8  # ended as a normal exit ends an unclosed run

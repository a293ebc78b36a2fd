"""tallyboard ResultTable (SQLite): table.new_run(...) -> LogWriter.add_scalar per call (a background
thread batches the rows), close = run.close(), which returns once every row is durable."""

import os

from adapters._common import scalar_workloads

PACKAGE = "tallyboard"
LABEL = "tallyboard ResultTable (SQLite)"
tb = None


def setup_imports():
    global tb
    import numpy  # noqa: F401  (read_C's arrays; imported here, untimed, as other adapters import theirs)

    import tallyboard as _tb

    tb = _tb


def _table(out):
    return tb.ResultTable(os.path.join(out, "results.db"), nocommit_action=tb.NoCommitAction.NOP)


def _log(out, tags, vals, t):
    table = _table(out)
    run = table.new_run("bench", auto_log_plt=False)
    add = run.add_scalar
    t.start()
    for i, v in enumerate(vals):
        for tag in tags:
            add(tag, v, step=i)
    t.lap()
    run.close()
    t.stop()
    table.close()


workload_A, workload_B, prepare_C = scalar_workloads(_log)


def read_C(out, tag):
    table = _table(out)
    return table.load_run(table.runs[0]).get_scalar_arrays(tag)["value"]


def setup_D(out):
    _table(out).close()


def start_run_D(out, i):
    table = _table(out)
    run = table.new_run("bench", comment=f"run{i}", auto_log_plt=False)
    run.add_scalar("train/loss", 1.0, step=0)
    run.close()
    table.close()

"""deepboard 0.3.0 ResultTable (SQLite): rt.new_debug_run(...) -> LogWriter.add_scalar per call,
default flush_each=10 (a new sqlite3 connection + executemany + commit every 10 scalars per tag,
rollback-journal mode), auto_log_plt disabled (matplotlib figure scan per call otherwise).
Close = add_scalar(..., flush=True) on the last call + set_status('finished')."""

import os

from adapters._common import NoTimer, scalar_workloads

PACKAGE = "deepboard"
LABEL = "deepboard 0.3.0 ResultTable (SQLite)"
MAX_N = {
    "A": 20_000,
    "B": 1_000,
}  # a commit per 10 scalars: ~600/s here; measured at reduced n
ResultTable = None
FLUSH_EACH = 10  # library default


def setup_imports():
    global ResultTable
    from deepboard.resultTable import ResultTable as RT

    ResultTable = RT


def _open(out, debug=True, i=0, flush_each=None):
    rt = ResultTable(os.path.join(out, "results.db"))
    if debug:
        return rt, rt.new_debug_run("bench", flush_each=flush_each or FLUSH_EACH, auto_log_plt=False)
    return rt, rt.new_run("bench", comment=f"run{i}", flush_each=FLUSH_EACH, auto_log_plt=False)


def _log(out, tags, vals, t, flush_each=None):
    _rt, lw = _open(out, flush_each=flush_each)
    add = lw.add_scalar
    t.start()
    for i, v in enumerate(vals):
        for tag in tags:
            add(tag, v, step=i)
    t.lap()
    lw._flush_all()  # no public flush-without-value; add_scalar(flush=True) calls exactly this
    lw.set_status("finished")
    t.stop()
    return lw


workload_A, workload_B, _ = scalar_workloads(_log)


def prepare_C(out, tag, vals):
    _log(out, [tag], vals, NoTimer(), flush_each=1000)  # same rows on disk, fewer commits


def read_C(out, tag):
    rt = ResultTable(os.path.join(out, "results.db"))
    return rt.load_run(-1).get_scalar(tag)  # list[Scalar]


def setup_D(out):
    ResultTable(os.path.join(out, "results.db"))


def start_run_D(out, i):
    _rt, lw = _open(out, debug=False, i=i)
    lw.add_scalar("train/loss", 1.0, step=0, flush=True)
    lw.set_status("finished")

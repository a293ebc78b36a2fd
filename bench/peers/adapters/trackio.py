"""trackio local mode: TRACKIO_DIR=<out>/trackio (set by the runner env), trackio.init(embed=False,
no CPU/GPU auto-logging), trackio.log({tag: v}, step=i), trackio.finish(). Writes to a per-project
SQLite file through a background batching thread. Read back with SQLiteStorage.get_metric_values
(what the `trackio get metric` CLI uses; trackio has no other Python read API for values)."""

from adapters._common import scalar_workloads

PACKAGE = "trackio"
LABEL = "trackio (local SQLite)"
trackio = None


def setup_imports():
    global trackio
    import trackio as _t

    trackio = _t


def _init(name="run"):
    return trackio.init(project="bench", name=name, embed=False, auto_log_cpu=False, auto_log_gpu=False)


def _log(out, tags, vals, t):
    _init()
    log = trackio.log
    t.start()
    for i, v in enumerate(vals):
        log({tag: v for tag in tags}, step=i)
    t.lap()
    trackio.finish()
    t.stop()


workload_A, workload_B, prepare_C = scalar_workloads(_log)


def read_C(out, tag):
    from trackio.sqlite_storage import SQLiteStorage

    return SQLiteStorage.get_metric_values("bench", "run", tag)


def setup_D(out):
    pass


def start_run_D(out, i):
    _init(name=f"d{i}")
    trackio.log({"train/loss": 1.0}, step=0)
    trackio.finish()

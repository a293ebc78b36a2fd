"""mlflow fluent API, one mlflow.log_metric(key, value, step=i) call per scalar, sqlite
backend store (sqlite:////<out>/mlflow.db), synchronous (default) logging."""

import os
from pathlib import Path

PACKAGE = "mlflow"
LABEL = "mlflow log_metric per call (sqlite store)"
MAX_N = {
    "A": 5000,
    "B": 250,
}  # ~1-2 ms per call: measured at reduced n, throughput scaled
mlflow = None


def setup_imports():
    global mlflow
    import mlflow as _m

    mlflow = _m


def uri(out):
    return "sqlite:///" + os.path.join(os.path.abspath(out), "mlflow.db")


def init_store(out):
    mlflow.set_tracking_uri(uri(out))
    mlflow.set_experiment("bench")  # creates DB + runs migrations (untimed)


def workload_A(out, tag, vals, t):
    init_store(out)
    run = mlflow.start_run()
    log = mlflow.log_metric
    t.start()
    for i, v in enumerate(vals):
        log(tag, v, step=i)
    t.lap()
    mlflow.end_run()
    t.stop()
    return run.info.run_id


def workload_B(out, tags, vals, t):
    init_store(out)
    mlflow.start_run()
    log = mlflow.log_metric
    t.start()
    for i, v in enumerate(vals):
        for tag in tags:
            log(tag, v, step=i)
    t.lap()
    mlflow.end_run()
    t.stop()


def read_C(out, tag):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=uri(out))
    run_id = Path(out, "run_id.txt").read_text().strip()
    return c.get_metric_history(run_id, tag)


def setup_D(out):
    init_store(out)


def start_run_D(out, i):
    mlflow.start_run()
    mlflow.log_metric("train/loss", 1.0, step=0)
    mlflow.end_run()

"""mlflow MlflowClient.log_batch: the logger buffers Metric objects and sends 1000 per
log_batch call (mlflow's MAX_METRICS_PER_BATCH), sqlite backend store."""

import os
import time

from adapters import mlflow_log_metric as base
from adapters._common import NoTimer, scalar_workloads

PACKAGE = "mlflow"
LABEL = "mlflow MlflowClient.log_batch x1000 (sqlite store)"
mlflow = Metric = MlflowClient = None
BATCH = 1000


def setup_imports():
    global mlflow, Metric, MlflowClient
    base.setup_imports()
    mlflow = base.mlflow
    from mlflow.entities import Metric as M
    from mlflow.tracking import MlflowClient as C

    Metric, MlflowClient = M, C


def _open(out):
    base.init_store(out)
    c = MlflowClient(tracking_uri=base.uri(out))
    exp = c.get_experiment_by_name("bench")
    run = c.create_run(exp.experiment_id)
    return c, run.info.run_id


def _log(out, tags, vals, t):
    c, run_id = _open(out)
    buf = []
    app = buf.append
    now = time.time
    t.start()
    for i, v in enumerate(vals):
        ts = int(now() * 1000)
        for tag in tags:
            app(Metric(tag, v, ts, i))
            if len(buf) >= BATCH:
                c.log_batch(run_id, metrics=buf)
                buf = []
                app = buf.append
    t.lap()
    if buf:
        c.log_batch(run_id, metrics=buf)
    c.set_terminated(run_id)
    t.stop()
    return run_id


workload_A, workload_B, _ = scalar_workloads(_log)


def prepare_C(out, tag, vals):
    run_id = _log(out, [tag], vals, NoTimer())
    with open(os.path.join(out, "run_id.txt"), "w") as f:
        f.write(run_id)


read_C = base.read_C


def setup_D(out):
    base.init_store(out)
    global _client, _exp
    _client = MlflowClient(tracking_uri=base.uri(out))
    _exp = _client.get_experiment_by_name("bench").experiment_id


def start_run_D(out, i):
    run_id = _client.create_run(_exp).info.run_id
    _client.log_batch(run_id, metrics=[Metric("train/loss", 1.0, int(time.time() * 1000), 0)])
    _client.set_terminated(run_id)


def read_after_crash(out, tag):
    """Workload K wrote no run_id.txt: the run is the experiment's only one."""
    c = MlflowClient(tracking_uri=base.uri(out))
    (run,) = c.search_runs([c.get_experiment_by_name("bench").experiment_id])
    return c.get_metric_history(run.info.run_id, tag)

"""aim.Run.track per call (system-resource tracking, param logging and terminal-log
capture disabled so only the metric path is measured). Repo at <out>/repo.

Read-back note: aim's SDK reader goes through the repo index (meta/index), which is only
updated by the index manager that `aim up` runs (or `aim storage reindex`). prepare_C
therefore indexes the run explicitly (RepoIndexManager.index, untimed) before the read."""

import os
from pathlib import Path

PACKAGE = "aim"
MAX_N = {"A": 50_000, "B": 2_500}  # ~3,000/s: measured at reduced n
LABEL = "aim Run.track"
Run = Repo = None


def setup_imports():
    global Run, Repo
    from aim import Repo as R
    from aim import Run as Ru

    Run, Repo = Ru, R


def _run(out):
    return Run(
        repo=os.path.join(out, "repo"),
        experiment="bench",
        system_tracking_interval=None,
        log_system_params=False,
        capture_terminal_logs=False,
    )


def workload_A(out, tag, vals, t):
    r = _run(out)
    track = r.track
    t.start()
    for i, v in enumerate(vals):
        track(v, name=tag, step=i)
    t.lap()
    r.close()
    t.stop()
    return r


def workload_B(out, tags, vals, t):
    r = _run(out)
    track = r.track
    t.start()
    for i, v in enumerate(vals):
        track({tag: v for tag in tags}, step=i)  # aim accepts a dict of name -> value
    t.lap()
    r.close()
    t.stop()


def prepare_C(out, tag, vals):
    r = _run(out)
    h = r.hash
    for i, v in enumerate(vals):
        r.track(v, name=tag, step=i)
    r.close()
    from aim.sdk.index_manager import RepoIndexManager

    RepoIndexManager(Repo.from_path(os.path.join(out, "repo"))).index(h)
    with open(os.path.join(out, "run_hash.txt"), "w") as f:
        f.write(h)


def read_C(out, tag):
    from aim.storage.context import Context

    h = Path(out, "run_hash.txt").read_text().strip()
    run = Repo.from_path(os.path.join(out, "repo")).get_run(h)
    _steps, values = run.get_metric(tag, Context({})).values.sparse_numpy()
    return values


def setup_D(out):
    pass


def start_run_D(out, i):
    r = _run(out)
    r.track(1.0, name="train/loss", step=0)
    r.close()


def read_after_crash(out, tag):
    """Workload K wrote no run_hash.txt: index whatever runs the repo holds (as `aim up` would),
    then read the only one."""
    from aim.sdk.index_manager import RepoIndexManager
    from aim.storage.context import Context

    repo = Repo.from_path(os.path.join(out, "repo"))
    chunks = os.path.join(out, "repo", ".aim", "seqs", "chunks")
    (h,) = os.listdir(chunks)
    RepoIndexManager(repo).index(h)
    run = repo.get_run(h)
    _steps, values = run.get_metric(tag, Context({})).values.sparse_numpy()
    return values

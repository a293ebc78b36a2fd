"""wandb offline mode (WANDB_MODE=offline set by the runner; also mode='offline' here):
run.log({tag: v}, step=i) per call, run.finish(). System stats, git/meta collection, console
capture and requirements capture disabled. Data goes through the wandb-core (Go) service
process into <out>/wandb/offline-run-*/run-*.wandb.

No workload C: wandb has no public API to read an offline run's history locally
(it must be `wandb sync`ed to a server and read with wandb.Api())."""

from adapters._common import scalar_workloads

PACKAGE = "wandb"
MAX_N = {"A": 50_000}  # ~3,000/s on one tag: measured at reduced n
LABEL = "wandb offline"
wandb = None


def setup_imports():
    global wandb
    import wandb as _w

    wandb = _w


def _init(out, name="run"):
    s = wandb.Settings(
        x_disable_stats=True,
        x_disable_meta=True,
        x_disable_machine_info=True,
        console="off",
        disable_git=True,
        save_code=False,
        x_save_requirements=False,
        silent=True,
    )
    return wandb.init(project="bench", name=name, dir=out, mode="offline", settings=s)


def _log(out, tags, vals, t):
    run = _init(out)
    log = run.log
    t.start()
    for i, v in enumerate(vals):
        log({tag: v for tag in tags}, step=i)
    t.lap()
    run.finish()
    t.stop()


workload_A, workload_B, _ = scalar_workloads(_log)  # no reader: no workload C


def setup_D(out):
    pass


def start_run_D(out, i):
    run = _init(out, name=f"d{i}")
    run.log({"train/loss": 1.0}, step=0)
    run.finish()

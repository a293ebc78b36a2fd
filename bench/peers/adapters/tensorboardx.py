"""tensorboardX.SummaryWriter.add_scalar per call; read back with tensorboard's
EventAccumulator (size_guidance scalars=0 = keep all)."""

from adapters._common import scalar_workloads

PACKAGE = "tensorboardX"
LABEL = "tensorboardX SummaryWriter"
SummaryWriter = None


def setup_imports():
    global SummaryWriter
    from tensorboardX import SummaryWriter as SW

    SummaryWriter = SW


def _log(out, tags, vals, t):
    w = SummaryWriter(out)
    t.start()
    add = w.add_scalar
    for i, v in enumerate(vals):
        for tag in tags:
            add(tag, v, i)
    t.lap()
    w.close()
    t.stop()


workload_A, workload_B, prepare_C = scalar_workloads(_log)


def read_event_accumulator(out, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(out, size_guidance={"scalars": 0})  # 0 = keep everything (default keeps 10,000)
    ea.Reload()
    ev = ea.Scalars(tag)
    return [(e.step, e.value) for e in ev]


READERS = {"EventAccumulator": read_event_accumulator}


def setup_D(out):
    pass


def start_run_D(out, i):
    w = SummaryWriter(f"{out}/run{i}")
    w.add_scalar("train/loss", 1.0, 0)
    w.close()


read_after_crash = read_event_accumulator

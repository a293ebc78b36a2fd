"""tallyboard.monitor in one minute: windowed statistics of a (simulated) training loop.

Two Stats summarise every 250 ms window of the loop; each closed window is logged as an Event and
printed by a handler as it arrives. Runs in about two seconds with the standard library alone:

    python examples/monitor_quickstart.py [--seconds 2] [--logdir runs/quickstart]

With --logdir, the same events also go to TensorBoard (needs torch or tensorboardX).
"""

import argparse
import math
import random
import time
from datetime import timedelta

from tallyboard import monitor
from tallyboard.monitor import Aggregation


def print_event(event: monitor.Event) -> None:
    values = "  ".join(f"{key}={value:.4g}" for key, value in event.data.items())
    print(f"{event.timestamp:%H:%M:%S.%f}"[:-3], f"{event.name}  {values}")


def tensorboard_handler(logdir: str) -> monitor.TensorboardEventHandler:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        from tensorboardX import SummaryWriter
    return monitor.TensorboardEventHandler(SummaryWriter(logdir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="how long the fake training runs")
    parser.add_argument("--logdir", help="also write the windows to this TensorBoard log directory")
    args = parser.parse_args()

    monitor.register_event_handler(print_event)
    if args.logdir:
        monitor.register_event_handler(tensorboard_handler(args.logdir))

    window = timedelta(milliseconds=250)
    step_time = monitor.Stat("train/step_time_ms", [Aggregation.MEAN, Aggregation.MAX], window)
    with monitor.Stat("train/loss", [Aggregation.VALUE, Aggregation.MIN, Aggregation.COUNT], window) as loss:
        end = time.monotonic() + args.seconds
        step = 0
        while time.monotonic() < end:
            started = time.perf_counter()
            time.sleep(random.uniform(0.002, 0.01))  # the "training step"
            step += 1
            loss.add(2.0 * math.exp(-step / 100) + random.uniform(0, 0.05))
            step_time.add((time.perf_counter() - started) * 1000)
    step_time.close()  # logs the last, partial window (leaving the `with` block closed `loss`)
    last = {aggregation.name: round(value, 3) for aggregation, value in step_time.get().items()}
    print(f"{step} steps; step_time.get() of the last window: {last}")


if __name__ == "__main__":
    main()

"""add_histogram's cost in the training thread against numpy.histogram on the same array.

Rows: `LogWriter.add_histogram` of a 1M-element float32 numpy array, of a torch CPU tensor holding
the same values (and of a CUDA tensor when one is there), each against `numpy.histogram(array,
bins)` -- the reference, timed in the same loop. The run writes to a real SQLite file; what is
timed is the call alone (summary + queueing), which is all the training thread pays: the sink
writes in its own thread. The calls alternate (reference, ours, reference, ours, ...) and the best
repeat of each is kept, so load from other users of a shared machine hits both alike.
Target: every ratio <= 2.0.

    python bench/histogram.py [--size 1000000] [--bins 64] [--repeats 15]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import tallyboard as tb


def best_times(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The best wall time of each call over `repeats` rounds, the calls alternating in each round."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--bins", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    values = np.random.default_rng(0).normal(size=args.size).astype(np.float32)
    tensors = {"torch CPU tensor": torch.from_numpy(values.copy())}
    if torch.cuda.is_available():
        tensors["torch CUDA tensor"] = tensors["torch CPU tensor"].cuda()
    with tempfile.TemporaryDirectory() as folder:
        table = tb.ResultTable(str(Path(folder) / "bench.db"), nocommit_action=tb.NoCommitAction.NOP)
        run = table.new_run("bench-histogram")
        calls: dict[str, Callable[[], object]] = {
            "numpy.histogram": lambda: np.histogram(values, bins=args.bins),
            "numpy float32 array": lambda: run.add_histogram("numpy", values, bins=args.bins),
        }
        for name, tensor in tensors.items():
            calls[name] = lambda tensor=tensor, name=name: run.add_histogram(name, tensor, bins=args.bins)
        best = best_times(calls, args.repeats)
        run.close()
    reference = best.pop("numpy.histogram")
    print(f"{args.size:,} float32 values, {args.bins} bins, best of {args.repeats} alternated repeats")
    print(f"{'numpy.histogram (reference)':<32}{reference * 1e3:9.2f} ms")
    for name, seconds in best.items():
        print(f"{'add_histogram, ' + name:<32}{seconds * 1e3:9.2f} ms  ratio {seconds / reference:5.2f}x")


if __name__ == "__main__":
    main()

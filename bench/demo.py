"""How long `tallyboard demo` takes until its dashboard answers: the figure the README quotes.

Each repetition runs, in fresh processes and alternating (the machine is small and shared):
  demo       `python -m tallyboard demo --db NEW --quiet --port P` until GET / answers 200 (imports,
             training with every log call, images and figures, the server start);
  reference  the same sweep trained by scikit-learn alone (same data, model, epochs, batches and
             per-epoch evaluation, no tallyboard at all), imports included.
The ratio demo / reference is what logging, media and serving add to the training itself.

    python bench/demo.py              # 3 repetitions, the default 6 epochs
    python bench/demo.py --reps 1 --epochs 1
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def reference(epochs: int) -> None:
    """The demo's training without tallyboard: what any script training this sweep would spend."""
    import warnings

    import numpy as np
    from sklearn.exceptions import ConvergenceWarning

    from tallyboard.cli.demo import (
        DEBUG_HPARAMS,
        DIVERGING_LEARNING_RATE,
        REPETITIONS,
        batches,
        evaluate,
        load_digits_split,
        make_model,
        sweep,
    )

    data = load_digits_split()
    plan = [(hparams, seed, epochs) for hparams in sweep() for seed in range(REPETITIONS)]
    plan += [({"lr": DIVERGING_LEARNING_RATE, "hidden_units": 64}, 0, 1), (DEBUG_HPARAMS, 0, 1)]
    warnings.simplefilter("ignore", ConvergenceWarning)
    for hparams, seed, run_epochs in plan:
        model = make_model(hparams, seed)
        rng = np.random.default_rng(seed)
        for _ in range(run_epochs):
            for batch_x, batch_y in batches(data, rng):
                model.partial_fit(batch_x, batch_y, classes=np.arange(10))
                model.predict(batch_x)
            evaluate(model, data)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def time_demo(epochs: int, folder: str) -> float:
    """Seconds from starting `tallyboard demo` to its dashboard answering."""
    port = _free_port()
    db = os.path.join(folder, f"demo-{port}.db")
    command = [sys.executable, "-m", "tallyboard", "demo", "--db", db, "--quiet", "--port", str(port)]
    started = time.perf_counter()
    server = subprocess.Popen([*command, "--epochs", str(epochs)], stdout=subprocess.DEVNULL)
    try:
        while True:
            if server.poll() is not None:
                raise RuntimeError("the demo exited instead of serving")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    if response.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.05)
    finally:
        server.terminate()
        server.wait(timeout=30)


def time_reference(epochs: int) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--reference", "--epochs", str(epochs)], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=6, help="the demo's default is 6")
    parser.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference:
        reference(args.epochs)
        return
    demo, plain = [], []
    with tempfile.TemporaryDirectory() as folder:
        for rep in range(args.reps):
            order = (("demo", demo), ("reference", plain))
            for name, samples in order if rep % 2 == 0 else order[::-1]:
                seconds = time_demo(args.epochs, folder) if name == "demo" else time_reference(args.epochs)
                samples.append(seconds)
                print(f"rep {rep + 1}/{args.reps} {name:9s} {seconds:6.1f} s", flush=True)
    load = os.getloadavg()[0]
    demo_s, plain_s = statistics.median(demo), statistics.median(plain)
    print(f"\n{os.cpu_count()} cores, load average {load:.1f} at the end; medians of {args.reps}:")
    print(f"  tallyboard demo until the dashboard answers: {demo_s:.1f} s (min {min(demo):.1f})")
    print(f"  the same training, scikit-learn alone:       {plain_s:.1f} s (min {min(plain):.1f})")
    print(f"  ratio demo / reference: {demo_s / plain_s:.2f}x")


if __name__ == "__main__":
    main()

"""Run ONE workload of ONE adapter in this (fresh) process and print a JSON result line.

Invoked by bench.py; can be run by hand too:
    python worker.py --adapter tensorboardx --workload A --n 200000 --out OUT_DIR

Result JSON (last stdout line, prefixed with 'RESULT '):
    import_s        seconds to import the library (adapter.setup_imports())
    n               scalars written (A/B/C) or runs started (D)
    total_s         timed region: first log call .. end of close/flush (A/B), read (C)
    loop_s          part of total_s spent in the log calls themselves (before close)
    close_s         part of total_s spent in close/flush/finish
    rss_base_kb     peak resident set (VmHWM) after imports + untimed setup (before the timed region)
    rss_self_kb     peak resident set (VmHWM) of this process at the end (not ru_maxrss, which a
                    child starts at its parent's peak)
    rss_children_kb ru_maxrss of waited-for children (wandb-core etc.)
    disk_bytes      sum of st_size of all files under --out after close (A/B)
    d_ms            list of per-run start costs in ms (D)
"""

import argparse
import importlib
import json
import os
import random
import resource
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

TAG = "train/loss"
B_TAGS = [f"group{g}/metric{k}" for g in range(4) for k in range(5)]  # 20 tags


def peak_rss_kb() -> int:
    """This process's own peak resident set (Linux's VmHWM, which exec resets)."""
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


CRASH_AFTER_S = 2.0  # K: seconds between the last log call and SIGKILL


class KillAtLap:
    """Workload K: the adapter's workload_A logs as usual; where it would close (t.lap()), the process
    idles CRASH_AFTER_S seconds, as a training loop between logs would, then dies by SIGKILL: no
    close, no atexit, no flush. A fresh process then reads back what survived (bench.py)."""

    def start(self):
        pass

    def lap(self):
        time.sleep(CRASH_AFTER_S)
        os.kill(os.getpid(), signal.SIGKILL)

    def stop(self):
        pass


class Timer:
    """Adapters call t.start() before their first log call, t.lap() after the last
    log call (before close/flush) and t.stop() after close/flush."""

    def __init__(self):
        self.t0 = self.t1 = self.t2 = None
        self.rss_base_kb = None

    def start(self):
        self.rss_base_kb = peak_rss_kb()
        self.t0 = time.perf_counter()

    def lap(self):
        self.t1 = time.perf_counter()

    def stop(self):
        self.t2 = time.perf_counter()
        if self.t1 is None:
            self.t1 = self.t2


def disk_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            try:
                if not os.path.islink(p):
                    total += os.stat(p).st_size
            except OSError:
                pass
    return total


def make_vals(n, seed=0):
    rnd = random.Random(seed)
    return [rnd.random() for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--workload", required=True, choices=["A", "B", "Cprep", "C", "D", "K", "Kread"])
    ap.add_argument("--n", type=int, default=200_000, help="A/C: scalars; B: steps per tag; D: runs")
    ap.add_argument("--reader", default=None, help="C: which reader of the adapter (READERS key)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    os.makedirs(a.out, exist_ok=True)
    mod = importlib.import_module(f"adapters.{a.adapter}")

    t_imp = time.perf_counter()
    mod.setup_imports()
    import_s = time.perf_counter() - t_imp

    res = {"adapter": a.adapter, "workload": a.workload, "import_s": import_s, "reader": a.reader}
    t = Timer()

    if a.workload == "A":
        vals = make_vals(a.n)
        mod.workload_A(a.out, TAG, vals, t)
        res["n"] = a.n
    elif a.workload == "B":
        vals = make_vals(
            a.n
        )  # one value per step; each tag logs value (+ tiny per-tag offset if adapter wants)
        mod.workload_B(a.out, B_TAGS, vals, t)
        res["n"] = a.n * len(B_TAGS)
    elif a.workload == "Cprep":
        vals = make_vals(a.n)
        t.start()
        mod.prepare_C(a.out, TAG, vals)
        t.stop()
        res["n"] = a.n
    elif a.workload == "C":
        readers = getattr(mod, "READERS", None) or {"default": mod.read_C}
        reader = readers[a.reader or next(iter(readers))]
        t.start()
        out = reader(a.out, TAG)
        t.stop()
        try:
            got = len(out)
        except TypeError:
            got = -1
        res["n"] = got
        res["expected_n"] = a.n
        if got != a.n:
            res["error"] = f"read back {got} points, expected {a.n}"
    elif a.workload == "K":
        mod.workload_A(a.out, TAG, make_vals(a.n), KillAtLap())
        raise SystemExit("workload K: the process was meant to die at t.lap()")
    elif a.workload == "Kread":
        reader = getattr(mod, "read_after_crash", None) or mod.read_C
        t.start()
        try:
            got = len(reader(a.out, TAG))
        except Exception as error:  # nothing readable is a result too: 0 survived
            got, res["read_error"] = 0, f"{type(error).__name__}: {error}"[:300]
        t.stop()
        res["n"] = got
        res["expected_n"] = a.n
    elif a.workload == "D":
        if hasattr(mod, "setup_D"):
            mod.setup_D(a.out)
        ms = []
        t.start()
        for i in range(a.n):
            s = time.perf_counter()
            mod.start_run_D(a.out, i)
            ms.append((time.perf_counter() - s) * 1e3)
        t.stop()
        res["n"] = a.n
        res["d_ms"] = ms

    res["total_s"] = t.t2 - t.t0
    res["loop_s"] = t.t1 - t.t0
    res["close_s"] = t.t2 - t.t1
    res["rss_base_kb"] = t.rss_base_kb
    res["rss_self_kb"] = peak_rss_kb()
    res["rss_children_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if a.workload in ("A", "B", "Cprep"):
        res["disk_bytes"] = disk_bytes(a.out)
    sys.stdout.flush()
    print("RESULT " + json.dumps(res), flush=True)
    # some libraries leave non-daemon threads behind; do not let them hang the runner
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

"""What rules cost the training thread: nanoseconds per `add_scalar` call with 3 rules attached,
as a ratio to the same call without rules, in one process (docs/alerts.md; target <= 1.1x).

Three rows, each timed in its own run of one table, alternately (plain, watched, unwatched, plain,
...) so that load from other users of a shared machine hits all alike; the best repeat of each
is kept. Each repeat is short and follows a `flush()` (which also runs the rules on what is
pending), so what is timed is the call itself: the rules run in the evaluator thread, whose work
per watched value is printed apart, measured by `evaluate()` on a queue of --calls values.

- plain: a run without rules;
- watched: a run with NonFinite, Threshold and NoImprovement on the logged tag;
- unwatched: the same run, a tag no rule watches.

    python bench/alerts_cost.py [--calls 2000] [--repeats 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import tallyboard as tb
from tallyboard.alerts import NoImprovement, NonFinite, Threshold


def timed(run: tb.LogWriter, tag: str, calls: int, start: int) -> float:
    """Seconds for `calls` add_scalar calls of `tag`, after a flush."""
    run.flush()
    add = run.add_scalar
    began = time.perf_counter()
    for step in range(start, start + calls):
        add(tag, 0.5, step)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        table = tb.ResultTable(str(Path(folder) / "results.db"), nocommit_action=tb.NoCommitAction.NOP)
        plain = table.new_run("plain", unique=False, auto_log_plt=False, environment=False)
        ruled = table.new_run("ruled", unique=False, auto_log_plt=False, environment=False)
        for rule in (NonFinite("train/loss"), Threshold("train/loss", above=1e9),
                     NoImprovement("train/loss", patience=10**9)):  # fmt: skip
            ruled.add_rule(rule)
        rows = {
            "plain": (plain, "train/loss"),
            "watched": (ruled, "train/loss"),
            "unwatched": (ruled, "train/lr"),
        }
        best = dict.fromkeys(rows, float("inf"))
        for repeat in range(args.repeats):
            for name, (run, tag) in rows.items():
                best[name] = min(best[name], timed(run, tag, args.calls, repeat * args.calls))
        ns = {name: seconds / args.calls * 1e9 for name, seconds in best.items()}
        alerting = ruled._alerting
        assert alerting is not None
        ruled.flush()
        alerting.pending["train/loss"].extend((0, step, None, 0.0, 0.5) for step in range(args.calls))
        began = time.perf_counter()
        alerting.evaluate()
        evaluator_ns = (time.perf_counter() - began) / args.calls * 1e9
        plain.close()
        ruled.close()
    for label, name in (("no rules", "plain"), ("3 rules watch the tag", "watched"),
                        ("3 rules, an unwatched tag", "unwatched")):  # fmt: skip
        print(f"add_scalar, {label:26} {ns[name]:6.0f} ns/call  ratio {ns[name] / ns['plain']:.2f}x")
    print(f"evaluator thread, per watched value: {evaluator_ns:6.0f} ns (3 rules; off the training thread)")


if __name__ == "__main__":
    main()

"""A small hparam sweep for the statistics, hparams and diff views: 8 runs (lr x batch_size),
3 repetitions each, `val/accuracy` curves whose final values are set exactly (so a test knows
every sample), an `accuracy` result per run, and config files that differ in one line."""

from __future__ import annotations

from pathlib import Path

import tallyboard as tb

LRS = (0.0001, 0.001, 0.01, 0.1)
BATCHES = (32, 64)
STEPS = 6


def final_value(lr: float, batch: int, rep: int) -> float:
    """The final val/accuracy of a repetition: lr 0.01 best, batch 64 slightly better, rep noise."""
    base = {0.0001: 0.60, 0.001: 0.75, 0.01: 0.86, 0.1: 0.70}[lr]
    return round(base + (0.01 if batch == 64 else 0.0) + (-0.02, 0.005, 0.015)[rep], 6)


def log_sweep(url_or_path: str | Path, config_dir: Path) -> dict[int, tuple[float, int]]:
    """Log the sweep; returns run id -> (lr, batch_size)."""
    table = tb.ResultTable(url_or_path, nocommit_action=tb.NoCommitAction.NOP)
    runs = {}
    for lr in LRS:
        for batch in BATCHES:
            config = config_dir / f"config_{lr}_{batch}.yaml"
            config.write_text(
                f"model: resnet18\noptimizer: sgd\nlr: {lr}\nbatch_size: {batch}\nepochs: {STEPS}\n"
            )
            run = table.new_run(
                "sweep", configfile=str(config), cli={"lr": lr, "batch_size": batch}, auto_log_plt=False
            )
            run.add_hparams(lr=lr, batch_size=batch)
            for rep in range(3):
                if rep:
                    run.new_repetition()
                final = final_value(lr, batch, rep)
                for step in range(STEPS):
                    run.add_scalar("val/accuracy", final * (step + 1) / STEPS, step=step, epoch=step)
            run.write_result(accuracy=final_value(lr, batch, 1))
            runs[run.run_id] = (lr, batch)
    table.close()
    return runs

"""The README's first result-table snippet, run as written: every Stat window lands, nothing is printed."""

import re
import subprocess
import sys
from pathlib import Path

import tallyboard as tb

README = Path(__file__).resolve().parents[1] / "README.md"

# What the snippet leaves to the reader (`args`, `epochs`, `loader`, `dt`, `loss`, `grid`, `acc`),
# and a clock for its Stat that each batch moves 4 s on, so windows close without waiting.
HARNESS = """
import argparse, types
import numpy as np
import tallyboard.monitor.stat as stat_module

now = [0.0]
stat_module.time = types.SimpleNamespace(monotonic=lambda: now[0])


def batches(count):
    for index in range(count):
        now[0] += 4.0
        yield index


args = argparse.Namespace(lr=3e-4, batch_size=128)
epochs = 3
loader = type("Loader", (), {"__iter__": lambda self: batches(5)})()
dt, loss, acc = 0.25, 0.5, 0.9
grid = np.zeros((8, 8, 3), dtype=np.uint8)
"""
EPOCHS, BATCHES, SECONDS_PER_BATCH, WINDOW_S = 3, 5, 4.0, 10


def first_snippet() -> str:
    text = README.read_text()
    section = text[text.index("## The result table") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_snippet_logs_every_stat_window_and_prints_nothing(db_url, tmp_path):
    snippet = first_snippet()
    assert 'ResultTable("results.db")' in snippet and "ResultTableEventHandler(run)" in snippet
    if db_url.startswith("postgresql://"):  # the one change: where the table is
        snippet = snippet.replace('"results.db"', repr(db_url))
    (tmp_path / "config.yaml").write_text("lr: 0.0003\n")
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", HARNESS + snippet],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

    table = tb.ResultTable(db_url if "://" in db_url else tmp_path / "results.db")
    (run_id,) = table.runs
    run = table.load_run(run_id)
    adds = [SECONDS_PER_BATCH * (i + 1) for i in range(EPOCHS * BATCHES)]
    # A window closes at the first add of the next one, before that batch's loss is logged: it lands
    # at the training step, the loss's calls so far; the last one, closed when the run ends, after all.
    closes = [i for i in range(1, len(adds)) if int(adds[i] // WINDOW_S) != int(adds[i - 1] // WINDOW_S)]
    steps = [*closes, len(adds)]
    assert len(steps) == len({int(t // WINDOW_S) for t in adds})  # every window, each at a step of its own
    for key in ("train/step_time.mean", "train/step_time.max"):
        assert [(s.step, s.value) for s in run.get_scalar(key)] == [(step, 0.25) for step in steps]
    assert run.status == "finished"
    table.close()

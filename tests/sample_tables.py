"""Real result tables, logged through the public API, for the CLI, export and import tests.

`log_sample_table` writes every kind of record and every edge the export must carry: NaN and
infinite scalars, a missing epoch, several repetitions, a hidden run, a failed run, the debug run,
notes, tags, colours, a config file, unicode/commas/quotes/newlines in text, an HTML fragment,
a Markdown text, a logged table (NaN, infinity and the string 'NaN' in it), a figure, console
lines of every stream (an empty one among them), the runs' environments, a renamed column and a
hidden one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import tallyboard as tb

TEXT_WITH_EVERYTHING = 'ünïcode, "quotes", commas\nnew lines\tand tabs; <b>not html</b>'
TABLE_ROWS = [["a", 0.5, True], ["NaN", float("nan"), None], ["c", -float("inf"), False]]
MARKDOWN_TEXT = "# Result\n\n**0.97**, see [the plot](#curve) <script>alert(1)</script>"


def log_sample_table(url: str, config_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    config = config_dir / "config.yaml"
    config.write_text("lr: 0.1\nlayers: [64, 64]\n", encoding="utf-8")
    table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
    try:
        with table.new_run("mnist", configfile=config, cli={"lr": 0.1, "seed": 1}, comment="baseline") as run:
            run.add_hparams(lr=0.1, optimizer="sgd", nesterov=True, layers=2)
            for rep in range(2):
                if rep:
                    run.new_repetition()
                for step in range(50):
                    run.add_scalar("train/loss", 1.0 / (step + 1) + rep, epoch=step // 10)
                    run.add_scalar("val/deep/acc", step / 50.0, step=step * 3)
                run.add_scalar("train/odd", float("nan"), step=0)
                run.add_scalar("train/odd", float("inf"), step=1)
                run.add_scalar("train/odd", float("-inf"), step=2)
                run.add_image(
                    np.full((6, 4, 3), 40 * rep, dtype=np.uint8), tag="samples", step=rep, epoch=rep
                )
                run.add_text(TEXT_WITH_EVERYTHING, tag="notes", step=rep)
                run.add_console_line(f'rep {rep}: ünïcode, "quotes", commas\tand tabs')
            run.add_image(np.linspace(0, 1, 64).reshape(8, 8), step=7)
            run.add_fragment("<table><tr><td>1 &amp; 2</td></tr></table>", tag="report", step=3)
            run.add_text(MARKDOWN_TEXT, tag="readme", step=3, markdown=True)
            run.add_table(["name", "score", "ok"], TABLE_ROWS, tag="predictions", step=3)
            run.add_console_line("", stream="stderr")
            run.add_console_line("WARNING train: loss is NaN", stream="log")
            _, axes = plt.subplots()
            axes.plot([1, 3, 2])
            run.detect_and_log_figures(tag="curve", step=4, close_figs=True)
            run.set_note("best so far")
            run.set_color("#1f77b4")
            run.set_tag("keep")
            run.write_result(accuracy=0.97, loss=float("nan"), epochs=5, best="yes")
        with table.new_run("mnist", cli={"lr": 1.0}, comment="hidden one") as hidden:
            hidden.add_hparams(lr=1.0)
            hidden.add_scalar("train/loss", 3.0)
            hidden.write_result(accuracy=0.1)
        table.hide_run(hidden.run_id)
        try:
            with table.new_run("mnist", cli={"lr": 9.0}, comment="crashes") as failed:
                failed.add_scalar("train/loss", 1e30)
                raise FloatingPointError("diverged")
        except FloatingPointError:
            pass
        with table.new_debug_run("scratch") as debug:
            debug.add_scalar("x", 1.5)
        table.set_column_alias({"accuracy": "Accuracy (val)"})
        table.hide_column("optimizer")
    finally:
        table.close()


def sample_table_in(folder: Path) -> str:
    """The path of a new SQLite file in `folder` holding `log_sample_table`, logged from a git
    repository of its own with an uncommitted change: the runs' git commit and diff must not depend
    on the state of the checkout running the tests (a clean one records an empty diff, which a CSV
    export cannot tell from none)."""
    repository = folder / "project"
    _repository_with_a_change(repository)
    url = str(folder / "results.db")
    previous = Path.cwd()
    os.chdir(repository)
    try:
        log_sample_table(url, folder)
    finally:
        os.chdir(previous)
    return url


def _repository_with_a_change(path: Path) -> None:
    path.mkdir()
    (path / "train.py").write_text("lr = 0.1\n", encoding="utf-8")
    author = ["-c", "user.name=tallyboard tests", "-c", "user.email=tests@tallyboard.invalid"]
    for args in (["init", "-q"], ["add", "train.py"], [*author, "commit", "-q", "-m", "first"]):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    (path / "train.py").write_text('lr = 0.2  # "tuned", with commas\n', encoding="utf-8")

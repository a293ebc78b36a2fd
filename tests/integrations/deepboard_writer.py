"""A DeepBoard 0.3.0 result table, written by the real `deepboard`: `python deepboard_writer.py OUT.db`.

Run in a subprocess from the test (DeepBoard replaces `sys.excepthook` for every writer and calls
git in the current directory, neither of which belongs in the pytest process).
"""

import sys
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from deepboard.resultTable import ResultTable
from PIL import Image

warnings.simplefilter("ignore")


def main(path: str) -> None:
    with open("config.yaml", "w") as config:
        config.write("lr: 0.1\nepochs: 3\n")
    table = ResultTable(path)
    run = table.new_run(
        "resnet", configfile="config.yaml", cli={"lr": 0.1, "bs": 32}, comment="first", tag="base"
    )
    run.add_hparams(lr=0.1, bs=np.int64(32), optimizer="sgd")
    for rep in range(2):
        if rep:
            run.new_repetition()
        for step in range(40):
            run.add_scalar("train/loss", 1.0 / (step + 1) + rep, epoch=step // 10)
            if step % 10 == 0:
                run.add_scalar("val/accuracy", step / 40, step=step, epoch=step // 10)
        run.add_scalar("val/odd", float("nan"), step=99)
        run.add_image(Image.new("RGB", (5, 3), (200, 10 * rep, 0)), tag="samples", epoch=rep)
        run.add_text(f"repetition {rep}: ünïcode, commas", tag="log")
    figure = plt.figure()
    plt.plot([3, 1, 2])
    run.detect_and_log_figures(tag="curve", step=7, epoch=1)
    plt.close(figure)
    run.add_fragment("<p>report <b>1</b></p>", tag="report", step=8)
    run.set_note("keep this one")
    run.set_color("#FF8800")
    run.write_result(accuracy=np.float32(0.75), loss=0.25, best=True)

    hidden = table.new_run("resnet", cli={"lr": 1.0}, comment="too fast", auto_log_plt=False)
    hidden.add_scalar("loss", 5.0)
    hidden.write_result(accuracy=0.1)
    table.hide_run(hidden.run_id)

    failed = table.new_run("resnet", cli={"lr": 9.0}, comment="crashed", auto_log_plt=False)
    failed.add_scalar("loss", 1e30, flush=True)
    failed.set_status("failed")

    debug = table.new_debug_run("scratch", auto_log_plt=False)
    debug.add_scalar("x", 1.5, flush=True)

    table.set_column_alias({"accuracy": "Accuracy", "experiment": "Exp"})
    table.hide_column("comment")


if __name__ == "__main__":
    main(sys.argv[1])

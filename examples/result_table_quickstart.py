"""The result table in one screen: start a run, log scalars/images/text, write results, read back.

    python examples/result_table_quickstart.py [results.db]

Run it twice: the second time the same configuration is refused (a DuplicateRunError), because
every finished run is meant to be reproducible from its row. Then `tallyboard serve results.db`.
"""

import math
import random
import sys

import tallyboard as tb
from tallyboard.store import DuplicateRunError


def main(path: str) -> None:
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    try:
        run = table.new_run("quickstart", cli={"lr": 3e-4, "epochs": 3}, comment="toy regression")
    except DuplicateRunError as error:
        print(error)
        return
    with run:  # leaving the block closes the run: 'finished', or 'failed' on an exception
        run.add_hparams(lr=3e-4, batch_size=32, optimizer="adam")
        step = 0
        for epoch in range(3):
            for _ in range(200):
                loss = math.exp(-step / 150) + random.random() * 0.05
                run.add_scalar("train/loss", loss, epoch=epoch)  # buffered: never waits on disk
                step += 1
            run.add_scalar("val/accuracy", 0.6 + 0.1 * epoch, epoch=epoch)
            run.add_text(f"epoch {epoch}: loss {loss:.3f}", tag="log")
        run.write_result(accuracy=0.8, loss=loss)  # durable when it returns; the run is now finished

    print(f"run {run.run_id}: {run.status}, tags {run.scalars}")
    series = run.get_scalar("train/loss")
    print(f"{len(series)} points, last: step {series[-1].step}, value {series[-1].value:.3f}")
    print(table.to_pd().tail())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results.db")

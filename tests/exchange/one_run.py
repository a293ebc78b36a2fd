"""A real export of one small run, and what a table holds of it: the material of the tests of
imports that meet a hostile or a damaged export."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tallyboard as tb
from cli_runner import run_cli
from tallyboard.store import open_store


def export_one_run(folder: Path) -> Path:
    """`tallyboard export` of a table with one run ("sent"): 100 scalars, 1 image, 1 artefact."""
    (folder / "weights.bin").write_bytes(b"the weights")
    table = tb.ResultTable(folder / "source.db", nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("sent") as run:
        for step in range(100):
            run.add_scalar("loss", 1.0 / (step + 1), step=step)
        run.add_image(np.zeros((4, 4, 3), dtype=np.uint8), tag="sample")
        run.log_artifact(folder / "weights.bin")
    table.close()
    out = folder / "export"
    run_cli("export", folder / "source.db", "--out", out, "--quiet")
    return out


def stored(path: Path) -> dict[str, object]:
    """What a table holds that an import could add: its runs, their images, artefacts and scalars."""
    store = open_store(str(path))
    try:
        runs = store.runs(show_hidden=True)
        return {
            "runs": [run.experiment for run in runs],
            "images": sum(len(store.media(run.run_id, "image")) for run in runs),
            "artifacts": sum(len(store.artifacts(run.run_id)) for run in runs),
            "scalars": sum(len(store.scalars(run.run_id, "loss")) for run in runs),
        }
    finally:
        store.close()

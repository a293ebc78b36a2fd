"""`tallyboard import tensorboard` of `add_scalars` and `add_embedding`: the series of one
`add_scalars` call stay in their run (one chart, a series per key) whichever writer wrote them, and
the projector's embeddings, which have no event, are counted as skipped, once each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tallyboard.integrations.tensorboard_import import import_logdir, series_key
from tallyboard.store import open_store

FAR_FUTURE = 4e9


def runs_and_scalars(url: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    store = open_store(url)
    try:
        return {
            run.experiment: {
                tag: [(step, value) for _, step, _, _, value in store.scalars(run.run_id, tag)]
                for tag in store.tag_names(run.run_id, "scalars")
            }
            for run in store.runs(show_hidden=True)
        }
    finally:
        store.close()


@pytest.mark.parametrize("writer_module", ["torch.utils.tensorboard", "tensorboardX"])
def test_the_series_of_add_scalars_stay_in_their_run(writer_module: str, tmp_path: Path) -> None:
    from importlib import import_module

    SummaryWriter = import_module(writer_module).SummaryWriter
    writer = SummaryWriter(str(tmp_path / "logs" / "exp"))
    for step in range(3):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
        writer.add_scalars("Error/rate", {"train": step / 4, "val": step / 2}, step)
        writer.add_scalars("acc", {"top1": step / 8}, step)
    writer.close()
    url = str(tmp_path / "results.db")
    report = import_logdir(tmp_path / "logs", url, clock=lambda: FAR_FUTURE)
    assert report.new == ["exp"]  # one training, one run
    assert runs_and_scalars(url) == {
        "exp": {
            "loss": [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3))],
            "train/Error/rate": [(0, 0.0), (1, 0.25), (2, 0.5)],
            "val/Error/rate": [(0, 0.0), (1, 0.5), (2, 1.0)],
            "top1/acc": [(0, 0.0), (1, 0.125), (2, 0.25)],
        }
    }
    assert report.tally.imported["scalars"] == 12
    again = import_logdir(tmp_path / "logs", url, clock=lambda: FAR_FUTURE)
    assert again.unchanged == ["exp"] and not again.tally.imported  # folded again, nothing twice


def test_a_series_key_is_read_from_either_writers_folder_name() -> None:
    assert series_key("Error_rate_train", "Error/rate") == "train"  # torch
    assert series_key("Error/rate/train", "Error/rate") == "train"  # tensorboardX
    assert series_key("other_run", "loss") is None
    assert series_key("loss_", "loss") is None
    assert series_key("loss/a/b", "loss") is None


def test_embeddings_are_counted_as_skipped_once_each(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    logs = tmp_path / "logs"
    writer = SummaryWriter(str(logs / "exp"))
    writer.add_scalar("loss", 1.0, 0)
    writer.add_embedding(np.eye(4), metadata=["a", "b", "c", "d"], global_step=1)
    writer.add_embedding(np.ones((2, 3)), tag="second")
    writer.flush()
    url = str(tmp_path / "results.db")
    first = import_logdir(logs, url, clock=lambda: 0.0)  # still running
    assert first.tally.skipped == {"embeddings": 2}
    assert "skipped: 2 embeddings" in first.text()
    assert not import_logdir(logs, url, clock=lambda: 0.0).tally.skipped  # counted once
    writer.add_embedding(np.zeros((2, 2)), tag="third")
    writer.close()
    assert import_logdir(logs, url, clock=lambda: FAR_FUTURE).tally.skipped == {"embeddings": 1}

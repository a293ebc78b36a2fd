"""`tallyboard demo`: a real sweep lands in the table with every artefact the README promises.

The demo trains scikit-learn MLPs on the digits bundled with scikit-learn, so these tests also check
that it learned (validation accuracy far above the 10 % of guessing), not only that rows exist.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from demo_table import DEMO_EPOCHS, copy_of
from ports import free_port
from tallyboard.cli.demo import HIDDEN_WIDTHS, LEARNING_RATES, REPETITIONS
from tallyboard.store import open_store

EPOCHS = DEMO_EPOCHS
STEPS_PER_EPOCH = 23  # ceil(1437 training digits / batch of 64)


@pytest.fixture
def demo_db(demo_table: str) -> str:
    """The session's demo table (tests/conftest.py), trained once for every test that reads it."""
    return demo_table


def test_the_sweep_is_six_runs_of_three_repetitions_that_learned(demo_db: str) -> None:
    store = open_store(demo_db)
    try:
        sweep = [run for run in store.runs() if run.tag == "sweep"]
        hparams, results = store.values("hparams"), store.values("results")
        grid = {(lr, width) for lr in LEARNING_RATES for width in HIDDEN_WIDTHS}
        assert {(hparams[r.run_id]["lr"], hparams[r.run_id]["hidden_units"]) for r in sweep} == grid
        assert len(sweep) == 6
        for run in sweep:
            run_id = run.run_id
            assert run.status == "finished" and run.end_time > run.start_time
            assert store.repetitions(run_id) == list(range(REPETITIONS))
            assert set(results[run_id]) == {"val_accuracy", "val_accuracy_std", "val_loss"}
            assert hparams[run_id]["epochs"] == EPOCHS
        assert max(results[run.run_id]["val_accuracy"] for run in sweep) > 0.8
    finally:
        store.close()


def test_every_kind_of_record_is_logged(demo_db: str) -> None:
    store = open_store(demo_db)
    try:
        run_id = next(run.run_id for run in store.runs() if run.tag == "sweep")
        tags = set(store.tag_names(run_id, "scalars"))
        assert {
            "train/batch_loss",
            "train/batch_accuracy",
            "train/loss",
            "train/accuracy",
            "val/loss",
        } <= tags
        assert {"val/accuracy", "train/step_time_ms.mean", "train/step_time_ms.max"} <= tags
        per_step = store.scalars(run_id, "train/batch_loss")
        assert len(per_step) == REPETITIONS * EPOCHS * STEPS_PER_EPOCH
        assert {rep for rep, *_ in per_step} == set(range(REPETITIONS))
        per_epoch = store.scalars(run_id, "val/accuracy")
        assert [(rep, step, epoch) for rep, step, epoch, _, _ in per_epoch] == [
            (rep, epoch, epoch) for rep in range(REPETITIONS) for epoch in range(EPOCHS)
        ]
        assert store.scalars(run_id, "train/step_time_ms.mean")  # Stat windows through tallyboard.monitor
        images = store.media(run_id, "image")
        assert len(images) == REPETITIONS * EPOCHS and {row[4] for row in images} == {"val/samples"}
        figures = store.media(run_id, "figure")
        assert len(figures) == REPETITIONS and {row[4] for row in figures} == {"val/confusion"}
        assert all(row[8].startswith(b"\x89PNG") for row in images + figures)
        fragments = store.texts(run_id, "fragment")
        assert len(fragments) == REPETITIONS and "<table>" in fragments[0][6]
        assert [row[4] for row in store.texts(run_id, "text")] == ["model"]
    finally:
        store.close()


def test_one_run_fails_on_purpose_and_one_is_the_debug_run(demo_db: str) -> None:
    store = open_store(demo_db)
    try:
        failed = [run for run in store.runs() if run.status == "failed"]
        assert len(failed) == 1 and failed[0].tag == "diverges"
        assert "on purpose" in failed[0].note
        assert "diverged" in store.texts(failed[0].run_id, "text", tag="error")[0][6]
        debug = store.run(-1)
        assert debug is not None and debug.status == "finished"
        assert store.scalars(-1, "val/accuracy")
    finally:
        store.close()


def test_the_demo_run_again_adds_a_second_sweep_then_serves_it(demo_db: str, tmp_path: Path) -> None:
    path = copy_of(demo_db, tmp_path / "twice.db")
    port = free_port()
    command = [sys.executable, "-m", "tallyboard", "demo", "--db", str(path), "--epochs", "1", "--quiet"]
    server = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, "the demo exited instead of serving"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the dashboard never answered"
                time.sleep(0.2)
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert "logged 8 runs" in output and "val accuracy" in output
    store = open_store(str(path))
    try:
        assert len([run for run in store.runs() if run.tag == "sweep"]) == 12
    finally:
        store.close()

"""TallyboardLogger(log_model=...): ModelCheckpoint files kept as artefacts, on both engines."""

import hashlib
from pathlib import Path

import pytest

import tallyboard as tb
from integrations.lightning_job import TinyRegression, fit
from tallyboard.integrations.lightning import TallyboardLogger
from tallyboard.store import is_postgres_url


@pytest.fixture
def table(db_url, tmp_path):
    """A table on each engine; PostgreSQL with a local folder as its artefact store."""
    store = tmp_path / "artifacts" if is_postgres_url(db_url) else None
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP, artifacts=store)
    yield table
    table.close()


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_log_model_true_keeps_the_checkpoints_left_at_the_end(table, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="ckpt", log_model=True)
    trained = fit(logger, tmp_path, TinyRegression())
    best = trained.checkpoint_callback.best_model_path
    [artifact] = table.load_run(logger.version).get_artifacts()  # top-1: the epoch-0 file is gone
    assert (artifact.name, artifact.kind, artifact.sha256) == (Path(best).name, "model", digest(best))
    logger.write_result()


def test_log_model_all_keeps_every_checkpoint_as_it_is_saved(table, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="ckpt", log_model="all")
    trained = fit(logger, tmp_path, TinyRegression())
    artifacts = table.load_run(logger.version).get_artifacts()
    assert [(a.name, a.step) for a in artifacts] == [("epoch=0-step=4.ckpt", 3), ("epoch=1-step=8.ckpt", 7)]
    assert artifacts[-1].sha256 == digest(trained.checkpoint_callback.best_model_path)
    logger.write_result()


def test_no_artifacts_unless_asked_and_a_bad_value_is_refused(table, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="ckpt")
    fit(logger, tmp_path, TinyRegression())
    assert table.load_run(logger.version).get_artifacts() == []
    logger.write_result()
    with pytest.raises(ValueError, match="log_model"):
        TallyboardLogger(table=table, experiment_name="ckpt", log_model="best")

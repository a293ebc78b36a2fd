"""TallyboardLogger: a tiny Lightning model trained on CPU, logged to a real table on both engines."""

import dataclasses
import json
import os
from argparse import Namespace
from pathlib import Path

import pytest

from integrations.lightning_job import TinyRegression, fit, loader
from tallyboard.integrations.lightning import TallyboardLogger
from tallyboard.store import DuplicateRunError

# Each strategy on one engine (a DDP job is two processes importing torch and Lightning: the slowest
# tests of the suite): every strategy and every engine is covered, not every pair.
DDP_CASES = [("ddp", "sqlite"), ("ddp_spawn", "postgres")]
# Tests of a whole training process, likewise on one engine each (the crash matrix, tests/crash,
# covers every way a process ends on both).
ON_SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
ON_POSTGRES = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)


def job_lines(done):
    """What each process of a job said at its end, by rank."""
    said = [json.loads(line[4:]) for line in done.stdout.splitlines() if line.startswith("JOB ")]
    return {entry["rank"]: entry for entry in said}


def test_two_epochs_log_hparams_metrics_checkpoints_and_results(table, results_of, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="tiny-regression", comment="lightning test")
    trained = fit(logger, tmp_path, TinyRegression(lr=0.05, hidden=4))
    run = table.load_run(logger.version)
    assert run.status == "running"  # a stage ending does not end the run
    logger.write_result(extra=1.0)
    assert run.status == "finished"
    assert table.get_experiment_raw(logger.version)["experiment"] == "tiny-regression"
    # "hidden" is a column of every run (the hidden flag): the hparam keeps its name all the same
    hparams = run.get_hparams()
    assert {key: hparams[key] for key in ("lr", "hidden", "fail_at_step")} == {
        "lr": 0.05,
        "hidden": 4,
        "fail_at_step": None,
    }

    train_loss = run.get_scalar("train/loss")
    assert [point.step for point in train_loss] == list(range(8))  # 4 batches x 2 epochs
    assert [point.epoch for point in train_loss] == [0] * 4 + [1] * 4
    val_loss = run.get_scalar("val/loss")
    assert [(point.step, point.epoch) for point in val_loss] == [(3, 0), (7, 1)]
    assert val_loss[-1].value == pytest.approx(trained.callback_metrics["val/loss"].item())

    row = results_of(logger.version)
    assert row["val/loss"] == pytest.approx(val_loss[-1].value)
    assert row["train/loss"] == pytest.approx(train_loss[-1].value)
    assert row["extra"] == 1.0

    # One record per checkpoint written (top-1 by default: the epoch-0 file was replaced since),
    # in the folder Lightning's own loggers use: <root>/<name>/version_<id>/checkpoints.
    checkpoints = run.get_text(tag="checkpoints/best")
    assert [record["step"] for record in checkpoints] == [3, 7]
    best = trained.checkpoint_callback.best_model_path
    assert checkpoints[-1]["fragment"] == best
    assert Path(best).parent == tmp_path / "tiny-regression" / f"version_{logger.version}" / "checkpoints"


def test_fit_validate_test_predict_log_into_one_run(table, results_of, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="stages")
    model = TinyRegression()
    trained = fit(logger, tmp_path, model, enable_checkpointing=False)
    trained.validate(model, loader(), verbose=False)
    trained.test(model, loader(), verbose=False)
    trained.predict(model, loader())
    logger.write_result()
    assert table.runs == [logger.version]
    run = table.load_run(logger.version)
    assert run.status == "finished"
    assert [point.step for point in run.get_scalar("test/loss")] == [8]
    assert len(run.get_scalar("val/loss")) == 3  # two epochs, then validate()
    assert results_of(logger.version)["test/loss"] == pytest.approx(run.get_scalar("test/loss")[0].value)


def test_a_relaunch_is_a_new_run_and_unique_refuses_a_duplicate_before_fit(table, tmp_path):
    first = TallyboardLogger(table=table, experiment_name="sweep")
    fit(first, tmp_path, TinyRegression(lr=0.1), enable_checkpointing=False, max_epochs=1)
    second = TallyboardLogger(table=table, experiment_name="sweep")  # the same script, launched again
    fit(second, tmp_path, TinyRegression(lr=0.01), enable_checkpointing=False, max_epochs=1)
    assert second.version == first.version + 1
    assert table.load_run(second.version).get_hparams()["lr"] == 0.01
    for logger in (first, second):
        logger.write_result()

    kept = TallyboardLogger(table=table, experiment_name="unique", unique=True, hparams={"lr": 0.1})
    with pytest.raises(DuplicateRunError):
        TallyboardLogger(table=table, experiment_name="unique", unique=True, hparams={"lr": 0.1})
    other = TallyboardLogger(table=table, experiment_name="unique", unique=True, hparams={"lr": 0.2})
    assert other.version == kept.version + 1
    kept.write_result()
    other.write_result()


def test_an_existing_writer(table, results_of, tmp_path):
    writer = table.new_run("given writer")
    logger = TallyboardLogger(writer)
    fit(logger, tmp_path, TinyRegression(), enable_checkpointing=False)
    assert logger.experiment is writer and logger.version == writer.run_id
    writer.add_scalar("test/extra", 1.5)  # the run is still open after fit
    logger.write_result(test_score=0.75)
    assert table.load_run(writer.run_id).status == "finished"
    row = results_of(writer.run_id)
    assert row["test_score"] == 0.75 and "val/loss" in row


def test_a_failing_fit_marks_the_run_failed(table, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="diverges")
    with pytest.raises(RuntimeError, match="diverged"):
        fit(logger, tmp_path, TinyRegression(fail_at_step=5), enable_checkpointing=False)
    run = table.load_run(logger.version)
    assert run.status == "failed"
    assert [point.step for point in run.get_scalar("train/loss")] == list(range(5))
    with pytest.raises(RuntimeError, match="read-only"):  # ended for good, not just relabelled
        logger.experiment.add_scalar("train/loss", 0.0)


# Resuming writes into the run's own checkpoint folder again, as it should; Lightning says so.
@pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty:UserWarning")
def test_resume_from_a_checkpoint_continues_the_run_with_one_clean_series(table, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="resumed")
    with pytest.raises(RuntimeError, match="diverged"):  # epoch 0 checkpointed, steps 4 and 5 logged
        fit(logger, tmp_path, TinyRegression(fail_at_step=6))
    [checkpoint] = (tmp_path / "resumed" / f"version_{logger.version}" / "checkpoints").iterdir()

    again = TallyboardLogger(table=table, experiment_name="resumed", version=logger.version)
    fit(again, tmp_path, TinyRegression(), ckpt_path=checkpoint)
    again.write_result()
    assert table.runs == [logger.version]
    run = table.load_run(logger.version)
    assert run.status == "finished"
    assert [point.step for point in run.get_scalar("train/loss")] == list(range(8))  # 4, 5 replaced
    assert [point.step for point in run.get_scalar("val/loss")] == [3, 7]


@dataclasses.dataclass
class Optimiser:
    name: str = "sgd"
    momentum: float = 0.9


def test_hyperparameters_from_namespaces_nested_dicts_and_dataclasses(table, tmp_path):
    logger = TallyboardLogger(table=table, experiment_name="hparams", save_dir=tmp_path)
    logger.log_hyperparams(Namespace(lr=0.1, layers={"sizes": "4-4", "dropout": {"p": 0.5}}))
    logger.log_hyperparams({"optimiser": Optimiser(), "steps": 3})
    logger.log_hyperparams(Optimiser(name="adam"))
    logger.log_graph(TinyRegression())  # nothing to do, nothing raised
    logger.write_result()
    assert table.load_run(logger.version).get_hparams() == {
        "lr": 0.1,
        "layers/sizes": "4-4",
        "layers/dropout/p": 0.5,
        "optimiser/name": "sgd",
        "optimiser/momentum": 0.9,
        "steps": 3,
        "name": "adam",
        "momentum": 0.9,
    }
    assert logger.name == "hparams"
    assert logger.save_dir == str(tmp_path)
    assert logger.log_dir == os.path.join(tmp_path, "hparams", f"version_{logger.version}")


@ON_SQLITE
def test_the_run_ends_with_the_process_finished_with_its_results(table, run_job, tmp_path):
    options = {"test": True, "trainer": {"enable_checkpointing": False}}
    said = job_lines(run_job("lightning_job.py", table.db_path, tmp_path, json.dumps(options)))
    [run_id] = table.runs
    assert said[0]["version"] == run_id
    run = table.load_run(run_id)
    assert run.status == "finished"
    assert set(table.get_results(run_id).col_ids) >= {"train/loss", "val/loss", "test/loss"}


@pytest.mark.parametrize(("strategy", "db_url"), DDP_CASES, indirect=["db_url"])
def test_ddp_on_two_processes_is_one_run_written_by_rank_zero(table, run_job, tmp_path, strategy):
    options = {
        "test": True,
        "trainer": {"strategy": strategy, "devices": 2},
        "logger": {"save_dir": str(tmp_path)},
    }
    said = job_lines(run_job("lightning_job.py", table.db_path, tmp_path, json.dumps(options)))
    [run_id] = table.runs
    log_dir = os.path.join(tmp_path, "job", f"version_{run_id}")
    expected = {"version": run_id, "name": "job", "save_dir": str(tmp_path), "log_dir": log_dir}
    ranks = [0, 1] if strategy == "ddp" else [0]  # ddp_spawn: the launching process, after fit and test
    assert sorted(said) == ranks
    for rank in ranks:
        assert {key: said[rank][key] for key in expected} == expected
    run = table.load_run(run_id)
    assert run.status == "finished"
    # 32 samples split over 2 ranks, 8 per batch: 2 steps per epoch, logged once (by rank zero).
    assert [point.step for point in run.get_scalar("train/loss")] == list(range(4))
    assert len(run.get_scalar("test/loss")) == 1  # at the step Lightning gives (0 in a fresh spawn)


@ON_SQLITE
def test_a_crash_on_rank_one_marks_the_run_failed(table, run_job, tmp_path):
    """With `ddp` (rank one is a process of its own, started by Lightning as a script); `ddp_spawn`'s
    ranks end the same way (the test above), and a spawn costs a minute more of imports."""
    options = {
        "trainer": {"strategy": "ddp", "devices": 2},
        "model": {"fail_at_step": 2, "fail_on_rank": 1},
    }
    done = run_job("lightning_job.py", table.db_path, tmp_path, json.dumps(options), check=False)
    assert done.returncode != 0
    [run_id] = table.runs
    assert table.load_run(run_id).status == "failed"


@ON_POSTGRES
def test_a_killed_and_requeued_slurm_job_continues_its_run(table, run_job, tmp_path):
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "0"}
    killed = run_job(
        "lightning_job.py",
        table.db_path,
        tmp_path,
        json.dumps({"model": {"kill_at_step": 6}}),
        env=slurm,
        check=False,
    )
    assert killed.returncode == -9
    [run_id] = table.runs
    assert table.load_run(run_id).status == "running"  # SIGKILL: nobody could say otherwise
    [checkpoint] = (tmp_path / "job" / f"version_{run_id}" / "checkpoints").iterdir()

    requeued = {**slurm, "SLURM_RESTART_COUNT": "1"}
    options = {"ckpt_path": str(checkpoint)}
    said = job_lines(run_job("lightning_job.py", table.db_path, tmp_path, json.dumps(options), env=requeued))
    assert said[0]["version"] == run_id
    assert table.runs == [run_id]
    run = table.load_run(run_id)
    assert run.status == "finished"
    assert [point.step for point in run.get_scalar("train/loss")] == list(range(8))
    assert run.get_hparams()["slurm_job_id"] == "4242"


def test_tallyboard_run_id_names_the_run_to_continue(table, monkeypatch, tmp_path):
    first = TallyboardLogger(table=table, experiment_name="env")
    first.write_result()
    monkeypatch.setenv("TALLYBOARD_RUN_ID", str(first.version))
    again = TallyboardLogger(table=table, experiment_name="env")
    fit(again, tmp_path, TinyRegression(), enable_checkpointing=False, max_epochs=1)
    again.write_result()
    assert again.version == first.version and table.runs == [first.version]
    monkeypatch.setenv("TALLYBOARD_RUN_ID", "first")
    with pytest.raises(ValueError, match="TALLYBOARD_RUN_ID must be a run id"):
        TallyboardLogger(table=table, experiment_name="env")


def test_version_must_be_a_run_id(table):
    with pytest.raises(TypeError, match="version is the id of the run"):
        TallyboardLogger(table=table, version="version_3")


def test_stop_on_alert_with_the_callback_stops_fit_and_the_run_says_why(table, tmp_path):
    from tallyboard.alerts import Threshold
    from tallyboard.integrations.lightning import StopOnAlert

    rule = Threshold("train/loss", below=1e9, stop=True)  # fires at the first logged loss
    logger = TallyboardLogger(table=table, experiment_name="stopped", rules=[rule], stop_on_alert=True)
    trained = fit(logger, tmp_path, TinyRegression(), callbacks=[StopOnAlert()])
    assert trained.global_step == 2  # of 8: Lightning logs a step's metrics after its batch-end hooks
    alerts = table.alerts(logger.version)
    assert [(a.title, a.stop) for a in alerts] == [
        ("train/loss crossed a threshold", True),
        ("stopped early", False),
    ]
    assert alerts[1].text.startswith("Lightning stopped training")
    logger.write_result()

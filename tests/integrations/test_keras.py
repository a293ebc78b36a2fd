"""TallyboardCallback for Keras 3, on its torch backend (no TensorFlow), logged to both engines."""

import json

import pytest

from integrations.keras_job import DATA, TARGET, fit, model
from tallyboard.integrations.keras import TallyboardCallback
from tallyboard.store import DuplicateRunError


def test_fit_evaluate_predict_log_into_one_run(table, results_of):
    callback = TallyboardCallback(table=table, experiment_name="tiny-keras", comment="keras test")
    tiny = model()
    history = fit(tiny, [callback])
    tiny.evaluate(DATA, TARGET, verbose=0, callbacks=[callback])
    tiny.predict(DATA, verbose=0, callbacks=[callback])
    run_id = callback.writer.run_id
    run = table.load_run(run_id)
    assert run.status == "running"  # neither fit nor evaluate ends the run
    callback.write_result()
    assert table.runs == [run_id] and run.status == "finished"

    loss = run.get_scalar("train/loss")
    assert [(point.step, point.epoch) for point in loss] == [(step, step // 4) for step in range(8)]
    assert loss[-1].value == pytest.approx(history.history["loss"][-1])
    val = run.get_scalar("val/loss")
    assert [(point.step, point.epoch) for point in val] == [(3, 0), (7, 1)]
    assert [point.value for point in val] == pytest.approx(history.history["val_loss"])
    assert [point.step for point in run.get_scalar("test/mae")] == [8]  # evaluate() after fit
    hparams = run.get_hparams()
    assert hparams["epochs"] == 2 and hparams["steps"] == 4 and hparams["optimizer/name"] == "SGD"
    assert results_of(run_id)["test/loss"] == pytest.approx(run.get_scalar("test/loss")[0].value)


def test_a_relaunch_is_a_new_run_and_unique_refuses_a_duplicate_before_any_batch(table):
    first = TallyboardCallback(table=table, experiment_name="sweep")
    fit(model(0.05), [first], epochs=1)
    second = TallyboardCallback(table=table, experiment_name="sweep")
    fit(model(0.01), [second], epochs=1)
    assert second.writer.run_id == first.writer.run_id + 1
    first.write_result()
    second.write_result()

    kept = TallyboardCallback(table=table, experiment_name="unique", unique=True)
    fit(model(), [kept], epochs=1)
    again = TallyboardCallback(table=table, experiment_name="unique", unique=True)
    with pytest.raises(DuplicateRunError):
        fit(model(), [again], epochs=1)
    assert not again._run.started  # refused before a run, and before any batch
    kept.write_result()


def test_resume_with_initial_epoch_continues_the_series(table):
    callback = TallyboardCallback(table=table, experiment_name="resumed")
    fit(model(), [callback], epochs=1)
    run_id = callback.writer.run_id
    callback.writer.close("failed")  # the job died after its first epoch
    again = TallyboardCallback(table=table, experiment_name="resumed", run_id=run_id)
    fit(model(), [again], epochs=2, initial_epoch=1)
    again.write_result()
    run = table.load_run(run_id)
    assert table.runs == [run_id] and run.status == "finished"
    assert [point.step for point in run.get_scalar("train/loss")] == list(range(8))


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # a whole process: the crash matrix
def test_the_process_ending_ends_the_run_failed_inside_fit_finished_after(table, run_job):
    ended = run_job("keras_job.py", table.db_path, json.dumps({"evaluate": True}))
    crashed = run_job("keras_job.py", table.db_path, json.dumps({"fail_in_epoch": 1, "lr": 0.01}))
    assert "caught diverged" in crashed.stdout
    first, second = table.runs
    assert table.load_run(first).status == "finished"
    assert "test/loss" in table.get_results(first).col_ids
    assert table.load_run(second).status == "failed"  # the process ended inside fit
    assert ended.returncode == crashed.returncode == 0


def test_stop_on_alert_stops_fit_and_the_run_says_why(table):
    from tallyboard.alerts import Threshold

    rule = Threshold("train/loss", below=1e9, stop=True)  # fires at the first batch
    callback = TallyboardCallback(table=table, experiment_name="stopped", rules=[rule], stop_on_alert=True)
    fit(model(), [callback])
    run = table.load_run(callback.writer.run_id)
    assert [point.step for point in run.get_scalar("train/loss")] == [0]  # of 8 batches
    alerts = table.alerts(run.run_id)
    assert [(a.title, a.stop) for a in alerts] == [
        ("train/loss crossed a threshold", True),
        ("stopped early", False),
    ]
    assert alerts[1].text.startswith("Keras fit stopped training")
    callback.write_result()

"""TallyboardCallback: a tiny Transformers Trainer run (a model built from a config, no download)."""

import json
import os

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from tallyboard.integrations import transformers as adapter
from tallyboard.integrations.transformers import TallyboardCallback, split_tag, training_hparams
from tallyboard.store import DuplicateRunError


class TokenDataset(torch.utils.data.Dataset):
    """16 short sequences whose label is whether token 1 comes first."""

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.input_ids = torch.randint(1, 30, (16, 6), generator=generator)
        self.labels = (self.input_ids[:, 0] == 1).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index):
        return {
            "input_ids": self.input_ids[index],
            "attention_mask": torch.ones(6, dtype=torch.long),
            "labels": self.labels[index],
        }


def tiny_model():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=32,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def training_arguments(output_dir, **overrides):
    options = {
        "output_dir": str(output_dir),
        "num_train_epochs": 2,
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "eval_strategy": "epoch",
        "save_strategy": "epoch",
        "report_to": [],
        "use_cpu": True,
        "disable_tqdm": True,
        "seed": 7,
    }
    return TrainingArguments(**{**options, **overrides})


def make_trainer(callbacks, output_dir, **overrides):
    return Trainer(
        model=tiny_model(),
        args=training_arguments(output_dir, **overrides),
        train_dataset=TokenDataset(),
        eval_dataset=TokenDataset(),
        callbacks=callbacks,
    )


def train(callback, output_dir, resume_from_checkpoint=None, **overrides):
    trainer = make_trainer([callback], output_dir, **overrides)
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    return trainer


class FailAt(TrainerCallback):
    """Raise at the start of a given step: a crash mid-training."""

    def __init__(self, step):
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise RuntimeError("preempted")


def test_a_tiny_trainer_run_is_logged(table, results_of, tmp_path):
    callback = TallyboardCallback(table=table, experiment_name="tiny-bert", tag="hf")
    trainer = train(callback, tmp_path / "out")
    run_id = callback.writer.run_id
    run = table.load_run(run_id)
    assert run.status == "running"  # the end of train() does not end the run
    callback.write_result()
    assert run.status == "finished"
    assert run.tag == "hf"

    hparams = run.get_hparams()
    assert hparams["learning_rate"] == 1e-3
    assert hparams["per_device_train_batch_size"] == 4
    assert hparams["seed"] == 7
    assert "adam_beta1" not in hparams  # left at its default: not a column
    assert sorted(hparams) == SET_BY_THE_TEST

    # The whole arguments and the model config are the run's config.
    config = json.loads(table.get_config(run_id))
    assert config["training_arguments"]["adam_beta1"] == 0.9
    assert config["training_arguments"]["learning_rate"] == 1e-3
    assert config["model_config"]["hidden_size"] == 8

    loss = run.get_scalar("train/loss")
    assert [point.step for point in loss] == list(range(1, 9))  # 4 steps per epoch, 2 epochs
    assert [point.epoch for point in loss] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [point.value for point in run.get_scalar("train/epoch")][:4] == [0.25, 0.5, 0.75, 1.0]
    eval_loss = run.get_scalar("eval/loss")
    assert [(point.step, point.epoch) for point in eval_loss] == [(4, 0), (8, 1)]
    history = [entry["eval_loss"] for entry in trainer.state.log_history if "eval_loss" in entry]
    assert [point.value for point in eval_loss] == pytest.approx(history)

    checkpoints = run.get_text(tag="checkpoints/latest")
    assert [record["step"] for record in checkpoints] == [4, 8]
    assert all(os.path.isdir(record["fragment"]) for record in checkpoints)
    assert adapter.checkpoint_run(checkpoints[0]["fragment"]) == run_id

    row = results_of(run_id)
    assert row["eval/loss"] == pytest.approx(history[-1])
    assert "train/train_runtime" in row


def test_train_evaluate_predict_log_into_one_run(table, results_of, tmp_path):
    writer = table.new_run("given writer")
    callback = TallyboardCallback(writer)
    trainer = train(callback, tmp_path / "out", save_strategy="no")
    trainer.evaluate(metric_key_prefix="test")
    trainer.predict(TokenDataset(), metric_key_prefix="predict")
    callback.write_result(note_to_self=1)
    assert table.runs == [writer.run_id]
    run = table.load_run(writer.run_id)
    assert run.status == "finished"
    assert [point.step for point in run.get_scalar("test/loss")] == [8]
    assert [point.step for point in run.get_scalar("predict/loss")] == [8]
    row = results_of(writer.run_id)
    assert row["note_to_self"] == 1
    assert row["test/loss"] == pytest.approx(run.get_scalar("test/loss")[0].value)


def test_a_relaunch_is_a_new_run_and_unique_refuses_a_duplicate_before_train(table, tmp_path):
    first = TallyboardCallback(table=table, experiment_name="sweep")
    train(first, tmp_path / "a", save_strategy="no", max_steps=2)
    second = TallyboardCallback(table=table, experiment_name="sweep")
    train(second, tmp_path / "a", save_strategy="no", max_steps=2, learning_rate=1e-2)
    assert second.writer.run_id == first.writer.run_id + 1
    assert table.load_run(second.writer.run_id).get_hparams()["learning_rate"] == 1e-2
    first.write_result()
    second.write_result()

    kept = TallyboardCallback(table=table, experiment_name="unique", unique=True)
    make_trainer([kept], tmp_path / "u", save_strategy="no")
    with pytest.raises(DuplicateRunError):  # from Trainer(...), before any training
        make_trainer([TallyboardCallback(table=table, experiment_name="unique", unique=True)], tmp_path / "u",
                     save_strategy="no")  # fmt: skip
    other = TallyboardCallback(table=table, experiment_name="unique", unique=True)
    make_trainer([other], tmp_path / "u", save_strategy="no", learning_rate=1e-2)
    assert other.writer.run_id == kept.writer.run_id + 1
    kept.write_result()
    other.write_result()


def test_resume_from_a_checkpoint_continues_the_run_with_one_clean_series(table, tmp_path):
    callback = TallyboardCallback(table=table, experiment_name="resumed")
    with pytest.raises(RuntimeError, match="preempted"):  # checkpoint at step 4; steps 5, 6 logged
        trainer = make_trainer([callback, FailAt(6)], tmp_path / "out")
        trainer.train()
    run_id = callback.writer.run_id
    callback.writer.close("failed")

    again = TallyboardCallback(table=table, experiment_name="resumed")
    train(again, tmp_path / "out", resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-4"))
    assert again.writer.run_id == run_id
    again.write_result()
    assert table.runs == [run_id]
    run = table.load_run(run_id)
    assert run.status == "finished"
    assert [point.step for point in run.get_scalar("train/loss")] == list(range(1, 9))


@pytest.mark.filterwarnings("ignore:You have uncommitted changes")  # the table is opened by the callback
def test_report_to_tallyboard_after_register(table, monkeypatch, tmp_path):
    adapter.register()
    monkeypatch.setenv("TALLYBOARD_URL", table.db_path)
    trainer = make_trainer(
        [], tmp_path / "out", report_to="tallyboard", run_name="reported", save_strategy="no"
    )
    [callback] = [c for c in trainer.callback_handler.callbacks if isinstance(c, TallyboardCallback)]
    trainer.train()
    callback.write_result()
    [run_id] = table.runs
    assert table.get_experiment_raw(run_id)["experiment"] == "reported"
    assert len(table.load_run(run_id).get_scalar("train/loss")) == 8


def test_split_tags():
    assert split_tag("loss") == "train/loss"
    assert split_tag("eval_accuracy") == "eval/accuracy"
    assert split_tag("test_f1") == "test/f1"
    assert split_tag("predict_loss") == "predict/loss"
    assert split_tag("evaluation") == "train/evaluation"


# What `training_arguments` sets, but report_to=[], which is what the default 'none' becomes.
SET_BY_THE_TEST = sorted(
    ["output_dir", "num_train_epochs", "per_device_train_batch_size", "learning_rate", "logging_steps",
     "eval_strategy", "save_strategy", "use_cpu", "disable_tqdm", "seed"]
)  # fmt: skip


def test_only_the_arguments_the_user_set_are_hparams(tmp_path):
    """Not the ones __post_init__ fills in (accelerator_config, debug, disable_tqdm, report_to, ...),
    nor those it derives from what was set (use_cpu turns dataloader_pin_memory off,
    load_best_model_at_end sets metric_for_best_model), nor the batch-size properties."""
    assert sorted(training_hparams(training_arguments(tmp_path))) == SET_BY_THE_TEST
    assert training_hparams(TrainingArguments(report_to="none")) == {}
    best = TrainingArguments(
        output_dir=str(tmp_path), load_best_model_at_end=True, eval_strategy="steps", use_cpu=True
    )
    expected = ["eval_strategy", "load_best_model_at_end", "output_dir", "use_cpu"]
    assert sorted(training_hparams(best)) == expected


def test_training_hparams_are_the_changed_arguments(tmp_path):
    hparams = training_hparams(training_arguments(tmp_path, weight_decay=0.1))
    assert hparams["weight_decay"] == 0.1
    assert hparams["num_train_epochs"] == 2
    assert "adam_epsilon" not in hparams
    assert "max_steps" not in hparams  # left at its default


def test_stop_on_alert_stops_the_trainer_and_the_run_says_why(table, tmp_path):
    from tallyboard.alerts import Threshold

    rule = Threshold("train/loss", below=1e9, stop=True)  # fires at the first logged loss
    callback = TallyboardCallback(table=table, experiment_name="stopped", rules=[rule], stop_on_alert=True)
    trainer = train(callback, tmp_path / "out")
    assert trainer.state.global_step == 1  # of 8: stopped at the first log
    alerts = table.alerts(callback.writer.run_id)
    assert [(a.title, a.stop) for a in alerts] == [
        ("train/loss crossed a threshold", True),
        ("stopped early", False),
    ]
    assert alerts[1].text.startswith("the Trainer stopped training: train/loss crossed a threshold")
    callback.write_result()
    watching = TallyboardCallback(table=table, experiment_name="watched", rules=[rule])  # not opted in
    assert train(watching, tmp_path / "out2").state.global_step == 8
    watching.write_result()

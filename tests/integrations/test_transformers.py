"""TallyboardCallback: a tiny Transformers Trainer run (a model built from a config, no download)."""

import os

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from tallyboard.integrations.transformers import TallyboardCallback, split_tag, training_hparams


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


def train(callback, output_dir, **overrides):
    trainer = Trainer(
        model=tiny_model(),
        args=training_arguments(output_dir, **overrides),
        train_dataset=TokenDataset(),
        eval_dataset=TokenDataset(),
        callbacks=[callback],
    )
    trainer.train()
    return trainer


def test_a_tiny_trainer_run_is_logged(table, results_of, tmp_path):
    callback = TallyboardCallback(table=table, experiment_name="tiny-bert", tag="hf")
    trainer = train(callback, tmp_path / "out")
    run_id = callback.writer.run_id
    run = table.load_run(run_id)
    assert run.status == "finished"
    assert run.tag == "hf"

    hparams = run.get_hparams()
    assert hparams["learning_rate"] == 1e-3
    assert hparams["per_device_train_batch_size"] == 4
    assert hparams["seed"] == 7
    assert "adam_beta1" not in hparams  # left at its default: not a column

    loss = run.get_scalar("train/loss")
    assert [point.step for point in loss] == list(range(1, 9))  # 4 steps per epoch, 2 epochs
    assert [point.epoch for point in loss] == [0, 0, 0, 0, 1, 1, 1, 1]
    eval_loss = run.get_scalar("eval/loss")
    assert [(point.step, point.epoch) for point in eval_loss] == [(4, 0), (8, 1)]
    history = [entry["eval_loss"] for entry in trainer.state.log_history if "eval_loss" in entry]
    assert [point.value for point in eval_loss] == pytest.approx(history)

    checkpoints = run.get_text(tag="checkpoints/latest")
    assert [record["step"] for record in checkpoints] == [4, 8]
    assert all(os.path.isdir(record["fragment"]) for record in checkpoints)

    row = results_of(run_id)
    assert row["eval/loss"] == pytest.approx(history[-1])
    assert "train/train_runtime" in row


def test_evaluate_after_training_with_results_written_by_hand(table, results_of, tmp_path):
    writer = table.new_run("given writer")
    callback = TallyboardCallback(writer, write_result_at_end=False)
    trainer = train(callback, tmp_path / "out", save_strategy="no")
    trainer.evaluate(metric_key_prefix="test")
    callback.write_result(note_to_self=1)
    run = table.load_run(writer.run_id)
    assert run.status == "finished"
    assert [point.step for point in run.get_scalar("test/loss")] == [8]
    row = results_of(writer.run_id)
    assert row["note_to_self"] == 1
    assert row["test/loss"] == pytest.approx(run.get_scalar("test/loss")[0].value)


def test_split_tags():
    assert split_tag("loss") == "train/loss"
    assert split_tag("eval_accuracy") == "eval/accuracy"
    assert split_tag("test_f1") == "test/f1"
    assert split_tag("evaluation") == "train/evaluation"


def test_training_hparams_keep_core_and_changed_arguments(tmp_path):
    hparams = training_hparams(training_arguments(tmp_path, weight_decay=0.1))
    assert hparams["weight_decay"] == 0.1
    assert hparams["num_train_epochs"] == 2
    assert "adam_epsilon" not in hparams

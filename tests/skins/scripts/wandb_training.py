"""Softmax regression in numpy, tracked as W&B's users track a run: argparse into the config, a
nested config update, train metrics every batch under a nested dict, validation metrics against
the epoch, a histogram of the weights, a table and an image at the end, a summary value, a file
in the run's folder, an alert, and `finish` (unless --leave-open: the script simply ends).

Usage: wandb_training.py [--lr LR] [--epochs N] [--leave-open]
"""

import argparse
import os

import numpy as np
import wandb

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.5)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--leave-open", action="store_true")
args = parser.parse_args()

run = wandb.init(
    project="blobs",
    name=f"lr-{args.lr}",
    config={"lr": args.lr, "epochs": args.epochs},
    tags=["baseline", "numpy"],
    notes="softmax regression on three blobs",
    group="lr-sweep",
    job_type="train",
)
wandb.config.update({"model": {"kind": "softmax", "classes": 3}})
wandb.define_metric("epoch")
wandb.define_metric("val/*", step_metric="epoch")
wandb.define_metric("val/loss", step_metric="epoch", summary="min")

rng = np.random.default_rng(0)
centres = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.5]])
labels = rng.integers(0, 3, size=160)
points = centres[labels] + rng.normal(scale=0.8, size=(160, 2))
train_x, train_y, val_x, val_y = points[:120], labels[:120], points[120:], labels[120:]
weights = np.zeros((2, 3))


def forward(x, y):
    logits = x @ weights
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    loss = -np.log(probs[np.arange(len(y)), y]).mean()
    return probs, float(loss), float((probs.argmax(axis=1) == y).mean())


best = 0.0
for epoch in range(wandb.config.epochs):
    for batch in range(4):
        x, y = train_x[batch * 30 : (batch + 1) * 30], train_y[batch * 30 : (batch + 1) * 30]
        probs, loss, accuracy = forward(x, y)
        probs[np.arange(len(y)), y] -= 1
        weights -= wandb.config.lr * x.T @ probs / len(y)
        wandb.log({"train": {"loss": loss, "acc": accuracy}})
    _, val_loss, val_acc = forward(val_x, val_y)
    best = max(best, val_acc)
    wandb.log({"val/loss": val_loss, "val/acc": val_acc, "epoch": epoch, "weights": wandb.Histogram(weights)})

probs, _, _ = forward(val_x, val_y)
predicted = probs.argmax(axis=1)
confusion = wandb.Table(columns=["true", "predicted", "count"])
for true in range(3):
    for guess in range(3):
        confusion.add_data(true, guess, int(((val_y == true) & (predicted == guess)).sum()))
noise = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
wandb.log({"confusion": confusion, "inputs": wandb.Image(noise, caption="noise")})
run.summary["best_val_acc"] = best
np.save(os.path.join(wandb.run.dir, "weights.npy"), weights)
if best < 0.99:
    wandb.alert(
        title="below target", text=f"best validation accuracy {best:.2f}", level=wandb.AlertLevel.WARN
    )
print(run.id, run.name, run.url)
if not args.leave_open:
    wandb.finish()

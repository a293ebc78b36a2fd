"""A small linear model fitted by gradient descent and tracked as MLflow's users track one: an
experiment, a named run as a context manager, params, metrics per step, tags, a figure, a dict, a
text, an image, a table, an artefact file, and a nested run for the evaluation.

Usage: mlflow_training.py [--fail]   (--fail: the training raises inside the run)
"""

import json
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import mlflow
import numpy as np

rng = np.random.default_rng(1)
features = rng.normal(size=(200, 3))
target = features @ np.array([1.5, -2.0, 0.5]) + 0.3 + rng.normal(scale=0.1, size=200)
params = {"learning_rate": 0.1, "steps": 25, "features": 3}

mlflow.set_experiment("linear-regression")
with mlflow.start_run(run_name="gd-baseline", description="plain gradient descent") as run:
    mlflow.log_params(params)
    mlflow.set_tags({"stage": "dev", "owner": "tests"})
    weights, bias, losses = np.zeros(3), 0.0, []
    for step in range(params["steps"]):
        error = features @ weights + bias - target
        loss = float((error**2).mean())
        losses.append(loss)
        weights -= params["learning_rate"] * 2 * features.T @ error / len(target)
        bias -= params["learning_rate"] * 2 * error.mean()
        mlflow.log_metric("mse", loss, step=step)
        if "--fail" in sys.argv and step == 10:
            raise FloatingPointError("diverged on purpose")
    mlflow.log_metrics({"final_mse": losses[-1], "bias": bias})
    figure, axes = plt.subplots()
    axes.plot(losses)
    mlflow.log_figure(figure, "loss_curve.png")
    mlflow.log_dict({"weights": weights.tolist(), "bias": bias}, "model/coefficients.json")
    mlflow.log_text("fitted with numpy", "notes.txt")
    mlflow.log_image(rng.integers(0, 255, size=(6, 6, 3)), "residuals.png")
    mlflow.log_table({"feature": ["a", "b", "c"], "weight": weights.tolist()}, "weights.json")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "summary.json")
        with open(path, "w") as file:
            json.dump({"mse": losses[-1]}, file)
        mlflow.log_artifact(path, artifact_path="reports")
    with mlflow.start_run(run_name="evaluation", nested=True):
        mlflow.log_metric("holdout_mse", losses[-1] * 1.05)
    print(run.info.run_id, mlflow.active_run().info.run_name)
print(mlflow.active_run() is None, mlflow.last_active_run().info.status)

"""`tallyboard demo`: a real sweep, logged the way a user would, in well under a minute.

Why real training and not synthetic curves: the demo is the first thing a newcomer runs, and what it
shows must be what their own runs will look like. A small scikit-learn MLP learns the 8x8 digits that
ship inside scikit-learn (nothing is downloaded), over a 3 x 2 sweep of learning rate and hidden
width, each run repeated three times with `new_repetition()`. Every kind of record lands in the
table: per-step and per-epoch scalars for the train and val splits, `Stat` windows of step time
through `tallyboard.monitor`, digit images, a confusion-matrix figure, an HTML report, hparams,
results, one run that diverges and is marked failed, and one debug run.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from tallyboard.run.writer import LogWriter

LEARNING_RATES = (0.01, 0.03, 0.1)
HIDDEN_WIDTHS = (16, 64)
REPETITIONS = 3
EPOCHS = 6
BATCH_SIZE = 64
DIVERGING_LEARNING_RATE = 5.0
DEBUG_HPARAMS = {"lr": 0.03, "hidden_units": 32}
DIVERGED_LOSS = 10.0
EXPERIMENT = "digits-mlp"


@dataclass
class Digits:
    """The digits data split once, so every run of the sweep sees the same train and val sets."""

    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    val_images: np.ndarray  # 8x8 grey levels in [0, 1], for the sample gallery


class DivergedError(RuntimeError):
    """Training stopped because the loss exploded: the run is marked failed, the sweep goes on."""


def load_digits_split(seed: int = 0) -> Digits:
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    cut = int(len(order) * 0.8)
    x = digits.data / 16.0
    return Digits(
        train_x=x[order[:cut]],
        train_y=digits.target[order[:cut]],
        val_x=x[order[cut:]],
        val_y=digits.target[order[cut:]],
        val_images=digits.images[order[cut:]] / 16.0,
    )


def sweep() -> list[dict[str, float | int]]:
    """The grid of hparams, one dict per run."""
    return [{"lr": lr, "hidden_units": hidden} for lr in LEARNING_RATES for hidden in HIDDEN_WIDTHS]


def steps_per_run(data: Digits, epochs: int = EPOCHS) -> int:
    return epochs * -(-len(data.train_y) // BATCH_SIZE)


def sample_grid(images: np.ndarray, correct: np.ndarray, side: int = 4, zoom: int = 6) -> np.ndarray:
    """A `side` x `side` mosaic of val digits; a wrongly predicted digit gets a bright frame."""
    import numpy as np

    cell = 8 * zoom + 2
    grid = np.zeros((side * cell, side * cell), dtype=np.float64)
    for index in range(side * side):
        row, col = divmod(index, side)
        tile = np.kron(images[index], np.ones((zoom, zoom)))
        top, left = row * cell, col * cell
        grid[top : top + cell, left : left + cell] = 0.0 if correct[index] else 1.0
        grid[top + 1 : top + cell - 1, left + 1 : left + cell - 1] = tile
    return grid


def confusion_figure(truth: np.ndarray, predicted: np.ndarray, title: str) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import confusion_matrix

    matrix = confusion_matrix(truth, predicted, labels=list(range(10)))
    figure, axes = plt.subplots(figsize=(4.2, 3.6))
    shown = axes.imshow(matrix, cmap="Blues")
    axes.set(xlabel="predicted", ylabel="true", title=title, xticks=range(10), yticks=range(10))
    figure.colorbar(shown, ax=axes)
    return figure


def report_fragment(truth: np.ndarray, predicted: np.ndarray, hparams: dict[str, Any]) -> str:
    """Per-class precision and recall as an HTML table (shown sandboxed by the dashboard)."""
    from sklearn.metrics import precision_recall_fscore_support

    precision, recall, f1, support = precision_recall_fscore_support(
        truth, predicted, labels=list(range(10)), zero_division=0
    )
    rows = "".join(
        f"<tr><td>{digit}</td><td>{precision[digit]:.3f}</td><td>{recall[digit]:.3f}</td>"
        f"<td>{f1[digit]:.3f}</td><td>{support[digit]}</td></tr>"
        for digit in range(10)
    )
    caption = html.escape(", ".join(f"{key}={value}" for key, value in hparams.items()))
    return (
        f"<table><caption>Validation report ({caption})</caption>"
        "<tr><th>digit</th><th>precision</th><th>recall</th><th>f1</th><th>support</th></tr>"
        f"{rows}</table>"
    )


def make_model(hparams: dict[str, Any], seed: int) -> Any:
    """The classifier of one repetition (bench/demo.py trains the same one without tallyboard)."""
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier(
        hidden_layer_sizes=(hparams["hidden_units"],),
        learning_rate_init=hparams["lr"],
        solver="sgd",
        momentum=0.9,
        random_state=seed,
    )


def batches(data: Digits, rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    order = rng.permutation(len(data.train_y))
    for start in range(0, len(order), BATCH_SIZE):
        chosen = order[start : start + BATCH_SIZE]
        yield data.train_x[chosen], data.train_y[chosen]


def evaluate(model: Any, data: Digits) -> tuple[np.ndarray, float, float]:
    """Predicted val labels, val log-loss and val accuracy."""
    from sklearn.metrics import log_loss

    probabilities = model.predict_proba(data.val_x)
    predicted = probabilities.argmax(axis=1)
    val_loss = float(log_loss(data.val_y, probabilities, labels=list(range(10))))
    return predicted, val_loss, float((predicted == data.val_y).mean())


def train_repetition(
    run: LogWriter,
    data: Digits,
    hparams: dict[str, Any],
    seed: int,
    epochs: int,
    on_step: Callable[[], object],
) -> dict[str, float]:
    """Train one model from scratch and log everything about it; returns its final val metrics."""
    import warnings

    import numpy as np
    from sklearn.exceptions import ConvergenceWarning

    from tallyboard import ResultTableEventHandler, monitor

    model = make_model(hparams, seed)
    classes = np.arange(10)
    rng = np.random.default_rng(seed)
    handle = monitor.register_event_handler(ResultTableEventHandler(run))
    step_time = monitor.Stat(
        "train/step_time_ms", [monitor.Aggregation.MEAN, monitor.Aggregation.MAX], timedelta(milliseconds=25)
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for epoch in range(epochs):
                losses, hits, seen = [], 0, 0
                for batch_x, batch_y in batches(data, rng):
                    started = time.perf_counter()
                    model.partial_fit(batch_x, batch_y, classes=classes)
                    step_time.add((time.perf_counter() - started) * 1000.0)
                    if not np.isfinite(model.loss_) or model.loss_ > DIVERGED_LOSS:
                        raise DivergedError(f"loss diverged to {model.loss_:.3g} at epoch {epoch}")
                    batch_hits = int((model.predict(batch_x) == batch_y).sum())
                    run.add_scalar("train/batch_loss", model.loss_, epoch=epoch)
                    run.add_scalar("train/batch_accuracy", batch_hits / len(batch_y), epoch=epoch)
                    losses.append(model.loss_ * len(batch_y))
                    hits, seen = hits + batch_hits, seen + len(batch_y)
                    on_step()
                predicted, val_loss, val_accuracy = evaluate(model, data)
                run.add_scalar("train/loss", sum(losses) / seen, step=epoch, epoch=epoch)
                run.add_scalar("train/accuracy", hits / seen, step=epoch, epoch=epoch)
                run.add_scalar("val/loss", val_loss, step=epoch, epoch=epoch)
                run.add_scalar("val/accuracy", val_accuracy, step=epoch, epoch=epoch)
                correct = (predicted[:16] == data.val_y[:16]).astype(int)
                run.add_image(
                    sample_grid(data.val_images, correct), step=epoch, tag="val/samples", epoch=epoch
                )
    finally:
        step_time.close()
        monitor.unregister_event_handler(handle)
    confusion_figure(data.val_y, predicted, f"lr={hparams['lr']} hidden units={hparams['hidden_units']}")
    run.detect_and_log_figures(step=epochs - 1, tag="val/confusion", epoch=epochs - 1, close_figs=True)
    run.add_fragment(report_fragment(data.val_y, predicted, hparams), step=epochs - 1, tag="val/report")
    return {"val_accuracy": val_accuracy, "val_loss": val_loss}


def run_demo(
    db: str | Path,
    epochs: int = EPOCHS,
    progress: bool = True,
    announce: Callable[[str], None] = print,
) -> list[int]:
    """Log the whole demo sweep into `db`; returns the ids of the runs it created.

    Each call tags its runs with its own sweep time, so running the demo twice on the same file adds a
    second sweep instead of tripping the table's uniqueness check.
    """

    from tallyboard import NoCommitAction, ResultTable
    from tallyboard.progress import progress_bar

    data = load_digits_split()
    table = ResultTable(str(db), nocommit_action=NoCommitAction.NOP)
    announce(
        f"training {len(sweep())} configurations x {REPETITIONS} repetitions, one run that diverges and"
        f" one debug run, {epochs} epoch{'' if epochs == 1 else 's'} each, into {db}"
    )
    sweep_id = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    grid = sweep()
    total = len(grid) * REPETITIONS * steps_per_run(data, epochs) + steps_per_run(data, 1)
    run_ids: list[int] = []
    finished: list[tuple[int, dict[str, Any], float]] = []  # reported once the bar is gone
    try:
        with progress_bar(total, "demo sweep", enabled=progress, unit="step") as bar:
            for hparams in grid:
                run_id, accuracy = _sweep_run(table, data, hparams, sweep_id, epochs, bar.update)
                run_ids.append(run_id)
                finished.append((run_id, hparams, accuracy))
            failed_id, failure = _diverging_run(table, data, sweep_id, epochs)
            run_ids.append(failed_id)
            debug = table.new_debug_run(EXPERIMENT, cli=dict(DEBUG_HPARAMS), comment="debug: one epoch")
            debug.add_hparams(DEBUG_HPARAMS)
            debug.write_result(**train_repetition(debug, data, DEBUG_HPARAMS, 0, 1, bar.update))
            run_ids.append(debug.run_id)
    finally:
        table.close()
    for run_id, hparams, accuracy in finished:
        settings = ", ".join(f"{name}={value}" for name, value in hparams.items())
        announce(f"run {run_id} ({settings}): val accuracy {accuracy:.3f}")
    announce(f"run {failed_id} failed on purpose ({failure}); run -1 is the debug run")
    return run_ids


def _sweep_run(
    table: Any,
    data: Digits,
    hparams: dict[str, Any],
    sweep_id: str,
    epochs: int,
    on_step: Callable[[], object],
) -> tuple[int, float]:
    """One point of the grid, trained `REPETITIONS` times; its results aggregate the repetitions.
    Returns its run id and mean val accuracy."""
    import numpy as np

    run = table.new_run(EXPERIMENT, cli=dict(hparams), comment=f"demo sweep {sweep_id}", tag="sweep")
    run.add_hparams(hparams, batch_size=BATCH_SIZE, epochs=epochs)
    run.add_text(f"MLPClassifier(hidden_layer_sizes=({hparams['hidden_units']},), solver='sgd')", tag="model")
    finals = []
    for repetition in range(REPETITIONS):
        if repetition:
            run.new_repetition()
        finals.append(train_repetition(run, data, hparams, repetition, epochs, on_step))
    accuracies = [final["val_accuracy"] for final in finals]
    mean_accuracy = float(np.mean(accuracies))
    run.write_result(
        val_accuracy=mean_accuracy,
        val_accuracy_std=float(np.std(accuracies)),
        val_loss=float(np.mean([final["val_loss"] for final in finals])),
    )
    return run.run_id, mean_accuracy


def _diverging_run(table: Any, data: Digits, sweep_id: str, epochs: int) -> tuple[int, str]:
    """A learning rate far too large: the loss explodes and training stops with an exception, which
    leaving the run's `with` block records by marking the run failed. Returns its id and the error."""
    hparams = {"lr": DIVERGING_LEARNING_RATE, "hidden_units": 64}
    try:
        with table.new_run(
            EXPERIMENT, cli=dict(hparams), comment=f"demo sweep {sweep_id}", tag="diverges"
        ) as run:
            run.add_hparams(hparams, batch_size=BATCH_SIZE, epochs=epochs)
            run.set_note("fails on purpose: the learning rate is far too large")
            try:
                train_repetition(run, data, hparams, 0, epochs, lambda: None)
            except DivergedError as error:
                run.add_text(f"training stopped: {error}", tag="error")
                raise
    except DivergedError as error:
        return run.run_id, str(error)
    raise AssertionError("the diverging run did not diverge")

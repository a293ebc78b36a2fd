"""`from tallyboard.tensorboard import SummaryWriter`: torch.utils.tensorboard's writer, logging into
a result table instead of event files (docs/coming-from.md).

The same signature and argument order as torch's (`add_scalar(tag, scalar_value, global_step,
walltime)`, `add_image(tag, img_tensor, global_step, walltime, dataformats)`...), over a
`LogWriter`: the same bounded queue, the same checks at the call, the same dashboard. Where the
two differ, on purpose:
- a writer is a run: `log_dir` 'runs/exp1' is run 'exp1' of the experiment 'runs' (its parent
  folder's name), and no event file is written. Without `log_dir`, torch's name for it
  ('runs/<date>_<host><comment>') is used the same way;
- `global_step` None counts the tag's calls (torch writes step 0 for all of them); a scalar's
  `walltime` is kept (as seconds since the run started), other records take the time of the call;
- `add_scalars(main, {"train": a, "val": b})` logs 'train/main' and 'val/main': one run, one chart
  with a series per key (torch writes a run directory per key);
- histograms are equal-width buckets (`bins` an int, else 64; torch's 'tensorflow' buckets are
  exponential); `add_hparams`' metrics are the run's results;
- `add_pr_curve` is stored as a table of (threshold, precision, recall) and `add_embedding` as a
  table of its vectors and metadata (`ResultTable.logged_table`); what the store cannot hold
  (graphs, audio, video, meshes, custom scalar layouts, boxes) is counted and warned about once
  (skins/not_stored.py).
"""

from __future__ import annotations

import builtins
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tallyboard.histogram import check_bins, from_buckets
from tallyboard.skins import images
from tallyboard.skins.launch import launch
from tallyboard.skins.names import scalar
from tallyboard.skins.not_stored import NotStored, not_stored_method

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["SummaryWriter"]

DEFAULT_BINS = 64


def run_names(log_dir: str | os.PathLike[str] | None, comment: str) -> tuple[str, str]:
    """(experiment, run name) of a writer: the log directory's parent folder and its own name."""
    if log_dir is None:
        stamp = datetime.now().strftime("%b%d_%H-%M-%S")
        log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
    path = Path(os.fspath(log_dir)).resolve()
    return (path.parent.name or path.name), path.name


class SummaryWriter:
    """torch.utils.tensorboard.SummaryWriter's API over one run. `table` (ours, keyword only): a
    path, URL or open `ResultTable`; default $TALLYBOARD_URL, else results.db here. `purge_step`,
    `max_queue`, `flush_secs` and `filename_suffix` are accepted and have nothing to do: records
    are committed in the background within a bounded time anyway."""

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
        *,
        table: Any = None,
    ) -> None:
        experiment, name = run_names(log_dir, comment)
        self.log_dir = os.fspath(log_dir) if log_dir is not None else os.path.join("runs", name)
        self._run = launch(table, experiment, comment=name)
        self._not_stored = NotStored("tensorboard")
        self._writer = self._run.writer
        self._started = self._run.started
        self._writer.before_end(lambda: self._not_stored.report_to(self._writer))

    @property
    def run(self) -> Any:
        """The `LogWriter` of this writer's run (`run.run_id`, `run.get_scalar(...)`)."""
        return self._writer

    def get_logdir(self) -> str:
        return self.log_dir

    # ---- scalars ------------------------------------------------------------------------------------
    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        """Log one value (a number, numpy scalar or one-element tensor) of `tag`."""
        if (
            walltime is not None
        ):  # seconds since the epoch, as torch takes them; the run's are since its start
            walltime -= self._started
        self._writer.add_scalar(tag, scalar_value, global_step, walltime=walltime)

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: Mapping[str, Any],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Log several series of one chart: key 'train' of `main_tag` 'loss' is 'train/loss' (a
        '/' in a key becomes '_', so that the key stays the split)."""
        for key, value in tag_scalar_dict.items():
            self.add_scalar(f"{key.replace('/', '_')}/{main_tag}", value, global_step, walltime)

    # ---- histograms -------------------------------------------------------------------------------
    def add_histogram(
        self,
        tag: str,
        values: Any,
        global_step: int | None = None,
        bins: Any = "tensorflow",
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None:
        """The histogram of `values`: `bins` equal buckets when an int, else 64."""
        count = check_bins(bins) if isinstance(bins, int) and not isinstance(bins, bool) else DEFAULT_BINS
        self._writer.add_histogram(tag, values, global_step, bins=count)

    def add_histogram_raw(
        self,
        tag: str,
        min: float,
        max: float,
        num: int,
        sum: float,
        sum_squares: float,
        bucket_limits: Sequence[float],
        bucket_counts: Sequence[float],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """A histogram counted elsewhere: buckets by their right limits, as TensorBoard keeps them."""
        limits = [float(limit) for limit in bucket_limits]
        if not limits:
            raise ValueError("add_histogram_raw needs at least one bucket limit")
        edges = [builtins.min(float(min), limits[0]), *limits]
        shape = from_buckets(edges, bucket_counts)
        exact = replace(shape, count=int(num), minimum=float(min), maximum=float(max))
        exact = replace(exact, total=float(sum), total_squares=float(sum_squares))
        self._writer.add_histogram(tag, exact, global_step)

    # ---- images and figures ---------------------------------------------------------------------------
    def add_image(
        self,
        tag: str,
        img_tensor: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "CHW",
    ) -> None:
        """An image given as a tensor or array whose axes `dataformats` names; floats are scaled by
        255 and clipped, as torch does."""
        array = images.in_layout(img_tensor, dataformats)
        if array.ndim == 4:
            array = images.grid(array)
        self._writer.add_image(images.scaled_like_torch(array), global_step, tag=tag)

    def add_images(
        self,
        tag: str,
        img_tensor: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "NCHW",
    ) -> None:
        """A batch of images, logged as one grid of up to 8 a row (torch's layout)."""
        self.add_image(tag, img_tensor, global_step, walltime, dataformats)

    def add_image_with_boxes(
        self,
        tag: str,
        img_tensor: Any,
        box_tensor: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        rescale: int = 1,
        dataformats: str = "CHW",
        labels: Any = None,
    ) -> None:
        """The image, without its boxes (counted as not stored)."""
        self._not_stored.skip("the boxes of add_image_with_boxes", "the image is stored without them")
        self.add_image(tag, img_tensor, global_step, walltime, dataformats)

    def add_figure(
        self,
        tag: str,
        figure: Any,
        global_step: int | None = None,
        close: bool = True,
        walltime: float | None = None,
    ) -> None:
        """A matplotlib figure (or a list of them, each logged at the step), closed after unless
        `close=False`."""
        for one in figure if isinstance(figure, (list, tuple)) else [figure]:
            self._writer.add_figure(one, global_step, tag=tag, close=close)

    # ---- text, hparams, tables ------------------------------------------------------------------------
    def add_text(
        self, tag: str, text_string: str, global_step: int | None = None, walltime: float | None = None
    ) -> None:
        """Text, shown as Markdown (TensorBoard renders it so too)."""
        self._writer.add_text(text_string, global_step, tag=tag, markdown=True)

    def add_hparams(
        self,
        hparam_dict: Mapping[str, Any],
        metric_dict: Mapping[str, Any],
        hparam_domain_discrete: Mapping[str, Sequence[Any]] | None = None,
        run_name: str | None = None,
        global_step: int | None = None,
    ) -> None:
        """The run's hparams, and `metric_dict` as its results (shown in the runs table at once)."""
        if not isinstance(hparam_dict, Mapping) or not isinstance(metric_dict, Mapping):
            raise TypeError("add_hparams takes two dicts: hparam_dict and metric_dict")
        self._writer.add_hparams({name: scalar(value) for name, value in hparam_dict.items()})
        self._writer.update_results(**{name: scalar(value) for name, value in metric_dict.items()})

    def add_pr_curve(
        self,
        tag: str,
        labels: Any,
        predictions: Any,
        global_step: int | None = None,
        num_thresholds: int = 127,
        weights: Any = None,
        walltime: float | None = None,
    ) -> None:
        """Precision and recall at `num_thresholds` thresholds from 0 to 1, stored as a table."""
        import numpy as np

        truth = images.as_array(labels).astype(bool).ravel()
        scores = images.as_array(predictions).astype(np.float64).ravel()
        weight = (
            np.ones_like(scores) if weights is None else images.as_array(weights).astype(np.float64).ravel()
        )
        thresholds = np.linspace(0.0, 1.0, int(num_thresholds))
        chosen = scores[np.newaxis, :] >= thresholds[:, np.newaxis]
        true_pos = (chosen * (weight * truth)).sum(axis=1)
        false_pos = (chosen * (weight * ~truth)).sum(axis=1)
        positives = (weight * truth).sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(true_pos + false_pos > 0, true_pos / (true_pos + false_pos), 1.0)
            recall = np.where(positives > 0, true_pos / positives, 0.0)
        rows = zip(thresholds.tolist(), precision.tolist(), recall.tolist(), strict=True)
        self._writer.add_table(["threshold", "precision", "recall"], rows, global_step, tag=tag)

    def add_embedding(
        self,
        mat: Any,
        metadata: Sequence[Any] | None = None,
        label_img: Any = None,
        global_step: int | None = None,
        tag: str = "default",
        metadata_header: Sequence[str] | None = None,
    ) -> None:
        """The vectors (one row each, columns x0, x1...) and their metadata, stored as a table; the
        projector's sprite (`label_img`) is not stored."""
        vectors = images.as_array(mat)
        if vectors.ndim != 2:
            raise ValueError(
                f"add_embedding takes a 2-D matrix (points x dimensions), got shape {vectors.shape}"
            )
        if label_img is not None:
            self._not_stored.skip("the label images of add_embedding", "the vectors are stored")
        meta = [list(row) if isinstance(row, (list, tuple)) else [row] for row in (metadata or [])]
        header = list(metadata_header or (["label"] if meta and len(meta[0]) == 1 else []))
        if meta and (len(meta) != len(vectors) or any(len(row) != len(header) for row in meta)):
            raise ValueError("add_embedding: one metadata row per vector, as wide as metadata_header")
        columns = [*header, *(f"x{i}" for i in range(vectors.shape[1]))]
        rows = ([*(meta[i] if meta else []), *vector] for i, vector in enumerate(vectors.tolist()))
        self._writer.add_table(columns, rows, global_step, tag=tag)

    # ---- what the table holds no kind for: counted, warned about once -----------------------------
    add_graph = not_stored_method("tensorboard", "add_graph", "a model graph")
    add_onnx_graph = not_stored_method("tensorboard", "add_onnx_graph", "a model graph")
    add_audio = not_stored_method("tensorboard", "add_audio", "audio")
    add_video = not_stored_method("tensorboard", "add_video", "video")
    add_mesh = not_stored_method("tensorboard", "add_mesh", "a 3D mesh")
    add_custom_scalars = not_stored_method("tensorboard", "add_custom_scalars", "a TensorBoard layout")
    add_custom_scalars_multilinechart = not_stored_method(
        "tensorboard", "add_custom_scalars_multilinechart", "a TensorBoard layout"
    )
    add_custom_scalars_marginchart = not_stored_method(
        "tensorboard", "add_custom_scalars_marginchart", "a TensorBoard layout"
    )

    # ---- the run's end -----------------------------------------------------------------------------------
    def flush(self) -> None:
        """Return once everything logged so far is in the table."""
        self._writer.flush()

    def close(self) -> None:
        """End the run as finished (a second close does nothing)."""
        self._writer.close()
        self._run.close_table()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._writer.__exit__(exc_type, exc, tb)  # an exception passing fails the run and is kept
        self._run.close_table()

"""W&B's data types (`wandb.Image`, `wandb.Histogram`, `wandb.Table`, `wandb.Html`, `wandb.Artifact`)
as values `wandb.log` hands to a `LogWriter`, converted and checked when they are made (W&B converts
there too), so a bad image fails at the line that made it.

Audio, video, 3D objects, molecules and plots have no kind in the table: they are accepted and
counted as not stored when logged (`NotStoredMedia`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from tallyboard.histogram import Histogram as Summary
from tallyboard.histogram import check_bins, from_buckets, summarise
from tallyboard.skins import images


class Image:
    """An image: a numpy array (HWC, or CHW when its shape says so), a torch tensor (CHW; a batch
    becomes a grid), a PIL image, a matplotlib figure or a file path. Floats in [0, 1] or [-1, 1] are
    stretched to [0, 255] (`normalize`). The caption is kept on the object, not in the table."""

    def __init__(
        self,
        data_or_path: Any,
        mode: str | None = None,
        caption: str | None = None,
        grouping: int | None = None,
        classes: Any = None,
        boxes: Any = None,
        masks: Any = None,
        file_type: str | None = None,
        normalize: bool = True,
    ) -> None:
        from tallyboard import media

        self.caption = caption
        self.overlays = boxes is not None or masks is not None  # counted as not stored when logged
        if isinstance(data_or_path, (str, os.PathLike)):
            self.png, self.width, self.height = media.to_png(Path(data_or_path).read_bytes())
        elif type(data_or_path).__module__.split(".")[0] in ("numpy", "torch"):
            array = images.as_array(data_or_path)
            if array.ndim == 4:  # a batch, channels first as torch has it
                array = images.grid(images.in_layout(array, "NCHW"))
            elif array.ndim == 3 and type(data_or_path).__module__.startswith("torch"):
                array = images.in_layout(array, "CHW")  # a tensor is channels first
            array = images.channels_last(array)
            self.png, self.width, self.height = media.to_png(
                images.scaled_like_wandb(array) if normalize else array
            )
        else:
            self.png, self.width, self.height = media.to_png(data_or_path)


class Histogram:
    """A histogram of `sequence` (`num_bins` equal buckets), or of `np_histogram`, numpy's
    `(counts, edges)` pair, as it is."""

    def __init__(self, sequence: Any = None, np_histogram: Any = None, num_bins: int = 64) -> None:
        if np_histogram is not None:
            counts, edges = np_histogram
            self.histogram: Summary = from_buckets(edges, counts)
        elif sequence is not None:
            self.histogram = summarise(sequence, check_bins(num_bins))
        else:
            raise ValueError("wandb.Histogram needs a sequence or an np_histogram")


class Table:
    """Named columns and rows of cells; logged, it is one table of the run
    (`ResultTable.logged_table(run_id, key)` returns it as a DataFrame). Cells are numbers, strings,
    bools or None; an image in a cell is stored as None (counted as not stored)."""

    def __init__(
        self,
        columns: Sequence[str] | None = None,
        data: Sequence[Sequence[Any]] | None = None,
        rows: Sequence[Sequence[Any]] | None = None,
        dataframe: Any = None,
        dtype: Any = None,
        optional: Any = True,
        allow_mixed_types: bool = False,
        log_mode: str | None = None,
    ) -> None:
        if dataframe is not None:
            self.columns = [str(name) for name in dataframe.columns]
            self.data = [list(row) for row in dataframe.itertuples(index=False, name=None)]
            return
        self.data = [list(row) for row in (data if data is not None else rows or [])]
        width = len(self.data[0]) if self.data else 0
        self.columns = list(columns) if columns is not None else [f"column_{i}" for i in range(width)]

    def add_data(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"this table has {len(self.columns)} columns, the row has {len(cells)} cells")
        self.data.append(list(cells))

    def add_column(self, name: str, data: Sequence[Any], optional: bool = False) -> None:
        if self.data and len(data) != len(self.data):
            raise ValueError(f"the column has {len(data)} cells for {len(self.data)} rows")
        self.columns.append(name)
        if not self.data:
            self.data = [[] for _ in data]
        for row, cell in zip(self.data, data, strict=True):
            row.append(cell)

    def get_column(self, name: str, convert_to: str | None = None) -> list[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.data]

    def stored_rows(self) -> tuple[list[list[Any]], int]:
        """The rows as the table stores them, each W&B media object in a cell (an image...) as
        None, and how many there were."""
        media = (Image, Histogram, Table, Html, NotStoredMedia)
        rows = [[None if isinstance(cell, media) else cell for cell in row] for row in self.data]
        return rows, sum(isinstance(cell, media) for row in self.data for cell in row)


class Html:
    """An HTML fragment (a string or an open file), shown in the run's sandboxed Fragments tab."""

    def __init__(self, data: str | IO[str], inject: bool = True, data_is_not_path: bool = False) -> None:
        self.html = data if isinstance(data, str) else data.read()


class NotStoredMedia:
    """W&B media the table has no kind for (audio, video, 3D, molecules, plots): accepted, and
    counted as not stored when logged."""

    kind = "media"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


def not_stored_media(name: str) -> type[NotStoredMedia]:
    return type(name, (NotStoredMedia,), {"kind": f"wandb.{name}", "__doc__": NotStoredMedia.__doc__})


class Artifact:
    """Files to keep with the run, under the artefact's name (`run.log_artifact(artifact)`): each
    one is stored as '<name>/<file>' with the artefact's type as its kind."""

    def __init__(
        self, name: str, type: str, description: str | None = None, metadata: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:  # fmt: skip
        self.name, self.type, self.description, self.metadata = name, type, description, metadata or {}
        self.files: dict[str, Path] = {}  # name in the artefact -> file on disk
        self._scratch: str | None = None  # the folder of new_file()s, removed by `discard_new_files`

    def add_file(self, local_path: str | os.PathLike[str], name: str | None = None, **options: Any) -> None:
        path = Path(local_path)
        if not path.is_file():
            raise FileNotFoundError(f"no file at {os.fspath(local_path)!r}")
        self.files[name or path.name] = path

    def add_dir(self, local_path: str | os.PathLike[str], name: str | None = None, **options: Any) -> None:
        root = Path(local_path)
        if not root.is_dir():
            raise NotADirectoryError(f"no folder at {os.fspath(local_path)!r}")
        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            inside = file.relative_to(root).as_posix()
            self.files[f"{name}/{inside}" if name else inside] = file

    @contextlib.contextmanager
    def new_file(self, name: str, mode: str = "x", encoding: str | None = None) -> Iterator[IO[Any]]:
        """A file written inside the artefact (kept in a folder of its own until the run ends)."""
        if self._scratch is None:
            self._scratch = tempfile.mkdtemp(prefix="tallyboard-artifact-")
        path = Path(self._scratch) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open(mode, encoding=encoding if "b" not in mode else None) as file:
            yield file
        self.files[name] = path

    def discard_new_files(self) -> None:
        """Remove the files `new_file` wrote, once they are kept with the run."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

"""What a `LogWriter` logs besides scalars: images, figures, texts, fragments, tables, histograms,
console lines, the environment, and files kept with the run (artefacts).

Kept apart from writer.py, which holds the hot path (`add_scalar`), the run's row and its end:
these calls are rare (an image per epoch, not per step), so each converts and validates fully in
the caller's thread (PNG encoding, histogram summaries) and hands the sink one named record.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tallyboard.run.view import RunView
from tallyboard.store.records import QueuedEnvironment, QueuedLine, QueuedMedia, QueuedText
from tallyboard.values import check_key, check_text, to_int

if TYPE_CHECKING:
    from tallyboard.run.sink import NullSink, Sink
    from tallyboard.store import Store

_clock = time.perf_counter
CONSOLE_STREAMS = ("stdout", "stderr", "log")


def _record_tag(kind: str, tag: str | None) -> str:
    """The tag of an image, figure, text or fragment: None (no tag) is stored as ''."""
    if tag is None or (isinstance(tag, str) and not tag):
        return ""
    return check_key(f"{kind} tag", tag)


class RecordLogging(RunView):
    """The logging calls of `LogWriter` other than scalars, hparams and results (mixed into it)."""

    if TYPE_CHECKING:  # what `LogWriter` sets
        _sink: Sink | NullSink
        _rep: int
        _rep_start: float
        _tracker: Any
        _uploader: Any
        _artifact_location: str | None

        def flush(self) -> None: ...
        def _furthest_step(self) -> int: ...
        def _row_store(self) -> Store: ...

    # ---- artefacts -------------------------------------------------------------------------------
    def _position(self, step: int | None, epoch: int | None) -> tuple[int, int | None, float]:
        """Step (default: the furthest scalar step of this repetition), epoch and walltime of a record."""
        if step is None:
            step = self._furthest_step()
        step = to_int("step", step)
        return step, None if epoch is None else to_int("epoch", epoch), _clock() - self._rep_start

    def _put_media(
        self,
        kind: str,
        png: bytes,
        width: int,
        height: int,
        step: int | None,
        tag: str | None,
        epoch: int | None,
        flush: bool,
    ) -> None:
        tag = _record_tag(kind, tag)
        step, epoch, walltime = self._position(step, epoch)
        row = QueuedMedia(self._run_id, tag, self._rep, step, epoch, walltime, kind, width, height, png)
        self._sink.put("media", row)
        if flush:
            self.flush()

    def add_image(
        self,
        image: Any,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
    ) -> None:
        """Log an image (PIL image, PNG/JPEG bytes, numpy HW/HWC array, torch CHW tensor) as PNG."""
        if self._read_only:
            return self._refuse()
        from tallyboard import media

        png, width, height = media.to_png(image)
        self._put_media("image", png, width, height, step, tag, epoch, flush)
        return None

    def detect_and_log_figures(
        self,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
        close_figs: bool = False,
    ) -> None:
        """Log the open pyplot figures that are new or changed since they were last logged."""
        if self._read_only:
            return self._refuse()
        for figure in self._log_figures(step, tag, epoch):
            if close_figs:
                import matplotlib.pyplot as plt

                plt.close(figure)
        if flush:
            self.flush()
        return None

    def _log_figures(
        self, step: int | None = None, tag: str | None = None, epoch: int | None = None
    ) -> list[Any]:
        """Queue the changed figures (also the auto_log_plt hook, called just before plt.show())."""
        if self._read_only:
            return []
        if self._tracker is None:
            from tallyboard import media

            self._tracker = media.FigureTracker()
        changed = self._tracker.changed_figures()
        for _figure, png, width, height in changed:
            self._put_media("figure", png, width, height, step, tag, epoch, False)
        return [figure for figure, _, _, _ in changed]

    def add_figure(
        self,
        figure: Any,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
        close: bool = False,
    ) -> None:
        """Log this matplotlib figure (a figure, where `add_image` of it is an image: the dashboard's
        Figures tab), rendered to PNG here without touching pyplot's state; `close` closes it after."""
        if self._read_only:
            return self._refuse()
        from tallyboard import media

        if not media.is_figure(figure):
            raise TypeError(f"add_figure takes a matplotlib figure, got {type(figure).__name__}")
        png, width, height = media.figure_to_png(figure)
        self._put_media("figure", png, width, height, step, tag, epoch, flush)
        if close:
            import matplotlib.pyplot as plt

            plt.close(figure)
        return None

    def _put_text(
        self,
        kind: str,
        content: Any,
        step: int | None,
        tag: str | None,
        epoch: int | None,
        flush: bool,
        markdown: bool = False,
    ) -> None:
        if self._read_only:
            return self._refuse()
        check_text(f"{kind} content", content)
        if not isinstance(markdown, bool):
            raise TypeError(f"markdown must be True or False, got {markdown!r}")
        tag = _record_tag(kind, tag)
        step, epoch, walltime = self._position(step, epoch)
        row = QueuedText(self._run_id, tag, self._rep, step, epoch, walltime, kind, content, int(markdown))
        self._sink.put("texts", row)
        if flush:
            self.flush()
        return None

    def add_text(
        self,
        text: str,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
        markdown: bool = False,
    ) -> None:
        """Log text, stored verbatim: shown escaped, or with `markdown=True` rendered as Markdown
        and then sanitised (no raw HTML, no scripts, no `javascript:` links; docs/dashboard.md)."""
        return self._put_text("text", text, step, tag, epoch, flush, markdown)

    def add_fragment(
        self,
        content: str,
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
    ) -> None:
        """Log an HTML fragment, stored verbatim (shown in a sandboxed frame)."""
        return self._put_text("fragment", content, step, tag, epoch, flush)

    def add_table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        step: int | None = None,
        tag: str | None = None,
        epoch: int | None = None,
        flush: bool = False,
    ) -> None:
        """Log a table: named columns and rows of numbers, strings, bools or None (numpy scalars
        taken as numbers). Checked here (every row as long as `columns`, names distinct), stored as
        one record that `ResultTable.logged_table` returns as a DataFrame (store/table_content.py)."""
        if self._read_only:
            return self._refuse()
        from tallyboard.store.table_content import encode

        content = encode(columns, rows)
        return self._put_text("table", content, step, tag, epoch, flush)

    def add_histogram(
        self,
        tag: str,
        values: Any,
        step: int | None = None,
        epoch: int | None = None,
        bins: int = 64,
        flush: bool = False,
    ) -> None:
        """Log the histogram of `values` (numpy array, torch tensor on any device, or a sequence of
        numbers): count, min, max, sum, sum of squares and `bins` equal buckets, computed here
        (on the tensor's device) so only the summary is queued. NaN/inf are counted apart and left
        out of the rest (`tallyboard/histogram.py`). A `Histogram` already made (`histogram.
        from_buckets`, for buckets counted elsewhere) is logged as it is."""
        if self._read_only:
            return self._refuse()
        from tallyboard.histogram import Histogram, summarise
        from tallyboard.store.histograms import queued_row

        if not isinstance(tag, str) or not tag:
            raise TypeError(f"histogram tag must be a non-empty string, got {tag!r}")
        check_key("histogram tag", tag)
        histogram = values if isinstance(values, Histogram) else summarise(values, bins)
        step, epoch, walltime = self._position(step, epoch)
        self._sink.put(
            "histograms", queued_row(self._run_id, tag, self._rep, step, epoch, walltime, histogram)
        )
        if flush:
            self.flush()

    # ---- console and environment ---------------------------------------------------------------
    def add_console_line(self, line: str, stream: str = "stdout") -> None:
        """Log one line of console output (what `capture_console=True` does for every line the
        process writes); `stream` is 'stdout', 'stderr' or 'log'."""
        if self._read_only:
            return self._refuse()
        check_text("console line", line)
        if stream not in CONSOLE_STREAMS:
            raise ValueError(f"stream must be one of {CONSOLE_STREAMS}, got {stream!r}")
        self._sink.put(
            "console", QueuedLine(self._run_id, self._rep, _clock() - self._rep_start, stream, line)
        )
        return None

    def record_environment(self, environment: dict[str, Any]) -> None:
        """Store `environment` (environment.capture()) with the run, replacing one stored before."""
        if self._read_only:
            return self._refuse()
        content = json.dumps(environment, sort_keys=True, default=str)
        self._sink.put("environments", QueuedEnvironment(self._run_id, check_text("environment", content)))
        return None

    # ---- files kept with the run (tallyboard/store/artifacts.py) ------------------------------------------
    def log_artifact(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        kind: str = "file",
        step: int | None = None,
    ) -> None:
        """Keep the file at `path` with the run, as `name` (default: its file name; a name logged
        again is replaced). The file is checked here and copied by a background thread, so a 2 GB
        checkpoint does not stall training: leave the file unchanged until `flush()` (or the end of
        the run) returns, which waits for the copies."""
        if self._read_only:
            return self._refuse()
        from tallyboard.store import artifacts

        upload = artifacts.check_upload(self._run_id, path, name, kind, step)
        if self._uploader is None:
            blobs = artifacts.open_blobs(artifacts.require_location(self._artifact_location))
            self._uploader = artifacts.Uploader(blobs, self._row_store().add_artifact)
        self._uploader.submit(upload)
        return None

    def log_artifacts(
        self, folder: str | os.PathLike[str], kind: str = "file", step: int | None = None
    ) -> None:
        """`log_artifact` for every file under `folder`, each named by its path relative to it
        ('sub/file.txt', with forward slashes)."""
        root = Path(folder)
        if not root.is_dir():
            raise NotADirectoryError(f"cannot log the artefacts of {os.fspath(folder)!r}: not a folder")
        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            self.log_artifact(file, file.relative_to(root).as_posix(), kind, step)

    def _wait_for_artifacts(self) -> None:
        if self._uploader is not None:
            self._uploader.wait()

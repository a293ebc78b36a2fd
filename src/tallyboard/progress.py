"""Progress bars for long commands (demo, import, export, copy), on stderr.

tqdm draws them when it is installed (it is in the `all` extra, not a hard dependency). Without it
a plain text bar takes its place, so a long command always shows that it is moving: on a terminal
one line redrawn in place (`\\r`) whenever the percentage changes; in a log file or a pipe, where
`\\r` would pile up, a line at every tenth of the way and a final line. Callers never branch on
which one they got: both count with `update(n)`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, TextIO


class ProgressBar(Protocol):
    def update(self, n: int = 1) -> object: ...


class _Silent:
    def update(self, n: int = 1) -> None:
        """Nothing to draw."""


class TextBar:
    """tqdm's stand-in: `description: done/total unit (percent%)` on `stream`."""

    def __init__(self, total: int | None, description: str, unit: str, stream: TextIO) -> None:
        self.total = total
        self.description = description
        self.unit = unit
        self.count = 0
        self._stream = stream
        self._redraw = stream.isatty()  # a terminal: one line, drawn over in place
        self._shown = -1 if self._redraw else 0  # the percentage (terminal) or tenth last written

    def _percent(self) -> int | None:
        return None if not self.total else min(100, self.count * 100 // self.total)

    def _line(self) -> str:
        percent = self._percent()
        total = "" if self.total is None else f"/{self.total:,}"
        unit = "" if self.unit == "it" else f" {self.unit}{'' if self.count == 1 else 's'}"
        return f"{self.description}: {self.count:,}{total}{unit}" + (
            "" if percent is None else f" ({percent}%)"
        )

    def update(self, n: int = 1) -> None:
        self.count += n
        percent = self._percent()
        if self._redraw:
            if percent is None or percent != self._shown:
                self._shown = -1 if percent is None else percent
                self._stream.write("\r" + self._line())
                self._stream.flush()
        elif percent is not None and self._shown < percent // 10 < 10:
            self._shown = percent // 10
            self._stream.write(self._line() + "\n")
            self._stream.flush()

    def close(self) -> None:
        """The final line: where the count ended, also when the command stopped early."""
        self._stream.write(("\r" if self._redraw else "") + self._line() + "\n")
        self._stream.flush()


@contextmanager
def progress_bar(
    total: int | None,
    description: str,
    enabled: bool = True,
    unit: str = "it",
    stream: TextIO | None = None,
) -> Iterator[ProgressBar]:
    """A bar on `stream` (default stderr) counting up to `total` (None: unknown), closed when the
    block ends."""
    if not enabled:
        yield _Silent()
        return
    stream = sys.stderr if stream is None else stream
    try:
        from tqdm import tqdm
    except ImportError:
        bar = TextBar(total, description, unit, stream)
        try:
            yield bar
        finally:
            bar.close()
        return
    with tqdm(
        total=total, desc=description, unit=unit, dynamic_ncols=True, leave=False, file=stream
    ) as tqdm_bar:
        yield tqdm_bar

"""Progress bars for long commands (demo, import, export), drawn by tqdm when it is installed.

tqdm is in the `all` extra, not a hard dependency: without it (or with `enabled=False`) the same
calls simply do nothing, so callers never branch on whether a bar is shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class ProgressBar(Protocol):
    def update(self, n: int = 1) -> object: ...


class _Silent:
    def update(self, n: int = 1) -> None:
        """Nothing to draw."""


@contextmanager
def progress_bar(
    total: int | None, description: str, enabled: bool = True, unit: str = "it"
) -> Iterator[ProgressBar]:
    """A bar on stderr counting up to `total` (None: unknown), closed when the block ends."""
    if not enabled:
        yield _Silent()
        return
    try:
        from tqdm import tqdm
    except ImportError:
        yield _Silent()
        return
    with tqdm(total=total, desc=description, unit=unit, dynamic_ncols=True, leave=False) as bar:
        yield bar

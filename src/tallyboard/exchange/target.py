"""Opening the tables that exports read and imports write.

An import may be the first thing ever written to a file; the table it creates must behave exactly
like one created by `ResultTable(path)` (same unique columns), so that training runs logged into it
afterwards keep their uniqueness check. A command that only reads must not create anything: opening
a SQLite path that does not exist would silently make an empty table.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tallyboard.store import Store, is_postgres_url, open_store


def require_existing(url_or_path: str | os.PathLike[str]) -> str:
    """`url_or_path` as text, or FileNotFoundError when it names no SQLite file (nothing there, or a
    directory, which says so: a directory is a common slip, e.g. a TensorBoard log folder)."""
    target = os.fspath(url_or_path)
    if not is_postgres_url(target) and not Path(target).is_file():
        if Path(target).is_dir():
            raise FileNotFoundError(f"no result table at {target!r}: it is a directory, not a SQLite file")
        raise FileNotFoundError(f"no result table at {target!r}")
    return target


@contextmanager
def open_target(url_or_path: str | os.PathLike[str], create: bool = True) -> Iterator[Store]:
    """The store at `url_or_path`, closed when the block ends; created (like `ResultTable` would)
    only when `create` is true."""
    from tallyboard.table import DEFAULT_UNIQUE_COLUMNS

    store = open_store(
        url_or_path if create else require_existing(url_or_path), unique_columns=DEFAULT_UNIQUE_COLUMNS
    )
    try:
        yield store
    finally:
        store.close()

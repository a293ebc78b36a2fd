"""Opening the tables that exports read and imports write.

An import may be the first thing ever written to a file; the table it creates must behave exactly
like one created by `ResultTable(path)` (same unique columns), so that training runs logged into it
afterwards keep their uniqueness check. A command that only reads must not create anything: it opens
the table for reading (store/location.py), which never creates, migrates or writes.

Every importer writes runs under ids it chose (a DeepBoard run keeps its id where it is free), so
leaving an import target re-syncs the id sequences: the next `new_run` on PostgreSQL gets a fresh id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tallyboard.store import Access, Store, open_store
from tallyboard.store.location import Location, LocationLike
from tallyboard.store.run_fields import DEFAULT_UNIQUE_COLUMNS


def require_existing(url_or_path: LocationLike) -> Location:
    """The location, or FileNotFoundError when it names no SQLite file (nothing there, or a
    directory, which says so: a directory is a common slip, e.g. a TensorBoard log folder)."""
    location = Location.of(url_or_path)
    target = location.sqlite_path
    if target is not None and not Path(target).is_file():
        if Path(target).is_dir():
            raise FileNotFoundError(
                f"no result table at {target!r}: it is a directory, not a SQLite file (nothing was created)"
            )
        raise FileNotFoundError(
            f"no result table at {target!r}: the file does not exist (nothing was created)"
        )
    return location


@contextmanager
def open_target(url_or_path: LocationLike, create: bool = True) -> Iterator[Store]:
    """The store at `url_or_path`, closed when the block ends: opened to write (created like
    `ResultTable` would where there is none) when `create` is true, else only to read."""
    access = Access.WRITE if create else Access.READ
    store = open_store(url_or_path, unique_columns=DEFAULT_UNIQUE_COLUMNS, access=access)
    try:
        yield store
    except BaseException:
        if create:  # some batches may have landed all the same
            with contextlib.suppress(Exception):
                store.sync_id_sequences()
        raise
    else:
        if create:
            store.sync_id_sequences()  # rows went in under explicit ids: new ids start above them
            store.gather_statistics()  # a bulk import: the planner has none yet
    finally:
        store.close()

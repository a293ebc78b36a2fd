"""Every error a user of tallyboard may want to catch, under one base class.

Why one module: a training script catches `tallyboard.errors.TallyboardError` (or one kind of it)
without knowing which part of the package raised it. Each error also keeps the built-in base its
callers caught before (`RuntimeError`, `ValueError`), so `except ValueError` around a filter still
works. Imports nothing: every layer may raise these.
"""

from __future__ import annotations

__all__ = [
    "ArtifactError",
    "DamagedTableError",
    "DatabaseUnreachable",
    "DatabaseUnwritable",
    "DuplicateRunError",
    "FilterError",
    "NotAResultTable",
    "NotDurableError",
    "NotFoundError",
    "OutsideSourceError",
    "ReadOnlyTableError",
    "ScalarValueError",
    "StoreError",
    "TallyboardError",
]


class TallyboardError(Exception):
    """The base of every error tallyboard raises on purpose."""


class StoreError(TallyboardError):
    """The database cannot be used as a result table (wrong version, bad unique columns, ...)."""


class DatabaseUnreachable(StoreError):
    """The database does not answer now (a server stopped or restarting, a network gone): what
    asked may ask again later, and a reader does so on a new connection."""


class DatabaseUnwritable(StoreError, RuntimeError):
    """The database cannot take writes for a reason that will not go away by waiting (its file
    system turned read-only, its file deleted or replaced, no permission to write): logging calls
    and `close()` raise this instead of waiting for room that never comes. What was committed
    before stays; what was queued since is lost, and the message says how much."""


class DamagedTableError(StoreError):
    """The SQLite file holds pages SQLite cannot read as its own (a disk error, a copy cut short,
    two hosts writing one file over a network file system): refused at open, or named by the
    statement that meets them, rather than written into or answered with a raw library error."""


class ReadOnlyTableError(StoreError):
    """A write through a table opened only to read (`ResultTable(..., read_only=True)`, the reading
    commands): refused before anything reaches the database, so reads never write."""


class NotAResultTable(StoreError, ValueError):
    """The location holds no result table that may be opened this way; nothing was changed."""


class DuplicateRunError(TallyboardError, RuntimeError):
    """A visible, non-failed run with the same unique columns exists already."""

    def __init__(self, run_id: int) -> None:
        super().__init__(
            f"Configuration has already been run with run id {run_id}. Change a unique column "
            "(experiment, config, cli, comment, tag, ...), or hide that run, to run it again."
        )
        self.run_id = run_id


class NotDurableError(TallyboardError, RuntimeError):
    """What was logged is queued in memory but the database did not take it (yet): it will be
    written when the database is back, as long as the process lives."""


class NotFoundError(TallyboardError, KeyError):
    """The table has no run of that id (or no metric, column of that name). A KeyError, as it was,
    so `except KeyError` still catches it; its text is the message alone (a KeyError's is its repr)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ArtifactError(TallyboardError):
    """An artefact cannot be stored or found (no store configured, missing file, unknown name)."""


class OutsideSourceError(TallyboardError, ValueError):
    """An import source names a file outside itself: a path with "..", an absolute path, or a
    symlink that leads out of it (an export's media file, a TensorBoard event file). A source
    someone else made must not make the import read, store and later serve a file of this
    machine, so the whole import is refused before anything is written."""


class FilterError(TallyboardError, ValueError):
    """The filter text is not a valid expression; the message says where."""


class ScalarValueError(TallyboardError, TypeError, ValueError):
    """`add_scalar` was given something it cannot log as a number (a string that is no number, a
    list, a tensor of several values). Both built-ins: tallyboard raised TypeError, DeepBoard's
    `float(value)` a ValueError for a string, so `except TypeError` and `except ValueError` written
    for either one still catch it."""

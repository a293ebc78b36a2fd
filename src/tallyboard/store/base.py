"""`Store`: one result table in one database, what `table`, `writer` and `sink` ask of it.

An engine (store/sqlite.py, store/postgres.py) subclasses `Store` and supplies the primitives of
`Engine` (store/engine.py); the queries come in parts, one module per family of tables:
run_rows.py (runs, tags, hparams, results, columns), writes.py (the sink's batches), logged.py
(reads of logged records, quarantine, artefacts), imported.py (what imports keep besides).
"""

from __future__ import annotations

from abc import ABC

from tallyboard.store.imported import ImportedLogs
from tallyboard.store.logged import LoggedReads
from tallyboard.store.run_rows import RunRows
from tallyboard.store.writes import BatchWrites


class Store(RunRows, BatchWrites, LoggedReads, ImportedLogs, ABC):
    """A result table in one database. Subclasses provide the connection and the primitives."""

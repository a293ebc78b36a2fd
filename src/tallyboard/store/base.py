"""`Store`: one result table in one database, what `table`, `writer` and `sink` ask of it.

An engine (store/sqlite.py, store/postgres.py) subclasses `Store` and supplies the primitives of
`Engine` (store/engine.py). The queries come in parts, one module per family of tables, each part
a subclass of what it uses, so that the base of a class says what `self` is in its module:
- `RunRows` (runs.py: runs, their tags, hparams, results, columns), on `Engine`;
- `BatchWrites` (writes.py: the sink's batches), on `RunRows`: a batch updates runs;
- `ImportedLogs` (imported.py: what imports keep besides), on `BatchWrites`: an import writes its
  records in the transaction of a batch;
- `LoggedReads` (logged.py: reads of logged records, quarantine, artefacts), on `Engine`.
`Store` is `ImportedLogs` and `LoggedReads` together; neither calls a method of the other.
"""

from __future__ import annotations

from abc import ABC
from typing import TYPE_CHECKING

from tallyboard.store.imported import ImportedLogs
from tallyboard.store.logged import LoggedReads

if TYPE_CHECKING:
    from tallyboard.store.dashboard_reads import DashboardQueries


class Store(ImportedLogs, LoggedReads, ABC):
    """A result table in one database. Subclasses provide the connection and the primitives.

    One object per table owns its reads and writes, as Datasette's `Database` does: the writes and
    the reads of the logging path on its own connection, the dashboard's reads (`reads`) on a pool
    of connections that its engine lends."""

    _reads: DashboardQueries | None = None

    @property
    def reads(self) -> DashboardQueries:
        """The dashboard's queries of this table, on a pool of reader connections (made on first use;
        read-only ones when the store was opened to read)."""
        if self._reads is None:
            from tallyboard.store.dashboard_reads import DashboardQueries
            from tallyboard.store.location import Access

            self._reads = DashboardQueries(self, read_only=self.access is Access.READ)
        return self._reads

    def close_reads(self) -> None:
        """Close the reader connections lent so far (engines do it first thing in `close`)."""
        if self._reads is not None:
            self._reads.close()

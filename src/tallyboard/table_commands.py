"""What each `tallyboard` command does, as one method of `ResultTable` (mixed into it).

Why: the CLI is a skin over the library's nouns, as sqlite-utils' is. Every command opens
`ResultTable(path_or_url)` (with `read_only=True` when it only reads) and calls one method here, so
whatever the CLI does is one call from Python too, and the two cannot drift apart. The work stays
where it lives (exchange/ for exports, store/copy.py, artifacts.py, runs_view.py); importers of
other tools are found by name (importers.py), since the core never imports `integrations/`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tallyboard.store.records import ReadOnlyTableError

if TYPE_CHECKING:
    from tallyboard.runs_view import RunsView
    from tallyboard.store import Store
    from tallyboard.store.records import ArtifactRow


class TableCommands:
    """The whole-table operations of `ResultTable`: listing, export, copy, imports, artefacts, migration."""

    db_path: str
    artifacts: str | None  # the table's artefact store (tallyboard/artifacts.py)
    read_only: bool
    spool: str | None
    _store: Store

    def _refuse_if_read_only(self, what: str) -> None:
        """Raise `ReadOnlyTableError` before a write is attempted on a table opened to read."""
        if self.read_only:
            raise ReadOnlyTableError(
                f"cannot {what}: ResultTable({self.db_path!r}) was opened with read_only=True, which "
                "never writes; open it without read_only to change it"
            )

    def _artifacts_or(self, location: str | os.PathLike[str] | None) -> str | None:
        return self.artifacts if location is None else os.fspath(location)

    # ---- reading ----------------------------------------------------------------------------
    def runs_table(self, filter: str | None = None, show_hidden: bool = False) -> RunsView:
        """`tallyboard runs`: every run's fields, tags, hparams and results (`.rows`, JSON-ready) and
        the columns a terminal shows (`.columns`); `filter` is the dashboard's filter language.
        `runs_view.format_runs(view)` is the aligned text table the command prints."""
        from tallyboard.runs_view import load_runs

        return load_runs(self._store, filter, show_hidden)

    def export(
        self,
        out: str | os.PathLike[str],
        format: str = "csv",
        run_ids: Sequence[int] | None = None,
        artifacts: str | os.PathLike[str] | None = None,
        progress: bool = False,
    ) -> dict[str, int]:
        """`tallyboard export`: the table (or the runs `run_ids`) as files in the new directory `out`,
        every point at full resolution, in `format` ('csv', 'parquet' or 'jsonl'); returns the rows
        written per file. Artefacts come from `artifacts`, else the table's artefact store.
        `import_export` reads it back (exchange/export.py describes the layout)."""
        from tallyboard.exchange.export import export_store

        return export_store(self._store, out, format, run_ids, progress, self._artifacts_or(artifacts))

    def copy_to(
        self,
        destination: str | os.PathLike[str],
        artifacts: str | os.PathLike[str] | None = None,
        artifacts_to: str | os.PathLike[str] | None = None,
        progress: bool = False,
    ) -> dict[str, int]:
        """`tallyboard copy`: every row into `destination` (a file or URL, created if missing),
        losslessly; copying twice changes nothing. The artefacts' files go from `artifacts` (else
        the table's store) to `artifacts_to` (else the one next to a SQLite destination). Returns the
        rows copied per table, and the artefact files copied."""
        from tallyboard.artifacts import plan_carry
        from tallyboard.store.copy import copy_table

        target = os.fspath(destination)
        to = None if artifacts_to is None else os.fspath(artifacts_to)
        carry = plan_carry(self.db_path, target, self._artifacts_or(artifacts), to)  # before any row
        counts = copy_table(self.db_path, target, progress=progress)
        if carry is not None:
            counts["artefact files"] = carry.run(progress=progress)
        return counts

    def list_artifacts(self, run_id: int) -> list[ArtifactRow]:
        """`tallyboard artifacts list`: the files kept with run `run_id` (`run.log_artifact`)."""
        return self._store.artifacts(run_id)

    def save_artifact(self, run_id: int, name: str, to: str | os.PathLike[str]) -> ArtifactRow:
        """`tallyboard artifacts get`: save the artefact `name` of run `run_id` as the file `to`
        (checked against its sha256); returns its row. ArtifactError names the run's artefacts
        when it has no such one."""
        from tallyboard import artifacts as files

        row = files.find(self._store, run_id, name)
        files.save_to(files.open_blobs(files.require_location(self.artifacts)), row.sha256, Path(to))
        return row

    # ---- writing ----------------------------------------------------------------------------
    def migrate(self) -> tuple[int | None, int | None]:
        """`tallyboard migrate`: bring a table written by an older tallyboard to this version now
        (the first write does it too); returns the schema versions (before, after)."""
        self._refuse_if_read_only("migrate")
        before = self._store.schema_version
        self._store.ready_for_writing()
        return before, self._store.schema_version

    def _import_target(self, what: str) -> str:
        """Where an import writes: this table's database itself (runs keep the ids the import gives them)."""
        self._refuse_if_read_only(f"import {what}")
        if self.spool is not None:
            raise ValueError(
                f"cannot import {what} through a spool: imports write into the database itself; "
                "open the table without a spool (spool=False) to import"
            )
        return self.db_path

    def import_export(
        self,
        directory: str | os.PathLike[str],
        artifacts: str | os.PathLike[str] | None = None,
        progress: bool = False,
    ) -> str:
        """`tallyboard import tallyboard`: a directory written by `export` back into this table;
        runs already present are skipped. Its artefact files go to `artifacts`, else the table's
        artefact store. Returns a one-line summary."""
        from tallyboard.exchange.reimport import import_export

        into = self._import_target("an export")
        return import_export(directory, into, progress, self._artifacts_or(artifacts))

    def import_from(self, importer: str, source: str | os.PathLike[str], progress: bool = False,
                    **options: Any) -> Any:  # fmt: skip
        """Import `source` with the importer registered under the name `importer` (importers.py: an
        entry point of the `tallyboard.importers` group, ours or another package's), passing it
        `options`; returns what it returns. Importing the same source twice adds nothing."""
        from tallyboard import importers

        into = self._import_target(importer)
        return importers.load(importer)(source, into, progress=progress, **options)

    def import_tensorboard(
        self,
        logdir: str | os.PathLike[str],
        finished_after: float | None = None,
        watch: bool = False,
        on_pass: Callable[[Any], None] | None = None,
        progress: bool = False,
    ) -> Any:
        """`tallyboard import tensorboard`: TensorBoard event files under `logdir`, one run per
        directory; what was imported before is not imported again. A run whose files have not
        changed for `finished_after` seconds (default 600) is finished. Returns the pass's
        `ImportReport` (also given to `on_pass`); with `watch`, passes until interrupted."""
        options = {"finished_after": finished_after, "watch": watch, "on_pass": on_pass}
        return self.import_from("tensorboard", logdir, progress, **options)

    def import_deepboard(self, path: str | os.PathLike[str], progress: bool = False) -> str:
        """`tallyboard import deepboard`: every run of a DeepBoard 0.3 table, with its id where it is
        free; runs already present are skipped. Returns a one-line summary."""
        summary: str = self.import_from("deepboard", path, progress)
        return summary

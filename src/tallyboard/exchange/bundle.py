"""One complete run held in memory, in a shape every importer can fill and any store can take.

Importers (TensorBoard, DeepBoard) read a foreign format into `RunBundle`s; `write_bundle` is the
single place where such a run enters a result table. It goes through the store's own write path
(`create_run` and `write_batch`), not through a `LogWriter`, because an import must keep what a live
writer would overwrite: the original start time, status, git state and wall times.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from tallyboard.store.base import Store
from tallyboard.store.imported import ImportRecords
from tallyboard.store.records import Batch, QueuedMedia, QueuedRepetition, QueuedText, QueuedValue, ScalarRow

ROWS_PER_BATCH = 50_000


@dataclass
class RunBundle:
    """A run and everything logged under it.

    fields: columns of `runs` (experiment and start_time required; see store/schema.py).
    scalars: {tag: [(rep, step, epoch, walltime_s, value or None for NaN)]}.
    media: [(tag, rep, step, epoch, walltime_s, kind, png)] with kind 'image' or 'figure'.
    texts: [(tag, rep, step, epoch, walltime_s, kind, content)] with kind 'text', 'fragment' or 'table'.
    repetitions: {rep: start_time (seconds since the epoch)}.
    Wall times are seconds since the start of the record's repetition, as everywhere in the table.
    """

    fields: dict[str, Any]
    hparams: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    scalars: dict[str, list[ScalarRow]] = field(default_factory=dict)
    media: list[tuple[Any, ...]] = field(default_factory=list)
    texts: list[tuple[Any, ...]] = field(default_factory=list)
    repetitions: dict[int, float] = field(default_factory=dict)

    def record_count(self) -> int:
        return sum(map(len, self.scalars.values())) + len(self.media) + len(self.texts)


def run_identity(fields: Mapping[str, Any]) -> tuple[str, float]:
    """What makes an imported run "the same run" again: its experiment and its start time.

    Importing a source twice finds every run's identity already present and skips it, whatever the
    table's unique columns are; but a run an import left incomplete is imported again
    (`reclaim_incomplete`).
    """
    return (fields["experiment"], round(float(fields["start_time"]), 6))


def identities_in(store: Store) -> set[tuple[str, float]]:
    """The `run_identity` of every run in `store`, hidden ones included."""
    return {run_identity(row._asdict()) for row in store.runs(show_hidden=True)}


def reclaim_incomplete(store: Store, identities: Set[tuple[str, float]]) -> dict[tuple[str, float], int]:
    """Delete the runs that an import left incomplete (it failed part-way, or was killed) and whose
    identity is in `identities`; returns {identity: run id} of those, so that this import writes
    them afresh under the same ids. Deleting rather than topping up: a partial run's records are a
    prefix of what its source holds only if nothing else touched it, and media, texts, histograms
    and console lines have no key that would make writing them twice harmless."""
    incomplete = store.incomplete_imports()
    if not incomplete:
        return {}
    reclaimed = {}
    for row in store.runs(show_hidden=True):
        identity = run_identity(row._asdict())
        if row.run_id in incomplete and identity in identities:
            store.delete_run(row.run_id)
            reclaimed[identity] = row.run_id
    return reclaimed


def select_new_runs(store: Store, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs (dicts of `runs` fields) that are not in `store` yet, with the ids they will get.

    A run an earlier import left incomplete counts as not in `store`: it is deleted here and gets
    its id back. Otherwise a run keeps its id when the store has no run with that id; the others
    get ids after the largest one in use, in order. A debug run (-1) is skipped when the store has
    one already: importing must never overwrite the user's own debug run.
    """
    reclaimed = reclaim_incomplete(store, {run_identity(fields) for fields in runs})
    present = identities_in(store)
    taken = {row.run_id for row in store.runs(show_hidden=True)}
    selected = [
        {**fields, "run_id": reclaimed.get(run_identity(fields), fields.get("run_id"))}
        for fields in runs
        if run_identity(fields) not in present and not (fields.get("run_id") == -1 and -1 in taken)
    ]
    keeping = {fields["run_id"] for fields in selected if fields.get("run_id") not in taken | {None}}
    next_id = max(taken | keeping | {0}) + 1
    for fields in selected:
        if fields.get("run_id") not in keeping:
            fields["run_id"], next_id = next_id, next_id + 1
    return selected


def create_run(store: Store, fields: dict[str, Any]) -> int:
    """Insert one imported run with its own fields (start time, status, ...); returns its id. The
    run is incomplete until its importer completes it (`Store.write_import(..., complete=...)`)."""
    debug = fields.get("run_id") == -1
    if debug:
        fields = {name: value for name, value in fields.items() if name != "run_id"}
    return store.create_imported_run(fields, debug=debug)


def nan_to_none(value: float) -> float | None:
    """The schema stores a NaN scalar as NULL (SQLite has no NaN); infinities stay as they are."""
    return None if value != value else value


def json_value(value: Any) -> str:
    """An hparam or result value as the schema stores it (JSON text of a scalar; NaN as `NaN`)."""
    return json.dumps(value)


def write_bundle(store: Store, bundle: RunBundle) -> int:
    """Insert the run and all its records; returns the new run id.

    Records go in batches of a bounded size, so a run with millions of points never builds one
    giant transaction.
    """
    run_id = create_run(store, bundle.fields)
    head = Batch(
        hparams=[QueuedValue(run_id, name, json_value(value)) for name, value in bundle.hparams.items()],
        results=[QueuedValue(run_id, name, json_value(value)) for name, value in bundle.results.items()],
        repetitions=[
            QueuedRepetition(run_id, rep, start) for rep, start in sorted(bundle.repetitions.items())
        ],
    )
    last = head
    for batch in _record_batches(run_id, bundle):
        store.write_batch(last)
        last = batch
    store.write_import(last, ImportRecords(), complete=[run_id])  # the run is complete with its last records
    return run_id


def _record_batches(run_id: int, bundle: RunBundle) -> Iterator[Batch]:
    from tallyboard.media import png_size

    batch, size = Batch(), 0
    for tag, rows in bundle.scalars.items():
        for start in range(0, len(rows), ROWS_PER_BATCH):
            chunk = rows[start : start + ROWS_PER_BATCH]
            batch.scalars.append((run_id, tag, chunk))
            size += len(chunk)
            if size >= ROWS_PER_BATCH:
                yield batch
                batch, size = Batch(), 0
    for tag, rep, step, epoch, walltime, kind, png in bundle.media:
        batch.media.append(QueuedMedia(run_id, tag, rep, step, epoch, walltime, kind, *png_size(png), png))
    batch.texts.extend(QueuedText(run_id, *text) for text in bundle.texts)
    if len(batch):
        yield batch


def import_bundles(
    store: Store,
    bundles: list[RunBundle],
    progress: bool,
    description: str,
    layout: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Write the bundles whose runs are not in `store` yet; returns how many were written. The
    column `layout` of the source is applied when the table had no other runs before."""
    from tallyboard.progress import progress_bar

    new_fields = select_new_runs(store, [bundle.fields for bundle in bundles])
    was_empty = not store.runs(show_hidden=True)  # after the runs left incomplete were reclaimed
    by_identity = {run_identity(bundle.fields): bundle for bundle in bundles}
    total = sum(by_identity[run_identity(fields)].record_count() for fields in new_fields)
    with progress_bar(total, description, enabled=progress, unit="rec") as bar:
        for fields in new_fields:
            bundle = by_identity[run_identity(fields)]
            bundle.fields = fields
            write_bundle(store, bundle)
            bar.update(bundle.record_count())
    if was_empty and layout:
        apply_column_layout(store, layout)
    return len(new_fields)


def apply_column_layout(store: Store, layout: dict[str, dict[str, Any]]) -> None:
    """Give the table's columns the aliases and positions of the source (columns it lacks are ignored)."""
    known = {column.name for column in store.columns()}
    store.set_columns({name: change for name, change in layout.items() if name in known})

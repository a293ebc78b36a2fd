"""The query API: runs, their series, summaries of them and logged tables as DataFrames (or plain
records).

What `ResultTable.query`, `.series`, `.iter_series`, `.summary` and `.logged_table` return,
assembled here from the store's named records (store/series.py holds the SQL). Why it is built this way:
- One filter language: `query(filter=...)` selects runs with filter.py, exactly as the
  dashboard and `tallyboard runs --filter` do.
- Whatever is installed: pandas by default, polars when asked (`backend="polars"`), and lists of
  named records (`RunRecord`, `SeriesPoint`, `SeriesSummary`) when neither is there, so the core
  never requires a DataFrame library.
- Flat memory: a series frame is built from pages of typed numpy arrays, one page of raw rows at
  a time (`chunk_rows`); `iter_series` hands the pages over one by one, so a query larger than
  memory can be reduced on the way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, NamedTuple

from tallyboard.filter import column_resolver, run_cell, run_filter
from tallyboard.store import Store
from tallyboard.store.run_fields import value_key
from tallyboard.store.series import (
    DEFAULT_CHUNK_ROWS,
    SeriesChunk,
    SeriesKey,
    SeriesSummary,
    iter_chunks,
    series_keys,
    summaries,
)
from tallyboard.values import to_int

Backend = Literal["pandas", "polars", "records"]
BACKENDS = ("pandas", "polars", "records")
SERIES_COLUMNS = ("run_id", "tag", "rep", "step", "epoch", "walltime", "value")


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One run as `query(backend="records")` returns it: its fields, tags, hparams and results."""

    run_id: int
    experiment: str
    status: str
    tag: str
    tags: list[str]
    note: str
    color: str | None
    comment: str | None
    hidden: bool
    start_time: float
    end_time: float | None
    config_path: str | None
    config_hash: str | None
    cli: str | None
    command: str | None
    git_commit: str | None
    rerun_of: int | None
    hparams: dict[str, Any]
    results: dict[str, Any]


# Run fields a query returns, in a frame's column order: `RunRecord`'s fields, each a run-row field
# that is not `long` (the config content and git diff: `get_experiment_raw` has them), or `tags`
# (tests/store/test_run_row.py holds it to that).
RUN_QUERY_FIELDS = tuple(
    f.name for f in dataclasses.fields(RunRecord) if f.name not in ("hparams", "results")
)


class SeriesPoint(NamedTuple):
    """One logged scalar, a row of `series`: walltime in seconds since its repetition started,
    epoch None where none was given, value NaN where NaN was logged."""

    run_id: int
    tag: str
    rep: int
    step: int
    epoch: int | None
    walltime: float
    value: float


def resolve_backend(backend: str | None) -> Backend:
    """The backend to use: the one asked for, else pandas when it imports, else records."""
    if backend is None:
        try:
            import pandas  # noqa: F401
        except ImportError:
            return "records"
        return "pandas"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    return backend  # type: ignore[return-value]


# ---- runs --------------------------------------------------------------------------------------
def run_records(store: Store, filter: str | None = None, show_hidden: bool = False) -> list[RunRecord]:
    """The runs (visible ones unless `show_hidden`) for which `filter` holds, by run id."""
    rows = store.runs(show_hidden=show_hidden)
    hparams, results, tags = store.values("hparams"), store.values("results"), store.run_tags()
    runs = []
    for row in rows:
        run_id, cells = row.run_id, row._asdict()
        fields = {name: cells[name] for name in RUN_QUERY_FIELDS if name != "tags"}
        fields.update(hidden=bool(row.hidden), tags=tags.get(run_id, []))
        runs.append(RunRecord(**fields, hparams=hparams.get(run_id, {}), results=results.get(run_id, {})))
    if filter and filter.strip():
        matches = run_filter(filter, store.columns())
        runs = [run for run in runs if matches(dataclasses.asdict(run))]
    return runs


def runs_frame(
    store: Store,
    filter: str | None = None,
    columns: Sequence[str] | None = None,
    show_hidden: bool = False,
    backend: str | None = None,
) -> Any:
    """`ResultTable.query`: one row per run; run fields, then hparams, then results, each a
    column (a name that is both is the hparam's, as in the filter language; an hparam or result
    named like a run field is `hparams.NAME` / `results.NAME`: run_fields.value_key)."""
    chosen = resolve_backend(backend)
    runs = run_records(store, filter, show_hidden)
    if chosen == "records":
        return runs
    cells = [dataclasses.asdict(run) for run in runs]
    if columns is None:
        names = list(RUN_QUERY_FIELDS)
        for kind in ("hparams", "results"):
            keys = {value_key(kind, name) for run in runs for name in getattr(run, kind)}
            names += sorted(keys - set(names))
    else:
        resolve = column_resolver(store.columns())
        names = ["run_id", *(name for name in map(resolve, columns) if name != "run_id")]
    data = {name: [run_cell(cell, name) for cell in cells] for name in names}
    return _frame(chosen, data, names)


def _frame(backend: Backend, data: dict[str, list[Any]], names: list[str]) -> Any:
    if backend == "pandas":
        import pandas as pd

        return pd.DataFrame(data, columns=names)
    import polars as pl

    return pl.DataFrame([pl.Series(name, data[name], strict=False) for name in names])


# ---- series ------------------------------------------------------------------------------------
def _keys(
    store: Store,
    run_ids: int | Iterable[int],
    tags: str | Iterable[str] | None,
    reps: int | Iterable[int] | None,
) -> list[SeriesKey]:
    ids = [to_int("a run id", run_id) for run_id in ([run_ids] if isinstance(run_ids, int) else run_ids)]
    wanted_tags = [tags] if isinstance(tags, str) else (None if tags is None else list(tags))
    wanted_reps = [reps] if isinstance(reps, int) else (None if reps is None else list(reps))
    return series_keys(store, ids, wanted_tags, wanted_reps)


class Selection(NamedTuple):
    """Which points a series query reads: runs, tags and repetitions (None = all), an inclusive
    step range ((low, high), None for an open end), and `downsample` (n buckets per series)."""

    run_ids: int | Iterable[int]
    tags: str | Iterable[str] | None = None
    reps: int | Iterable[int] | None = None
    step_range: tuple[int | None, int | None] | None = None
    downsample: int | None = None

    def chunks(self, store: Store, chunk_rows: int) -> Iterator[SeriesChunk]:
        keys = _keys(store, self.run_ids, self.tags, self.reps)
        return iter_chunks(store, keys, self.step_range, self.downsample, chunk_rows)


def iter_series(
    store: Store, selection: Selection, backend: str | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Iterator[Any]:
    """`ResultTable.iter_series`: the points in frames (or lists of `SeriesPoint`) of at most
    `chunk_rows` rows, each from one series; only one page of raw rows is held at a time."""
    chosen = resolve_backend(backend)
    for chunk in selection.chunks(store, chunk_rows):
        yield _points(chunk) if chosen == "records" else _series_frame(chosen, [_arrays(chunk)], [chunk.tag])


def series_frame(
    store: Store, selection: Selection, backend: str | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> Any:
    """`ResultTable.series`: one long frame (run_id, tag, rep, step, epoch, walltime, value), rows
    by run, tag, repetition and step; the tag column is categorical."""
    chosen = resolve_backend(backend)
    chunks = selection.chunks(store, chunk_rows)
    if chosen == "records":
        return [point for chunk in chunks for point in _points(chunk)]
    categories: dict[str, int] = {}
    parts = []
    for chunk in chunks:
        parts.append(_arrays(chunk, categories.setdefault(chunk.tag, len(categories))))
    return _series_frame(chosen, parts, list(categories))


def _points(chunk: SeriesChunk) -> list[SeriesPoint]:
    return [
        SeriesPoint(chunk.run_id, chunk.tag, chunk.rep, *point)
        for point in zip(chunk.steps, chunk.epochs, chunk.walltimes, chunk.values, strict=True)
    ]


def _arrays(chunk: SeriesChunk, tag_code: int = 0) -> dict[str, Any]:
    """A chunk as typed numpy arrays (epoch as int64 plus a mask of the missing ones)."""
    import numpy as np

    count = len(chunk.steps)
    missing = np.fromiter((epoch is None for epoch in chunk.epochs), dtype=bool, count=count)
    epochs = np.fromiter(
        (-1 if epoch is None else epoch for epoch in chunk.epochs), dtype=np.int64, count=count
    )
    return {
        "run_id": np.full(count, chunk.run_id, dtype=np.int64),
        "tag": np.full(count, tag_code, dtype=np.int32),
        "rep": np.full(count, chunk.rep, dtype=np.int64),
        "step": np.fromiter(chunk.steps, dtype=np.int64, count=count),
        "epoch": epochs,
        "epoch_missing": missing,
        "walltime": np.fromiter(chunk.walltimes, dtype=np.float64, count=count),
        "value": np.fromiter(chunk.values, dtype=np.float64, count=count),
    }


def _series_frame(backend: Backend, parts: list[dict[str, Any]], categories: list[str]) -> Any:
    """A frame of the concatenated array chunks; `tag` holds codes into `categories`."""
    import numpy as np

    names = (*SERIES_COLUMNS, "epoch_missing")
    columns = {
        name: np.concatenate([part[name] for part in parts]) if parts else np.array([]) for name in names
    }
    parts.clear()  # the chunks' arrays can go as soon as the columns are whole
    missing = columns.pop("epoch_missing").astype(bool)
    codes = columns["tag"].astype(np.int32)
    if backend == "pandas":
        import pandas as pd

        columns["tag"] = pd.Categorical.from_codes(codes, categories=categories)
        columns["epoch"] = pd.arrays.IntegerArray(columns["epoch"].astype(np.int64), missing)
        return pd.DataFrame(columns, columns=list(SERIES_COLUMNS))
    import polars as pl

    frame = pl.DataFrame({name: columns[name] for name in SERIES_COLUMNS if name not in ("tag", "epoch")})
    tag = pl.Series("tag", categories, dtype=pl.Enum(categories)).gather(codes)
    epoch = pl.Series("epoch", columns["epoch"].astype(np.int64)).set(pl.Series(missing), None)
    frame = frame.with_columns(tag=tag, epoch=epoch)
    return frame.select(SERIES_COLUMNS)


def pivot(frame: Any, values: str = "value") -> Any:
    """A long series frame made wide: one row per (run_id, rep, step), one column per tag."""
    index = ["run_id", "rep", "step"]
    if isinstance(frame, list):
        rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        for point in frame:
            key = (point.run_id, point.rep, point.step)
            rows.setdefault(key, dict(zip(index, key, strict=True)))[point.tag] = getattr(point, values)
        return [rows[key] for key in sorted(rows)]
    if type(frame).__module__.startswith("polars"):
        return frame.pivot(on="tag", index=index, values=values, aggregate_function=None).sort(index)
    wide = frame.pivot(index=index, columns="tag", values=values)
    wide.columns = [str(name) for name in wide.columns]
    return wide.reset_index()


# ---- summaries ---------------------------------------------------------------------------------
def summary_frame(
    store: Store,
    run_ids: int | Iterable[int],
    tags: str | Iterable[str] | None = None,
    reps: int | Iterable[int] | None = None,
    last_n: int = 10,
    backend: str | None = None,
) -> Any:
    """`ResultTable.summary`: one `SeriesSummary` row per series (computed in SQL)."""
    chosen = resolve_backend(backend)
    rows = summaries(store, _keys(store, run_ids, tags, reps), last_n)
    if chosen == "records":
        return rows
    names = list(SeriesSummary._fields)
    data = {name: [getattr(row, name) for row in rows] for name in names}
    return _frame(chosen, data, names)


# ---- logged tables -----------------------------------------------------------------------------
def logged_table(
    store: Store, run_id: int, tag: str, step: int | None = None, backend: str | None = None
) -> Any:
    """`ResultTable.logged_table`: the table run `run_id` logged as `tag` (the last one, or the last
    at `step`) as a frame, one column per logged column; records: a list of {column: cell}."""
    from tallyboard.store.table_content import decode

    found = store.texts(run_id, "table", tag=tag, step=step)
    if not found:
        at = "" if step is None else f" at step {step}"
        logged = sorted({row.tag for row in store.texts(run_id, "table")})
        raise KeyError(f"run {run_id} logged no table {tag!r}{at}; its tables: {logged}")
    columns, rows = decode(found[-1].content)
    chosen = resolve_backend(backend)
    if chosen == "records":
        return [dict(zip(columns, row, strict=True)) for row in rows]
    data = {name: [row[index] for row in rows] for index, name in enumerate(columns)}
    return _frame(chosen, data, columns)

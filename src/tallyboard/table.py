"""ResultTable: every experiment is one reproducible row, and everything logged hangs off it.

A run's row records what is needed to run it again (config content and hash, CLI, command line,
git commit and diff). `unique_columns`, fixed when the table is created, stops the same
configuration from being run twice by accident: the check treats NULL as a value, ignores hidden
and failed runs (so a failed run can be re-run), and happens in the same transaction as the insert,
so two processes racing to start the same run create one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import IO, TYPE_CHECKING, Any, Literal, NamedTuple, cast

from tallyboard import capture, left_out, run_context
from tallyboard import query as query_api
from tallyboard.artifacts import location_for
from tallyboard.exchange.target import require_existing
from tallyboard.media import open_png
from tallyboard.run_view import RunView
from tallyboard.sink import DEFAULT_COMMIT_INTERVAL, NullSink, Sink, arm_signals, sink_for
from tallyboard.store import Access, Column, Quarantined, StoreError, open_store
from tallyboard.store.records import DEBUG_RUN_ID, ConsoleLine, ResumePoint
from tallyboard.store.run_row import DEFAULT_UNIQUE_COLUMNS, UNIQUE_CANDIDATES, RunRow
from tallyboard.store.series import DEFAULT_CHUNK_ROWS
from tallyboard.table_commands import TableCommands
from tallyboard.values import check_text, to_int
from tallyboard.writer import LogWriter, let_go

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is new in Python 3.11; we support 3.10

    from tallyboard.comparison import Comparison
    from tallyboard.store.spool import SpoolStore

# DeepBoard's names for the same columns, accepted in `unique_columns`.
DEEPBOARD_NAMES = {"config": "config_path", "commit_hash": "git_commit", "diff": "git_diff"}
DISABLED_RUN_ID = -2


def deepboard_keys(row: RunRow) -> dict[str, Any]:
    """A run row's values under DeepBoard's column names; `start` as DeepBoard's SQLite file returns
    it, the ISO text of a local datetime ('2025-01-31T12:00:00.123456')."""
    fields = row._asdict()
    keys = {deepboard: fields[ours] for deepboard, ours in DEEPBOARD_NAMES.items()}
    keys["start"] = datetime.fromtimestamp(row.start_time).isoformat()
    return keys


class NoCommitAction(Enum):
    """What `new_run` does when the git working tree has uncommitted changes."""

    NOP = "NOP"
    WARN = "WARN"
    RAISE = "RAISE"


class TableTuple(NamedTuple):
    """The result table as `get_results` returns it (DeepBoard's shape)."""

    col_names: list[str]
    col_ids: list[str]
    is_hparam: list[bool]
    row_color: list[str | None]
    data: list[list[Any]]


def require_writable_file(path: str) -> None:
    """Refuse, at `ResultTable(...)`, a SQLite location that logging could not write: otherwise the
    table opens (reading needs no write access) and every commit of the writer thread fails later.
    SQLite writes the file and creates `<file>-wal` and `<file>-shm` beside it."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a folder; give the path of a result table file in it")
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"cannot create the result table {path!r}: the folder {folder!r} does not exist"
        )
    for what, where in (("folder", folder), ("file", path)):
        if os.path.exists(where) and not os.access(where, os.W_OK):
            raise PermissionError(
                f"cannot write the result table {path!r}: this process may not write to the {what} "
                f"{where!r} (SQLite writes the file and creates its -wal and -shm files beside it)"
            )


def _normalise_unique(columns: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    names = tuple(DEEPBOARD_NAMES.get(name, name) for name in columns)
    unknown = [name for name in names if name not in UNIQUE_CANDIDATES]
    if unknown:
        raise ValueError(f"invalid unique column(s) {unknown}; choose from {UNIQUE_CANDIDATES}")
    return names


class ResultTable(TableCommands):
    """The result table in a SQLite file (created if missing) or a `postgresql://` database; with
    `spool`, logged into that node-local SQLite file first and shipped to the database from there
    (store/spool.py; `spool=None` takes $TALLYBOARD_SPOOL, `spool=False` never spools).

    `read_only=True` opens an existing table only to read it (what the reading commands do): it
    creates nothing, migrates nothing and writes nothing, and every method that would write raises
    `ReadOnlyTableError`. `create=False` opens an existing table to write, but never makes a new one
    (`tallyboard migrate`). Either way a missing file is a FileNotFoundError. Every `tallyboard`
    command is one method of this class (table_commands.py)."""

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        nocommit_action: NoCommitAction = NoCommitAction.WARN,
        unique_columns: tuple[str, ...] | None = None,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL,
        artifacts: str | os.PathLike[str] | None = None,
        spool: str | os.PathLike[str] | Literal[False] | None = None,
        read_only: bool = False,
        create: bool = True,
    ) -> None:
        if db_path is None:  # $TALLYBOARD_URL lets a cluster point every job at one table
            db_path = os.environ.get("TALLYBOARD_URL") or "results.db"
        wanted = None if unique_columns is None else _normalise_unique(unique_columns)
        self.db_path = db_path if isinstance(db_path, str) and "://" in db_path else os.fspath(db_path)
        self.nocommit_action = NoCommitAction(nocommit_action)
        self.commit_interval = commit_interval
        self.read_only = read_only
        if spool and read_only:
            raise ValueError("a spool is where runs are logged: a read_only table has none")
        if read_only or not create:
            require_existing(self.db_path)  # before anything is opened, so nothing is created
        elif "://" not in self.db_path:
            require_writable_file(self.db_path)
        # Where `log_artifact` copies files: a folder or an fsspec URL; by default `results.db` ->
        # `results.artifacts/`; None for PostgreSQL unless configured (tallyboard/artifacts.py).
        self.artifacts = location_for(self.db_path, artifacts)
        if spool is None and not read_only:  # $TALLYBOARD_SPOOL: a node-local file that ships to
            spool = os.environ.get("TALLYBOARD_SPOOL") or None  # db_path (docs/cluster.md)
        self.spool = os.path.abspath(os.fspath(spool)) if spool else None
        if self.spool is not None:
            from tallyboard.store import spool as spool_module
            from tallyboard.store.spool_shipper import shipper_for

            require_writable_file(self.spool)
            unique = DEFAULT_UNIQUE_COLUMNS if wanted is None else wanted
            self.db_path = spool_module.location(self.spool, self.db_path, unique)
            shipper_for(self.spool)
        if not create and not read_only:  # a table must be there: look without writing first
            open_store(self.db_path, access=Access.READ).close()
        access = Access.READ if read_only else Access.WRITE
        self._store = open_store(self.db_path, DEFAULT_UNIQUE_COLUMNS if wanted is None else wanted, access)
        stored = tuple(json.loads(self._store.meta("unique_columns") or "[]"))
        if wanted is not None and set(wanted) != set(stored):
            self._store.close()
            raise StoreError(
                f"unique columns {wanted} do not match the ones this table was created with, {stored}; "
                f"open it with ResultTable({self.db_path!r}, unique_columns={stored}) or use a new table"
            )
        self.unique_columns = stored
        if not read_only:
            arm_signals()  # from the main thread, so that runs of any thread are ended on SIGTERM

    # ---- starting runs ------------------------------------------------------------------------
    def _run_fields(
        self,
        experiment_name: str,
        configfile: str | os.PathLike[str] | IO[str] | None,
        cli: dict[str, Any] | None,
        comment: str | None,
        tag: str,
        with_git: bool,
    ) -> dict[str, Any]:
        """The run's row, every text checked first (`values.check_text`): a run the database cannot
        store must not start."""
        if not isinstance(experiment_name, str) or not experiment_name:
            raise TypeError(f"experiment_name must be a non-empty string, got {experiment_name!r}")
        check_text("experiment_name", experiment_name)
        if comment is not None:
            check_text("comment", comment)
        if not isinstance(tag, str):  # '' is "no tag"
            raise TypeError(f"tag must be a str ('' for none), got {type(tag).__name__}")
        check_text("tag", tag)
        cli_text = None if cli is None else capture.cli_json(cli)
        config = None if configfile is None else capture.read_config(configfile)
        if config is not None and config.path is not None:
            check_text("configfile", config.path)
        fields: dict[str, Any] = {
            "experiment": experiment_name,
            "config_path": None if config is None else config.path,
            "config_hash": None if config is None else config.sha256,
            "config_content": None if config is None else config.content,
            "cli": cli_text,
            "command": capture.command_line(),
            "comment": comment,
            "tag": tag,
            "start_time": time.time(),
        }
        if with_git:
            git = capture.git_state()
            if git.diff and self.nocommit_action is not NoCommitAction.NOP:
                message = "You have uncommitted changes; commit them so that this run can be reproduced."
                if self.nocommit_action is NoCommitAction.RAISE:
                    raise RuntimeError(message)
                warnings.warn(message, RuntimeWarning, stacklevel=3)
            fields["git_commit"], fields["git_diff"] = git.commit, git.diff
        return fields

    def _unique_key(self, fields: dict[str, Any], unique: bool | Mapping[str, Any] = True) -> str | None:
        """The run's values of the unique columns, then the values of a `unique` mapping; None (no
        check) for a table without unique columns or when `unique` is False."""
        if not self.unique_columns or unique is False:
            return None

        def canonical(name: str) -> Any:
            if name == "cli" and fields["cli"] is not None:  # key order must not make runs distinct
                return json.dumps(json.loads(fields["cli"]), sort_keys=True)
            return fields.get(name)

        key = [canonical(name) for name in self.unique_columns]
        if isinstance(unique, Mapping) and unique:
            key.append(json.dumps(dict(unique), sort_keys=True, default=str))
        return json.dumps(key)

    def _start(self, debug: bool, name: str, configfile: str | os.PathLike[str] | IO[str] | None,
               cli: dict[str, Any] | None, comment: str | None, tag: str, flush_each: int, keep_each: int,
               auto_log_plt: bool, disable: bool, system_metrics: bool,
               unique: bool | Mapping[str, Any] = True, capture_console: bool = False,
               environment: bool = True) -> LogWriter:  # fmt: skip
        """What new_run and new_debug_run share; a debug run skips git and uniqueness."""
        self._refuse_if_read_only("start a run")
        if disable:
            return LogWriter(
                self._store, NullSink(), DEBUG_RUN_ID if debug else DISABLED_RUN_ID, disable=True
            )
        for what, count in (("keep_each", keep_each), ("flush_each", flush_each)):
            if to_int(what, count) < 1:
                raise ValueError(f"{what} must be 1 or more, got {count}")
        run_context.check(capture_console)
        fields = self._run_fields(name, configfile, cli, comment, tag, with_git=not debug)
        if not debug:
            fields["unique_key"] = self._unique_key(fields, unique)
        run_id = self._store.create_run(fields, debug=debug)
        sink = sink_for(self.db_path, self.commit_interval)
        writer = self._writer(sink, run_id, keep_each, auto_log_plt, system_metrics)
        run_context.attach(writer, capture_console, environment)
        return writer

    def _writer(
        self,
        sink: Sink,
        run_id: int,
        keep_each: int,
        auto_log_plt: bool,
        system_metrics: bool,
        resume: ResumePoint | None = None,
    ) -> LogWriter:
        """The writer of a run just created or reopened (with where it stopped, if reopened)."""
        writer = LogWriter(
            self._store, sink, run_id, keep_each, auto_log_plt, resume=resume, artifacts=self.artifacts
        )
        if system_metrics:
            from tallyboard import system_metrics as metrics

            writer.before_end(metrics.start(writer).stop)
        return writer

    def new_run(
        self,
        experiment_name: str,
        configfile: str | os.PathLike[str] | IO[str] | None = None,
        cli: dict[str, Any] | None = None,
        comment: str | None = None,
        tag: str = "",
        flush_each: int = 10,
        keep_each: int = 1,
        auto_log_plt: bool = True,
        disable: bool = False,
        system_metrics: bool = False,
        unique: bool | Mapping[str, Any] = True,
        capture_console: bool = False,
        environment: bool = True,
    ) -> LogWriter:
        """Start a run and return its writer. Raises `DuplicateRunError` if a visible, non-failed run
        has the same unique columns. `flush_each` is accepted for DeepBoard compatibility: commits
        happen every `commit_interval` seconds instead, which bounds what a crash can lose by time.

        `unique=False` skips the check for this run, and later runs are not compared with it: each
        launch of a training script is a run of its own, the way framework loggers count versions.
        A mapping (e.g. the hyperparameters) is checked too: same columns and same mapping is a
        duplicate. `capture_console` tees stdout, stderr and `logging` into the run until it ends
        (console.py); `environment` records the interpreter, machine, packages and allowlisted
        variables (environment.py)."""
        return self._start(False, experiment_name, configfile, cli, comment, tag, flush_each, keep_each,
                           auto_log_plt, disable, system_metrics, unique, capture_console,
                           environment)  # fmt: skip

    def new_debug_run(
        self,
        experiment_name: str,
        configfile: str | os.PathLike[str] | IO[str] | None = None,
        cli: dict[str, Any] | None = None,
        comment: str | None = None,
        tag: str = "",
        flush_each: int = 10,
        keep_each: int = 1,
        auto_log_plt: bool = True,
        disable: bool = False,
        system_metrics: bool = False,
        capture_console: bool = False,
        environment: bool = True,
    ) -> LogWriter:
        """Start the debug run: id -1 (`DEBUG_RUN_ID`), replaced by the next debug run, no git
        capture, no uniqueness; real runs' ids are never shifted by it."""
        return self._start(True, experiment_name, configfile, cli, comment, tag, flush_each, keep_each,
                           auto_log_plt, disable, system_metrics, True, capture_console,
                           environment)  # fmt: skip

    def resume_run(
        self, run_id: int, keep_each: int = 1, auto_log_plt: bool = True, system_metrics: bool = False
    ) -> LogWriter:
        """Reopen a run for writing and return its writer: a job restarting from a checkpoint, or
        requeued after preemption, continues its own run instead of starting another.

        The status goes back to 'running' (end time cleared) at once. Logging continues in the
        run's last repetition: auto steps after the last logged step of each tag, walltimes from
        that repetition's start; `new_repetition()` starts the one after it. A scalar logged again
        at a (tag, repetition, step) that holds one replaces it, so steps re-logged since the
        checkpoint leave one clean series (images and texts have no such key: they are added).
        A writer of the same run still open in this process is drained and let go first (the run
        is not ended). Raises `KeyError` for an unknown run, and `DuplicateRunError` if the run
        had failed and a visible run of the same configuration was started since."""
        self._refuse_if_read_only("resume a run")
        if keep_each < 1:
            raise ValueError(f"keep_each must be 1 or more, got {keep_each}")
        self._require(run_id)
        sink = sink_for(self.db_path, self.commit_interval)
        try:
            let_go(sink, run_id)
            point = self._store.reopen_run(run_id)
        except BaseException:
            sink.release(run_id)
            raise
        return self._writer(sink, run_id, keep_each, auto_log_plt, system_metrics, point)

    def load_run(self, run_id: int) -> RunView:
        """An existing run, to read what it logged (and edit its note, tag, colour, tags, status)."""
        self._require(run_id)
        return RunView(self._store, run_id)

    # ---- reading the table ----------------------------------------------------------------------
    def _require(self, run_id: int) -> RunRow:
        row = self._store.run(run_id)
        if row is None:
            raise KeyError(f"no run with id {run_id}")
        return row

    def get_results(self, run_id: int | None = None, show_hidden: bool = False) -> TableTuple:
        """The shown columns (in display order) and one row per run, hparams and results included."""
        rows = self._store.runs(run_id=run_id, show_hidden=show_hidden or run_id is not None)
        values = self._store.values("hparams", run_id)
        for rid, results in self._store.values("results", run_id).items():
            values.setdefault(rid, {}).update(results)
        for rid, tags in self._store.run_tags(run_id).items():  # a shown `tags` column (an hparam of
            values.setdefault(rid, {}).setdefault("tags", tags)  # that name, from before v6, wins)
        shown = [c for c in self._store.columns() if c.position is not None]
        data = []
        for row in rows:
            fields, extra = row._asdict(), values.get(row.run_id, {})
            data.append([extra.get(c.name, fields.get(c.name)) for c in shown])
        return TableTuple(
            col_names=[c.alias for c in shown],
            col_ids=[c.name for c in shown],
            is_hparam=[c.kind == "hparam" for c in shown],
            row_color=[row.color for row in rows],
            data=data,
        )

    def to_pd(self, get_hidden: bool = False) -> Any:
        """The result table as a pandas DataFrame indexed by run id."""
        import pandas as pd

        names, ids, _, _, data = self.get_results(show_hidden=get_hidden)
        frame = pd.DataFrame(data, columns=names)
        if "run_id" in ids:
            frame = frame.set_index(names[ids.index("run_id")])
        return frame

    def get_environment(self, run_id: int) -> dict[str, Any] | None:
        """The environment run `run_id` recorded when it started (environment.py), None if none."""
        self._require(run_id)
        return self.load_run(run_id).get_environment()

    def get_console(self, run_id: int, after: int = 0, search: str | None = None) -> list[ConsoleLine]:
        """Run `run_id`'s captured console lines (see `LogWriter.get_console`)."""
        self._require(run_id)
        return self.load_run(run_id).get_console(after=after, search=search)

    def compare(self, metric: str, by: str | Sequence[str] = (), **options: Any) -> Any:
        """Groups of runs (by the hparams `by`) compared on `metric`, as a pandas DataFrame: one row
        per group with its hparam values, n, mean, std, the 95% CI and its run ids.
        `frame.attrs["pairs"]` holds the pairwise table: diff of means (b - a) with its 95% CI,
        Welch's t, df and p, Holm's p across pairs, and a verdict in words. `options` are those
        of `compare_groups` (run_ids, summary, k, goal, unit). Needs pandas and scipy."""
        import pandas as pd

        found = self.compare_groups(metric, by, **options).to_json()
        keep = ("n", "mean", "std", "ci_low", "ci_high", "run_ids")
        groups = pd.DataFrame([{**g["key"], **{c: g[c] for c in keep}} for g in found["groups"]])
        groups.attrs["pairs"] = pd.DataFrame(found["pairs"])
        return groups

    def compare_groups(
        self,
        metric: str,
        by: str | Sequence[str] = (),
        run_ids: Sequence[int] | None = None,
        summary: str = "final",
        k: int = 5,
        goal: str = "max",
        unit: str = "rep",
    ) -> Comparison:
        """The statistics behind `compare` as a `comparison.Comparison` (no pandas needed).

        `metric` is a scalar tag ('val/accuracy'), reduced per repetition by `summary` ('final',
        'best' by `goal` 'max' or 'min', or 'last_k': the mean of the last k points), or a result
        column. Runs: `run_ids`, else every visible run. `unit='run'` makes each run (the mean of
        its repetitions) one sample instead of each repetition."""
        from tallyboard import comparison

        names = [by] if isinstance(by, str) else list(by)
        known = {row.run_id for row in self._store.runs(show_hidden=True)}
        chosen = run_ids if run_ids is not None else [row.run_id for row in self._store.runs()]
        missing = [run_id for run_id in chosen if run_id not in known]
        if missing:
            raise KeyError(f"no run with id {missing[0]}")
        hparams = self._store.values("hparams")
        runs = {run_id: hparams.get(run_id, {}) for run_id in chosen}

        def points() -> list[tuple[int, int, float | None]]:
            return [
                (run_id, rep, value)
                for run_id in runs
                for rep, value in self._store.scalars(run_id, metric, columns=("rep", "value"))
            ]

        how = comparison.Summary(summary, k, goal)
        samples = comparison.run_samples(metric, runs, self._store.values("results"), points, how)
        if not samples:
            raise KeyError(f"none of these runs logged a scalar or result named {metric!r}")
        return comparison.compare(samples, names, metric, unit)

    def get_config(self, run_id: int) -> str:
        """The content of the run's config file as it was when the run started. `KeyError` if it
        had none, or if it was not stored (binary or too large: the message says which)."""
        content = self._require(run_id).config_content
        if content is None:
            raise KeyError(f"run {run_id} has no config file")
        entry = left_out.listed_config(content)
        if entry is not None:
            raise KeyError(
                f"the config file of run {run_id} ({entry.path}, {entry.size} bytes, sha256 "
                f"{entry.sha256}) was not stored: {entry.reason}"
            )
        return content

    def get_left_out(self, run_id: int) -> list[dict[str, Any]]:
        """The files the run's capture listed instead of storing (see left_out.py): dicts of
        `source` ('config' or 'git'), `path`, `size`, `sha256`, `reason`."""
        row = self._require(run_id)
        config = [entry for entry in [left_out.listed_config(row.config_content)] if entry is not None]
        return [
            {"source": source, **dataclasses.asdict(entry)}
            for source, entries in (("config", config), ("git", left_out.parse(row.git_diff)))
            for entry in entries
        ]

    def get_experiment_raw(self, run_id: int) -> dict[str, Any]:
        """The run's row, every column, as stored, plus the keys DeepBoard's row has under other
        names (`config`, `start`, `commit_hash`, `diff`), so code written for DeepBoard reads it."""
        row = self._require(run_id)
        return {**row._asdict(), **deepboard_keys(row)}

    def get_image_by_id(self, image_id: int) -> Any:
        """An image or figure as a PIL image, or None for an unknown id."""
        rows = self._store.media(None, id=image_id)
        return open_png(rows[0][-1]) if rows else None

    @staticmethod
    def get_file_hash(configfile: str | os.PathLike[str] | IO[str], hash_algo: str = "sha256") -> str:
        """The hex digest of a file (a path, or an open file, rewound afterwards); `hash_algo` is any
        name `hashlib.new` knows ('sha256', 'md5', 'sha1'...)."""
        return capture.file_hash(configfile, hash_algo)

    def quarantined(self, run_id: int | None = None) -> list[Quarantined]:
        """Records the database rejected although they passed the checks at the call (of one run, or
        all), oldest first: each with its kind, tag, the database's error and the whole record as
        JSON (`json.loads(q.record)`). The sink sets them aside so that nothing else is held back."""
        return self._store.quarantined(run_id)

    # ---- the query API (query.py; docs/query.md) -------------------------------------------------
    def query(
        self,
        filter: str | None = None,
        columns: list[str] | None = None,
        show_hidden: bool = False,
        backend: str | None = None,
    ) -> Any:
        """The runs as a DataFrame, one row per run: run fields (with `tags`), then hparams, then
        results as columns. `filter` is the dashboard's filter language (`lr < 1e-3 and "baseline"
        in tags`); `columns` picks names or aliases (run_id always comes first). `backend`:
        'pandas' (default when installed), 'polars', or 'records' (a list of `RunRecord`)."""
        return query_api.runs_frame(self._store, filter, columns, show_hidden, backend)

    def series(
        self,
        run_ids: int | list[int],
        tags: str | list[str] | None = None,
        reps: int | list[int] | None = None,
        step_range: tuple[int | None, int | None] | None = None,
        downsample: int | None = None,
        backend: str | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ) -> Any:
        """Logged scalars as one long frame (run_id, tag, rep, step, epoch, walltime, value).
        `step_range` is inclusive, (low, high), None for an open end; `downsample=n` keeps the
        last point of each of n equal step buckets per series. `query.pivot(frame)` makes it wide.
        Read `chunk_rows` points at a time, so raw rows never pile up in memory."""
        which = query_api.Selection(run_ids, tags, reps, step_range, downsample)
        return query_api.series_frame(self._store, which, backend, chunk_rows)

    def iter_series(
        self,
        run_ids: int | list[int],
        tags: str | list[str] | None = None,
        reps: int | list[int] | None = None,
        step_range: tuple[int | None, int | None] | None = None,
        downsample: int | None = None,
        backend: str | None = None,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ) -> Iterator[Any]:
        """What `series` returns, as frames of at most `chunk_rows` rows (each from one series)."""
        which = query_api.Selection(run_ids, tags, reps, step_range, downsample)
        return query_api.iter_series(self._store, which, backend, chunk_rows)

    def summary(
        self,
        run_ids: int | list[int],
        tags: str | list[str] | None = None,
        reps: int | list[int] | None = None,
        last_n: int = 10,
        backend: str | None = None,
    ) -> Any:
        """Per series (run_id, tag, rep): the last step and value, and min, max and mean of the last
        `last_n` points, computed by the database."""
        return query_api.summary_frame(self._store, run_ids, tags, reps, last_n, backend)

    @property
    def runs(self) -> list[int]:
        return [row.run_id for row in self._store.runs(show_hidden=True)]

    def get_hidden_runs(self) -> list[int]:
        return [row.run_id for row in self._store.runs(show_hidden=True) if row.hidden]

    @property
    def active_tags(self) -> list[str]:
        return sorted({row.tag for row in self._store.runs(show_hidden=True) if row.tag})

    @property
    def active_colors(self) -> list[str]:
        return sorted({row.color for row in self._store.runs(show_hidden=True) if row.color})

    # ---- editing the table ----------------------------------------------------------------------
    def hide_run(self, run_id: int) -> None:
        """Hide a run from the default view (and from the uniqueness check); nothing is deleted."""
        self._refuse_if_read_only("hide a run")
        self._require(run_id)
        self._store.update_run(run_id, hidden=1)

    def show_run(self, run_id: int) -> None:
        self._refuse_if_read_only("show a run")
        self._require(run_id)
        self._store.update_run(run_id, hidden=0)

    @property
    def result_columns(self) -> dict[str, tuple[int | None, str, bool]]:
        """{column id: (position or None if hidden, alias, is_hparam)}."""
        return {c.name: (c.position, c.alias, c.kind == "hparam") for c in self._store.columns()}

    def _shown(self) -> list[Column]:
        return [c for c in self._store.columns() if c.position is not None]

    def set_column_order(self, columns: dict[str, int | None]) -> None:
        """Set positions ({name: position}); None hides a column."""
        self._refuse_if_read_only("change the columns")
        self._store.set_columns({name: {"position": position} for name, position in columns.items()})

    def set_column_alias(self, columns: dict[str, str]) -> None:
        """Set the names shown for columns ({name: alias})."""
        self._refuse_if_read_only("change the columns")
        aliases = {name: check_text(f"the alias of {name!r}", str(alias)) for name, alias in columns.items()}
        self._store.set_columns({name: {"alias": alias} for name, alias in aliases.items()})

    def hide_column(self, column: str) -> None:
        """Hide a column; the shown ones keep their order with no gaps."""
        self._refuse_if_read_only("change the columns")
        order = [c.name for c in self._shown() if c.name != column]
        changes = {name: {"position": i} for i, name in enumerate(order)}
        self._store.set_columns({**changes, column: {"position": None}})

    def show_column(self, column: str, order: int = -1) -> None:
        """Show a column at position `order` (-1: last), shifting the ones after it."""
        self._refuse_if_read_only("change the columns")
        names = [c.name for c in self._shown() if c.name != column]
        names.insert(len(names) if order < 0 else min(order, len(names)), column)
        self._store.set_columns({name: {"position": i} for i, name in enumerate(names)})

    # ---- the spool (store/spool.py) ------------------------------------------------------------
    def ship(self, timeout: float = 30.0) -> bool:
        """With a spool: wait until what was flushed or closed so far is in the database; False if
        that took longer than `timeout` (it ships later, on its own). Without one: True at once."""
        if self.spool is None:
            return True
        from tallyboard.store.spool_shipper import shipper_for

        return shipper_for(self.spool).wait(timeout)

    def database_run_id(self, run_id: int) -> int | None:
        """The database's id of a run this table started, once its start has been shipped: with a
        spool, `run.run_id` is the spool's own (None before shipping); without one it is `run_id`."""
        if self.spool is None:
            return run_id
        return cast("SpoolStore", self._store).database_run_id(run_id)  # a spool's table is a SpoolStore

    def close(self) -> None:
        """Close the table's own connection (writers keep theirs until they end)."""
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

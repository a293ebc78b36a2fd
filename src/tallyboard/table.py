"""ResultTable: every experiment is one reproducible row, and everything logged hangs off it.

A run's row records what is needed to run it again (config content and hash, CLI, command line,
git commit and diff). `unique_columns`, fixed when the table is created, stops the same
configuration from being run twice by accident: the check treats NULL as a value, ignores hidden
and failed runs (so a failed run can be re-run), and happens in the same transaction as the insert,
so two processes racing to start the same run create one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, NamedTuple, cast

from tallyboard import query as query_api
from tallyboard.errors import DuplicateRunError, NotFoundError, ReadOnlyTableError, StoreError
from tallyboard.exchange.target import require_existing
from tallyboard.filter import run_cell
from tallyboard.media import open_png
from tallyboard.run import capture, left_out
from tallyboard.run import context as run_context
from tallyboard.run.exit_paths import arm_signals
from tallyboard.run.sink import DEFAULT_COMMIT_INTERVAL, NullSink, Sink, sink_for
from tallyboard.run.start import (
    DEFAULT_ON_DUPLICATE,
    NoCommitAction,
    OnDuplicate,
    RunRequest,
    deepboard_keys,
    on_duplicate_choice,
    run_fields,
    unique_column_names,
    unique_key,
)
from tallyboard.run.view import RunView, deepboard_color
from tallyboard.run.writer import LogWriter, let_go
from tallyboard.store import Access, Column, Quarantined, Store, open_store
from tallyboard.store.alert_content import KIND, LEVELS, Alert, check_level, encode
from tallyboard.store.artifacts import location_for
from tallyboard.store.cursor import ReadCursor
from tallyboard.store.location import Location, LocationLike
from tallyboard.store.records import (
    DEBUG_RUN_ID,
    Batch,
    ConsoleLine,
    QueuedRepetition,
    QueuedText,
    ResumePoint,
)
from tallyboard.store.run_fields import DEFAULT_UNIQUE_COLUMNS, RunRow
from tallyboard.store.series import DEFAULT_CHUNK_ROWS
from tallyboard.values import check_text

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is new in Python 3.11; we support 3.10

    from tallyboard.alerts.rules import Rule
    from tallyboard.analysis.comparison import Comparison
    from tallyboard.analysis.runs_listing import RunsView
    from tallyboard.store.records import ArtifactRow
    from tallyboard.store.spool import SpoolStore

DISABLED_RUN_ID = -2


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


RESUME_SHIP_WAIT = 30.0  # seconds `resume_run` through a spool waits for the spool to ship first


class ResultTable:
    """The result table in a SQLite file (created if missing) or a `postgresql://` database; with
    `spool`, logged into that node-local SQLite file first and shipped to the database from there
    (store/spool.py; `spool=None` takes $TALLYBOARD_SPOOL, `spool=False` never spools). An
    `http(s)://` URL is a tallyboard server (`tallyboard serve DB --accept-writes`): logged to
    through a spool always (by default one per server in the user's cache folder), with the write
    `token` (None: $TALLYBOARD_TOKEN); docs/server.md.
    `location` is where it is (`store.Location`): its `str()` (and `db_path`) never shows a
    password, so no message, log line or progress bar about the table can print one.

    What a run captures of its git checkout is bounded: each git command may take `git_timeout`
    seconds (a command cut off is a warning at `new_run` naming what the run lacks), and the
    stored diff `max_diff_bytes` (None: $TALLYBOARD_MAX_DIFF_BYTES, else 10 MB; the files past it
    are listed in `get_left_out`).

    `on_duplicate` is what `new_run` does when a visible, non-failed run has the same unique
    columns and code (commit and diff): "new" (the default) starts a new run marked as a rerun of
    that one (`rerun_of`), which the statistics group with it; "repeat" makes the launch that run's
    next repetition; "raise" refuses with `DuplicateRunError`, DeepBoard's rule. A new run's
    `on_duplicate` overrides it for that run.

    `read_only=True` opens an existing table only to read it (what the reading commands do): it
    creates nothing, migrates nothing and writes nothing, and every method that would write raises
    `ReadOnlyTableError`. `create=False` opens an existing table to write, but never makes a new one
    (`tallyboard migrate`). Either way a missing file is a FileNotFoundError. Every `tallyboard`
    command is one method of this class (the table commands, below).

    `rules` (tallyboard.alerts) are added to every run this table starts or resumes (docs/alerts.md)."""

    def __init__(
        self,
        db_path: LocationLike | None = None,
        nocommit_action: NoCommitAction = NoCommitAction.WARN,
        unique_columns: tuple[str, ...] | None = None,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL,
        artifacts: str | os.PathLike[str] | None = None,
        spool: str | os.PathLike[str] | Literal[False] | None = None,
        read_only: bool = False,
        create: bool = True,
        max_diff_bytes: int | None = None,
        git_timeout: float = capture.GIT_TIMEOUT_S,
        rules: Sequence[Rule] = (),
        token: str | None = None,
        on_duplicate: OnDuplicate = DEFAULT_ON_DUPLICATE,
    ) -> None:
        self.on_duplicate = on_duplicate_choice(on_duplicate)
        if db_path is None:  # $TALLYBOARD_URL lets a cluster point every job at one table
            db_path = os.environ.get("TALLYBOARD_URL") or "results.db"
        self.location = Location.of(db_path)  # str() hides a password; only connecting sees it
        self.nocommit_action = NoCommitAction(nocommit_action)
        self.commit_interval = commit_interval
        self.read_only = read_only
        if not git_timeout > 0:
            raise ValueError(f"git_timeout must be a number of seconds above 0, got {git_timeout!r}")
        self.git_limits = capture.GitLimits(git_timeout, capture.diff_cap(max_diff_bytes))
        self.rules = list(rules)  # tallyboard.alerts rules every run of this table starts with
        wanted = None if unique_columns is None else unique_column_names(unique_columns)
        self._refuse_unusable_location(bool(spool), create)
        # Where `log_artifact` copies files: a folder or an fsspec URL; by default `results.db` ->
        # `results.artifacts/`; None for PostgreSQL unless configured (store/artifacts.py).
        self.artifacts = location_for(self.location, artifacts)
        self.spool = self._spool_in_front(spool, wanted, token)
        self._store = self._open_store(wanted, create)
        self.unique_columns = self._stored_unique_columns(wanted)
        if not read_only:
            arm_signals()  # from the main thread, so that runs of any thread are ended on SIGTERM

    @property
    def db_path(self) -> str:
        """DeepBoard's name of the location, as text: a SQLite file's path as given (for
        `os.path.exists` or `sqlite3.connect`), a PostgreSQL URL without its password (it is for
        showing; `location` opens the table again, password included: `ResultTable(t.location)`)."""
        return str(self.location)

    def _refuse_unusable_location(self, spooled: bool, create: bool) -> None:
        """Before anything is opened (so nothing is created): a table to read or reopen must exist,
        a SQLite file to log into must be writable, and a table opened to read has no spool."""
        if spooled and self.read_only:
            raise ValueError("a spool is where runs are logged: a read_only table has none")
        if self.location.is_http and self.read_only:
            raise ValueError(
                f"{self.location} is a tallyboard server, which is logged to, not read from: open its"
                " dashboard, or read the table it serves (its file or database) directly"
            )
        if self.read_only or not create:
            require_existing(self.location)
        elif self.location.sqlite_path is not None:
            require_writable_file(self.location.sqlite_path)

    def _spool_in_front(
        self,
        spool: str | os.PathLike[str] | Literal[False] | None,
        wanted: tuple[str, ...] | None,
        token: str | None,
    ) -> str | None:
        """The node-local spool runs are logged into, if any ($TALLYBOARD_SPOOL unless `spool` is
        given; docs/cluster.md; always one for a tallyboard server: docs/server.md). With one,
        `location` becomes the spool's, and its shipper to the database or server is started."""
        if spool is None and not self.read_only:
            spool = os.environ.get("TALLYBOARD_SPOOL") or None
        if self.location.is_http:
            from tallyboard.store.http_shipping import default_spool

            if spool is False:
                raise ValueError(f"{self.location} is a tallyboard server: it is logged to through a spool")
            spool = spool or default_spool(self.location)
            token = token if token is not None else os.environ.get("TALLYBOARD_TOKEN") or None
        if not spool:
            return None
        from tallyboard.store import spool as spool_module
        from tallyboard.store.spool_shipper import shipper_for

        path = os.path.abspath(os.fspath(spool))
        require_writable_file(path)
        unique = DEFAULT_UNIQUE_COLUMNS if wanted is None else wanted
        uploaded = None
        if self.location.is_http:  # a server's client keeps its files by its spool; its shipper uploads them
            self.artifacts = uploaded = self.artifacts or str(Path(path).with_suffix(".artifacts"))
        self.location = spool_module.location(path, self.location, unique, token, uploaded)
        shipper_for(path)
        return path

    def _open_store(self, wanted: tuple[str, ...] | None, create: bool) -> Store:
        if not create and not self.read_only:  # a table must be there: look without writing first
            open_store(self.location, access=Access.READ).close()
        access = Access.READ if self.read_only else Access.WRITE
        return open_store(self.location, DEFAULT_UNIQUE_COLUMNS if wanted is None else wanted, access)

    def _stored_unique_columns(self, wanted: tuple[str, ...] | None) -> tuple[str, ...]:
        """The unique columns the table was created with; asking for others is an error."""
        stored = tuple(json.loads(self._store.meta("unique_columns") or "[]"))
        if wanted is not None and set(wanted) != set(stored):
            self._store.close()
            raise StoreError(
                f"unique columns {wanted} do not match the ones this table was created with, {stored}; "
                f"open it with ResultTable({self.db_path!r}, unique_columns={stored}) or use a new table"
            )
        return stored

    def _refuse_if_read_only(self, what: str) -> None:
        """Raise `ReadOnlyTableError` before a write is attempted on a table opened to read."""
        if self.read_only:
            raise ReadOnlyTableError(
                f"cannot {what}: ResultTable({self.db_path!r}) was opened with read_only=True, which "
                "never writes; open it without read_only to change it"
            )

    # ---- starting runs ------------------------------------------------------------------------
    def _start(self, request: RunRequest, debug: bool) -> LogWriter:
        """What new_run and new_debug_run share; a debug run skips git and uniqueness."""
        self._refuse_if_read_only("start a run")
        if request.disable:
            return LogWriter(
                self._store, NullSink(), DEBUG_RUN_ID if debug else DISABLED_RUN_ID, disable=True
            )
        request.check_counts()
        run_context.check(request.capture_console)
        fields = run_fields(request, self.nocommit_action, None if debug else self.git_limits)
        on_duplicate = self.on_duplicate if request.on_duplicate is None else request.on_duplicate
        if not debug:
            fields["unique_key"] = unique_key(fields, self.unique_columns, request.unique)
        try:
            run_id = self._store.create_run(fields, debug=debug, durable=False, rerun=on_duplicate == "new")
        except DuplicateRunError as duplicate:
            if on_duplicate != "repeat":
                raise
            return self._repeat(duplicate.run_id, request)
        sink = sink_for(self.location, self.commit_interval)
        sink.put("repetitions", QueuedRepetition(run_id, 0, fields["start_time"]))  # see create_run
        writer = self._writer(sink, run_id, request.keep_each, request.auto_log_plt, request.system_metrics)
        run_context.attach(writer, request.capture_console, request.environment)
        return writer

    def _repeat(self, run_id: int, request: RunRequest) -> LogWriter:
        """`on_duplicate="repeat"`: the launch logs the next repetition of run `run_id`, which is
        running again meanwhile (a writer of it still open in this process is let go first). Its
        environment stays the one its first launch recorded."""
        writer = self._reopened(
            run_id, request.keep_each, request.auto_log_plt, request.system_metrics, False
        )
        writer.new_repetition()
        run_context.attach(writer, request.capture_console, environment=False)
        return writer

    def _reopened(
        self, run_id: int, keep_each: int, auto_log_plt: bool, system_metrics: bool, check: bool
    ) -> LogWriter:
        """The writer of run `run_id` set running again (`Store.reopen_run`, `check` its uniqueness)."""
        sink = sink_for(self.location, self.commit_interval)
        try:
            let_go(sink, run_id)
            point = self._store.reopen_run(run_id, check)
        except BaseException:
            sink.release(run_id)
            raise
        return self._writer(sink, run_id, keep_each, auto_log_plt, system_metrics, point)

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
            from tallyboard.run import system_metrics as metrics

            writer.before_end(metrics.start(writer).stop)
        for rule in self.rules:
            writer.add_rule(rule)
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
        on_duplicate: OnDuplicate | None = None,
    ) -> LogWriter:
        """Start a run and return its writer. When a visible, non-failed run has the same unique
        columns and code, `on_duplicate` (None: the table's, "new" by default) says what happens:
        a "new" run marked as its rerun, its next repetition ("repeat"), or `DuplicateRunError`
        ("raise"). `flush_each` is accepted for DeepBoard compatibility: commits
        happen every `commit_interval` seconds instead, which bounds what a crash can lose by time.

        `unique=False` skips the check for this run, and later runs are not compared with it: each
        launch of a training script is a run of its own, the way framework loggers count versions.
        A mapping (e.g. the hyperparameters) is checked too: same columns and same mapping is a
        duplicate. `capture_console` tees stdout, stderr and `logging` into the run until it ends
        (run/console.py); `environment` records the interpreter, machine, packages and allowlisted
        variables (run/environment.py)."""
        request = RunRequest(
            experiment_name, configfile, cli, comment, tag, flush_each=flush_each, keep_each=keep_each,
            auto_log_plt=auto_log_plt, disable=disable, system_metrics=system_metrics, unique=unique,
            capture_console=capture_console, environment=environment,
            on_duplicate=None if on_duplicate is None else on_duplicate_choice(on_duplicate),
        )  # fmt: skip
        return self._start(request, debug=False)

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
        request = RunRequest(
            experiment_name, configfile, cli, comment, tag, flush_each=flush_each, keep_each=keep_each,
            auto_log_plt=auto_log_plt, disable=disable, system_metrics=system_metrics,
            capture_console=capture_console, environment=environment,
        )  # fmt: skip
        return self._start(request, debug=True)

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
        if self.spool is not None:
            return self._resumed_through_spool(run_id, keep_each, auto_log_plt, system_metrics)
        self._require(run_id)
        return self._reopened(run_id, keep_each, auto_log_plt, system_metrics, True)

    def _resumed_through_spool(
        self, run_id: int, keep_each: int, auto_log_plt: bool, system_metrics: bool
    ) -> LogWriter:
        """`resume_run` through a spool: `run_id` is the database's (or server's) id, reopened
        there at once, after what the spool holds has shipped (so where the run stopped counts
        it); the writer's run is the spool's copy of it (docs/server.md, "Resuming a run")."""
        from tallyboard.store.spool import SpoolStore
        from tallyboard.store.spool_shipper import reopen_run, shipper_for

        assert self.spool is not None
        spool = cast(SpoolStore, self._store)
        if spool.backlog()[0] and not shipper_for(self.spool).wait(RESUME_SHIP_WAIT):
            raise StoreError(
                f"cannot resume run {run_id}: what the spool {self.spool} holds has not reached"
                f" {spool.bound_to()[0]} within {RESUME_SHIP_WAIT:.0f} s (is it out of reach?)"
            )
        local_id, point = reopen_run(spool, run_id)
        sink = sink_for(self.location, self.commit_interval)
        return self._writer(sink, local_id, keep_each, auto_log_plt, system_metrics, point)

    def load_run(self, run_id: int) -> RunView:
        """An existing run, to read what it logged (and edit its note, tag, colour, tags, status)."""
        self._require(run_id)
        return RunView(self._store, run_id)

    # ---- reading the table ----------------------------------------------------------------------
    def _require(self, run_id: int) -> RunRow:
        row = self._store.run(run_id)
        if row is None:
            raise NotFoundError(f"no run with id {run_id}")
        return row

    def get_results(self, run_id: int | None = None, show_hidden: bool = False) -> TableTuple:
        """The shown columns (in display order) and one row per run, hparams and results included;
        colours (`row_color`, a shown `color` column) as DeepBoard gives them, without '#'."""
        rows = self._store.runs(run_id=run_id, show_hidden=show_hidden or run_id is not None)
        hparams, results = self._store.values("hparams", run_id), self._store.values("results", run_id)
        tags = self._store.run_tags(run_id)
        shown = [c for c in self._store.columns() if c.position is not None]
        data = []
        for row in rows:
            cells = {**row._asdict(), "color": deepboard_color(row.color), "tags": tags.get(row.run_id)}
            cells.update(hparams=hparams.get(row.run_id, {}), results=results.get(row.run_id, {}))
            data.append([run_cell(cells, c.name) for c in shown])
        return TableTuple(
            col_names=[c.alias for c in shown],
            col_ids=[c.name for c in shown],
            is_hparam=[c.kind == "hparam" for c in shown],
            row_color=[deepboard_color(row.color) for row in rows],
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

    def alerts(
        self, run_id: int | None = None, level: str | None = None, since: float | None = None
    ) -> list[Alert]:
        """The alerts of one run (or of every run), oldest first; `level` keeps one level and
        those above it ('warn': warnings and errors), `since` those from that time on (seconds
        since the Unix epoch)."""
        lowest = 0 if level is None else LEVELS.index(check_level(level))
        return [
            alert
            for alert in self._store.alerts(run_id)
            if LEVELS.index(alert.level) >= lowest and (since is None or alert.time >= since)
        ]

    def record_alert(self, alert: Alert) -> None:
        """Write `alert` into its run at once, from outside the process logging it (`tallyboard
        watch`): the run's own alerts come through its writer."""
        self._refuse_if_read_only("record an alert")
        self._require(alert.run_id)
        text = QueuedText(alert.run_id, alert.title, alert.rep, alert.step, None, 0.0, KIND, encode(alert))
        self._store.write_batch(Batch(texts=[text]))

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
        from tallyboard.analysis import comparison

        names = [by] if isinstance(by, str) else list(by)
        known = {row.run_id: row.rerun_of for row in self._store.runs(show_hidden=True)}
        chosen = run_ids if run_ids is not None else [row.run_id for row in self._store.runs()]
        missing = [run_id for run_id in chosen if run_id not in known]
        if missing:
            raise NotFoundError(f"no run with id {missing[0]}")
        hparams = self._store.values("hparams")
        runs = comparison.with_originals(
            {run_id: hparams.get(run_id, {}) for run_id in chosen},
            known,
            lambda run_id: hparams.get(run_id, {}),
        )

        def points() -> list[tuple[int, int, float | None]]:
            return [
                (run_id, rep, value)
                for run_id in runs
                for rep, value in self._store.scalars(run_id, metric, columns=("rep", "value"))
            ]

        how = comparison.Summary(summary, k, goal)
        samples = comparison.run_samples(metric, runs, self._store.values("results"), points, how)
        if not samples:
            raise NotFoundError(f"none of these runs logged a scalar or result named {metric!r}")
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
        names (`config`, `start`, `commit_hash`, `diff`), so code written for DeepBoard reads it;
        `color` as DeepBoard stores it, without '#'."""
        row = self._require(run_id)
        return {**row._asdict(), **deepboard_keys(row), "color": deepboard_color(row.color)}

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

    def logged_table(self, run_id: int, tag: str, step: int | None = None, backend: str | None = None) -> Any:
        """A table the run logged (`LogWriter.add_table`, W&B's `wandb.Table`, `mlflow.log_table`)
        as a DataFrame: the last one logged as `tag`, or the last at `step`. `KeyError` names the
        run's tables when it has no such one."""
        self._require(run_id)
        return query_api.logged_table(self._store, run_id, tag, step, backend)

    @property
    def cursor(self) -> ReadCursor:
        """DeepBoard's `with table.cursor as cursor:`: a DB-API cursor on the table's database, on a
        connection of its own, closed when the block ends. Read-only, unlike DeepBoard's: a row
        written by hand would skip what the writer keeps consistent with it (store/cursor.py)."""
        return ReadCursor(self._store)

    @property
    def dict_cursor(self) -> ReadCursor:
        """`cursor` whose rows are read by column name (`sqlite3.Row`, as DeepBoard's; dicts on
        PostgreSQL)."""
        return ReadCursor(self._store, as_dict=True)

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
        """The distinct colours of the runs, as DeepBoard gives them (without '#')."""
        colors = {deepboard_color(row.color) for row in self._store.runs(show_hidden=True) if row.color}
        return sorted(color for color in colors if color)

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

    # ---- the table commands: one method per `tallyboard` command (cli/main.py is their skin) ----
    def runs_table(self, filter: str | None = None, show_hidden: bool = False) -> RunsView:
        """`tallyboard runs`: every run's fields, tags, hparams and results (`.rows`, JSON-ready) and
        the columns a terminal shows (`.columns`); `filter` is the dashboard's filter language.
        `runs_listing.format_runs(view)` is the aligned text table the command prints."""
        from tallyboard.analysis.runs_listing import load_runs

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
        destination: LocationLike,
        artifacts: str | os.PathLike[str] | None = None,
        artifacts_to: str | os.PathLike[str] | None = None,
        progress: bool = False,
    ) -> dict[str, int]:
        """`tallyboard copy`: every row into `destination` (a file or URL, created if missing),
        losslessly; copying twice changes nothing. The artefacts' files go from `artifacts` (else
        the table's store) to `artifacts_to` (else the one next to a SQLite destination). Returns the
        rows copied per table, and the artefact files copied."""
        from tallyboard.store.artifacts import plan_carry
        from tallyboard.store.copy import copy_table

        target = Location.of(destination)
        to = None if artifacts_to is None else os.fspath(artifacts_to)
        carry = plan_carry(self.location, target, self._artifacts_or(artifacts), to)  # before any row
        counts = copy_table(self.location, target, progress=progress)
        if carry is not None:
            counts["artefact files"] = carry.run(progress=progress)
        return counts

    def list_artifacts(self, run_id: int) -> list[ArtifactRow]:
        """`tallyboard artifacts list`: the files kept with run `run_id` (`run.log_artifact`)."""
        self._require(run_id)
        return self._store.artifacts(run_id)

    def save_artifact(self, run_id: int, name: str, to: str | os.PathLike[str]) -> ArtifactRow:
        """`tallyboard artifacts get`: save the artefact `name` of run `run_id` as the file `to`
        (checked against its sha256); returns its row. ArtifactError names the run's artefacts
        when it has no such one."""
        from tallyboard.store import artifacts as files

        self._require(run_id)
        row = files.find(self._store, run_id, name)
        files.save_to(files.open_blobs(files.require_location(self.artifacts)), row.sha256, Path(to))
        return row

    def migrate(self) -> tuple[int | None, int | None]:
        """`tallyboard migrate`: bring a table written by an older tallyboard to this version now
        (the first write does it too); returns the schema versions (before, after)."""
        self._refuse_if_read_only("migrate")
        before = self._store.schema_version
        self._store.ready_for_writing()
        return before, self._store.schema_version

    def _import_target(self, what: str) -> Location:
        """Where an import writes: this table's database itself (runs keep the ids the import gives them)."""
        self._refuse_if_read_only(f"import {what}")
        if self.spool is not None:
            raise ValueError(
                f"cannot import {what} through a spool: imports write into the database itself; "
                "open the table without a spool (spool=False) to import"
            )
        return self.location

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
        """Import `source` with the importer registered under the name `importer` (exchange/importers.py: an
        entry point of the `tallyboard.exchange.importers` group, ours or another package's), passing it
        `options`; returns what it returns. Importing the same source twice adds nothing."""
        from tallyboard.exchange import importers

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

    def _artifacts_or(self, location: str | os.PathLike[str] | None) -> str | None:
        return self.artifacts if location is None else os.fspath(location)

    # ---- the spool (store/spool.py) ------------------------------------------------------------
    def ship(self, timeout: float = 30.0) -> bool:
        """With a spool: wait until everything logged so far (the open runs' queues are flushed
        into the spool first) is in the database or on the server; False if that took longer than
        `timeout` (it ships later, on its own). Without one: True at once."""
        if self.spool is None:
            return True
        from tallyboard.run.sink import all_sinks
        from tallyboard.store.spool_shipper import shipper_for

        for sink in all_sinks():
            if sink.key == self.location:  # the spool's writer: what it holds goes in first
                with contextlib.suppress(RuntimeError):  # one stopped when idle holds nothing
                    sink.flush()

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

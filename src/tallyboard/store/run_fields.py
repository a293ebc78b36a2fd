"""The one description of a run row: every column of `runs`, its type, and what it is for.

Why one place: the schema's `columns` rows, the store's SELECTs and edits, the dashboard's runs
table, the query API, the lossless export and the uniqueness check each need a list of run
fields. Written down separately they drifted (two lists named `RUN_FIELDS` with different
contents); derived from `RUN_ROW` they cannot. Order is the order of `runs`' columns in the result
table's `columns` rows, which a new table shows in that order.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any, NamedTuple, get_type_hints

from tallyboard.filter import qualified
from tallyboard.store.schema import RUN_END_AND_RERUNS_STEP, WINDOW_TAGS_STEP

V13 = RUN_END_AND_RERUNS_STEP + 1  # the version that added `error` and `rerun_of` (renumber in schema.py)
V15 = WINDOW_TAGS_STEP + 1  # the version that added `window_tags`


class RunField(NamedTuple):
    """One column of `runs`.

    alias/position: its title and default place in the result table (`columns` rows; position
      None = hidden by default); alias None: not a column of the result table (bookkeeping).
    editable: a user may change it after the run started (`Store.update_run`, the dashboard).
    null_when_empty: an empty value is stored as NULL (schema v4), so `note == null` finds it.
    unique: it may be one of the table's unique columns (`ResultTable(unique_columns=...)`).
    cell: short enough for a cell of the runs table (the dashboard lists runs with these).
    long: text that can run to megabytes (a config file, a diff): left out of run queries.
    since: the schema version that added it (a table read as it is, older, answers NULL for it).
    """

    name: str
    type: type
    nullable: bool
    alias: str | None
    position: int | None = None
    editable: bool = False
    null_when_empty: bool = False
    unique: bool = False
    cell: bool = False
    long: bool = False
    since: int = 1


RUN_ROW: tuple[RunField, ...] = (
    RunField("run_id", int, False, "Run ID", 0, cell=True),
    RunField("experiment", str, False, "Experiment", 1, unique=True, cell=True),
    RunField("tag", str, True, "Tag", 2, editable=True, null_when_empty=True, unique=True, cell=True),
    RunField("config_path", str, True, "Config", 3, unique=True, cell=True),
    RunField("comment", str, True, "Comment", 4, unique=True, cell=True),
    RunField("config_hash", str, True, "Config Hash", unique=True, cell=True),
    RunField("cli", str, True, "Cli", unique=True),
    RunField("command", str, True, "Command", unique=True),
    RunField("note", str, True, "Note", editable=True, null_when_empty=True, cell=True),
    RunField("color", str, True, "Color", editable=True, cell=True),
    RunField("status", str, False, "Status", editable=True, cell=True),
    RunField("start_time", float, False, "Start", cell=True),
    RunField("end_time", float, True, "End", editable=True, cell=True),
    RunField("git_commit", str, True, "Commit", unique=True),
    RunField("git_diff", str, True, "Diff", unique=True, long=True),
    RunField("hidden", int, False, "Hidden", editable=True, cell=True),
    RunField("config_content", str, True, None, long=True),
    RunField("unique_key", str, True, None),
    RunField("updated_at", float, False, None),
    # How the run failed (v13): JSON {"type", "message", "traceback"}, set when it ends (run/exit_paths.py).
    RunField("error", str, True, None, editable=True, long=True, since=V13),
    # The run this one runs again (v13): `new_run(on_duplicate="new")` met run N's configuration.
    RunField("rerun_of", int, True, "Rerun Of", cell=True, since=V13),
    # The tags whose steps count Stat windows (v15): a JSON array, set by ResultTableEventHandler.
    RunField("window_tags", str, True, None, editable=True, since=V15),
)
FIELDS = {field.name: field for field in RUN_ROW}


class RunRow(NamedTuple):
    """One row of `runs` as the store answers it (`Store.runs`, `Store.run`): every field of
    `RUN_ROW`, in its order, with its type (`T | None` where nullable). Written out, not generated,
    so that type checkers see the fields; `check_record` holds it to `RUN_ROW` when this module loads."""

    run_id: int
    experiment: str
    tag: str | None
    config_path: str | None
    comment: str | None
    config_hash: str | None
    cli: str | None
    command: str | None
    note: str | None
    color: str | None
    status: str
    start_time: float
    end_time: float | None
    git_commit: str | None
    git_diff: str | None
    hidden: int
    config_content: str | None
    unique_key: str | None
    updated_at: float
    error: str | None
    rerun_of: int | None
    window_tags: str | None


def check_record(record: type, fields: tuple[RunField, ...]) -> None:
    """Raise TypeError unless `record` declares exactly `fields`: same names, order, types, nullability."""
    declared = get_type_hints(record)
    described = {f.name: f.type | None if f.nullable else f.type for f in fields}
    if list(declared.items()) != list(described.items()):
        raise TypeError(f"{record.__name__} declares {declared}, but RUN_ROW describes {described}")


check_record(RunRow, RUN_ROW)

# Every column of `runs`, in order: what `Store.runs` returns and a copy carries.
RUN_FIELDS = tuple(FIELDS)
# The result table's run columns, as (name, alias, default position): the `columns` rows of a new table.
RUN_COLUMNS = tuple((f.name, f.alias, f.position) for f in RUN_ROW if f.alias is not None)
EDITABLE_RUN_FIELDS = frozenset(f.name for f in RUN_ROW if f.editable)
NULL_WHEN_EMPTY = tuple(f.name for f in RUN_ROW if f.null_when_empty)
UNIQUE_CANDIDATES = tuple(f.name for f in RUN_ROW if f.unique)
# A new table's unique columns, in the order its unique keys list their values (never reorder:
# a stored key would no longer match).
DEFAULT_UNIQUE_COLUMNS = ("experiment", "config_path", "config_hash", "cli", "comment", "tag")
# The fields of a runs listing (the dashboard's runs table and live views): cells, and `updated_at`.
LISTED_FIELDS = (*(f.name for f in RUN_ROW if f.cell), "updated_at")
# Everything a run's page shows: all but the bookkeeping of uniqueness.
DETAIL_FIELDS = tuple(name for name in RUN_FIELDS if name != "unique_key")


# Names of the run columns a table shows (its fields and `tags`): an hparam or result of one of
# these names is the column `hparams.NAME` / `results.NAME` (see `value_key`).
COLUMN_NAMES = frozenset((*RUN_FIELDS, "tags"))


def value_key(table: str, name: str) -> str:
    """The column key of hparam or result `name` (`table` 'hparams' or 'results'): the name itself,
    or `table.name` when a run column has that name, or the name itself reads as qualified
    (filter.qualified). So any name may be an hparam, and none hides a run column: one rule for
    the runs table, the filter language, the query API and every adapter."""
    if name in COLUMN_NAMES or qualified(name)[0] is not None:
        return f"{table}.{name}"
    return name


def select_list(names: tuple[str, ...], version: int | None) -> str:
    """The SELECT list of these run fields in a table of schema `version` (None: the current one):
    a field the table is too old to have reads as NULL (reading commands leave it as it is)."""
    return ", ".join(
        name if version is None or FIELDS[name].since <= version else f"NULL AS {name}" for name in names
    )


def window_tags_text(tags: Collection[str]) -> str | None:
    """`runs.window_tags` as stored: the tags as a sorted JSON array, None when there are none."""
    return json.dumps(sorted(tags)) if tags else None


def window_tags_of(text: str | None) -> frozenset[str]:
    """The tags a stored `runs.window_tags` lists: none for NULL, and none for a text that is not a
    JSON array of strings (the column is plain text; a table edited by hand must not break a chart)."""
    try:
        tags = json.loads(text) if text else []
    except ValueError:
        return frozenset()
    listed = isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)
    return frozenset(tags) if listed else frozenset()


def typed(names: tuple[str, ...]) -> tuple[tuple[str, type, bool], ...]:
    """(name, type, nullable) of the named fields, in the order given (an export's columns)."""
    return tuple((name, FIELDS[name].type, FIELDS[name].nullable) for name in names)


def empty_text_as_null(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with an empty note or tag replaced by None, as the table stores it."""
    return {
        name: None if name in NULL_WHEN_EMPTY and value == "" else value for name, value in fields.items()
    }

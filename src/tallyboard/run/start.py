"""What a run is started with, and the row it starts as: the options of `new_run`, the captured
fields (config, CLI, command, git), the uniqueness key and what a duplicate does.

The key holds the table's unique columns and the code's state (the git commit and a hash of the
diff): a script edited since its last run is another configuration, not a duplicate. What a run
whose key is taken does is `on_duplicate` (`OnDuplicate`).

Why apart from `table.py`: `ResultTable` is the facade that opens stores and hands out writers;
deciding what a new run's row holds is the write path's first step, and the two start methods
(`new_run`, `new_debug_run`) share it through one options type, `RunRequest`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import IO, Any, Literal

from tallyboard.run import capture, git_cache
from tallyboard.store.run_fields import UNIQUE_CANDIDATES, RunRow
from tallyboard.values import check_text, to_int

# DeepBoard's names for the same columns, accepted in `unique_columns`.
DEEPBOARD_NAMES = {"config": "config_path", "commit_hash": "git_commit", "diff": "git_diff"}


# What `new_run` does when a visible, non-failed run has its unique key: "raise" `DuplicateRunError`
# (DeepBoard's rule), start a "new" run marked as a rerun of that run (`rerun_of`, grouped with it
# by the statistics), or "repeat" that run (its next repetition).
OnDuplicate = Literal["raise", "new", "repeat"]
ON_DUPLICATE: tuple[OnDuplicate, ...] = ("raise", "new", "repeat")
DEFAULT_ON_DUPLICATE: OnDuplicate = "new"


def on_duplicate_choice(value: str) -> OnDuplicate:
    """`value` if it is one of `ON_DUPLICATE`, else a ValueError naming them."""
    for choice in ON_DUPLICATE:
        if value == choice:
            return choice
    raise ValueError(f"on_duplicate must be one of {ON_DUPLICATE}, got {value!r}")


class NoCommitAction(Enum):
    """What `new_run` does when the git working tree has uncommitted changes."""

    NOP = "NOP"
    WARN = "WARN"
    RAISE = "RAISE"


@dataclass(frozen=True)
class RunRequest:
    """Everything `new_run` and `new_debug_run` are given: the run's identity (experiment, config,
    CLI, comment, tag) and how its writer behaves. `flush_each` is DeepBoard's and only checked:
    commits happen every `commit_interval` seconds instead."""

    experiment_name: str
    configfile: str | os.PathLike[str] | IO[str] | None = None
    cli: dict[str, Any] | None = None
    comment: str | None = None
    tag: str = ""
    flush_each: int = 10
    keep_each: int = 1
    auto_log_plt: bool = True
    disable: bool = False
    system_metrics: bool = False
    unique: bool | Mapping[str, Any] = True
    capture_console: bool = False
    environment: bool = True
    on_duplicate: OnDuplicate | None = None  # None: the table's

    def check_counts(self) -> None:
        for what, count in (("keep_each", self.keep_each), ("flush_each", self.flush_each)):
            if to_int(what, count) < 1:
                raise ValueError(f"{what} must be 1 or more, got {count}")


def unique_column_names(columns: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """`unique_columns` as our column names (DeepBoard's accepted); unknown names are a ValueError."""
    names = tuple(DEEPBOARD_NAMES.get(name, name) for name in columns)
    unknown = [name for name in names if name not in UNIQUE_CANDIDATES]
    if unknown:
        raise ValueError(f"invalid unique column(s) {unknown}; choose from {UNIQUE_CANDIDATES}")
    return names


def deepboard_keys(row: RunRow) -> dict[str, Any]:
    """A run row's values under DeepBoard's column names; `start` as DeepBoard's SQLite file returns
    it, the ISO text of a local datetime ('2025-01-31T12:00:00.123456')."""
    fields = row._asdict()
    keys = {deepboard: fields[ours] for deepboard, ours in DEEPBOARD_NAMES.items()}
    keys["start"] = datetime.fromtimestamp(row.start_time).isoformat()
    return keys


def run_fields(
    request: RunRequest, nocommit_action: NoCommitAction, git: capture.GitLimits | None
) -> dict[str, Any]:
    """The run's row, every text checked first (`values.check_text`): a run the database cannot
    store must not start. The git fields are captured within `git` (None: none, a debug run); what
    git did not answer in time is a warning at the caller's `new_run` line."""
    name = request.experiment_name
    if not isinstance(name, str) or not name:
        raise TypeError(f"experiment_name must be a non-empty string, got {name!r}")
    check_text("experiment_name", name)
    if request.comment is not None:
        check_text("comment", request.comment)
    if not isinstance(request.tag, str):  # '' is "no tag"
        raise TypeError(f"tag must be a str ('' for none), got {type(request.tag).__name__}")
    check_text("tag", request.tag)
    cli_text = None if request.cli is None else capture.cli_json(request.cli)
    config = None if request.configfile is None else capture.read_config(request.configfile)
    if config is not None and config.path is not None:
        check_text("configfile", config.path)
    fields: dict[str, Any] = {
        "experiment": name,
        "config_path": None if config is None else config.path,
        "config_hash": None if config is None else config.sha256,
        "config_content": None if config is None else config.content,
        "cli": cli_text,
        "command": capture.command_line(),
        "comment": request.comment,
        "tag": request.tag,
        "start_time": time.time(),
    }
    if git is not None:
        state = git_cache.CAPTURES.git_state(git)  # git itself only when the tree changed
        if state.warning is not None:
            warnings.warn(state.warning, RuntimeWarning, stacklevel=4)  # the user's new_run line
        if state.diff and nocommit_action is not NoCommitAction.NOP:
            message = "You have uncommitted changes; commit them so that this run can be reproduced."
            if nocommit_action is NoCommitAction.RAISE:
                raise RuntimeError(message)
            warnings.warn(message, RuntimeWarning, stacklevel=4)
        fields["git_commit"], fields["git_diff"] = state.commit, state.diff
    return fields


def unique_key(
    fields: dict[str, Any], unique_columns: tuple[str, ...], unique: bool | Mapping[str, Any] = True
) -> str | None:
    """The run's values of the unique columns, then the values of a `unique` mapping; None (no
    check) for a table without unique columns or when `unique` is False."""
    if not unique_columns or unique is False:
        return None

    def canonical(name: str) -> Any:
        if name == "cli" and fields["cli"] is not None:  # key order must not make runs distinct
            return json.dumps(json.loads(fields["cli"]), sort_keys=True)
        return fields.get(name)

    key = [canonical(name) for name in unique_columns]
    if isinstance(unique, Mapping) and unique:
        key.append(json.dumps(dict(unique), sort_keys=True, default=str))
    key.append({"code": code_state(fields)})
    return json.dumps(key)


def code_state(fields: dict[str, Any]) -> list[str | None]:
    """The state of the code a run starts from, as its key holds it: the git commit and the sha256
    of the diff (a hash: a diff can run to megabytes, a key is indexed by its first 256
    characters). None for each outside a repository."""
    diff = fields.get("git_diff")
    digest = None if diff is None else hashlib.sha256(diff.encode("utf-8", "surrogatepass")).hexdigest()
    return [fields.get("git_commit"), digest]

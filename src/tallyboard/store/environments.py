"""The SQL of the environments runs record (schema v12): each distinct one is stored once.

Why shared: an environment is mostly the list of installed packages (some 20 kB for 400 of them),
the same for every run that a sweep starts in one process, or that a job array starts from one
image; stored per run, it was most of what a short run wrote. Its JSON text is kept once in
`environment_contents`, named by its sha256, and `environments` links each run to one. A text
no run links to any more stays, as an artefact's bytes do: another run may be recorded in it
again, and a link is never written without its text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tallyboard.store.records import QueuedEnvironment

if TYPE_CHECKING:
    from tallyboard.store.engine import Engine

SINCE = 12  # the schema version that shares them; v8-v11 kept a copy per run in `environments`
INSERT_CONTENT = (
    "INSERT INTO environment_contents (sha256, content) VALUES (?, ?) ON CONFLICT (sha256) DO NOTHING"
)


def sha256_of(content: str) -> str:
    """The name of an environment's text: the sha256 of its UTF-8 bytes, in hex."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def insert(store: Engine, rows: Sequence[QueuedEnvironment], into: str = "environments") -> None:
    """Link each run of `rows` to its environment (a later one replaces the run's link), storing
    the text when no run had it yet; inside the caller's transaction. `into`: the table of links
    (the migration fills a new one)."""
    named = [(run_id, sha256_of(content), content) for run_id, content in rows]
    store.executemany(INSERT_CONTENT, {sha: (sha, content) for _, sha, content in named}.values())
    store.executemany(
        f"INSERT INTO {into} (run_id, sha256) VALUES (?, ?)"
        " ON CONFLICT (run_id) DO UPDATE SET sha256 = excluded.sha256",
        [(run_id, sha) for run_id, sha, _ in named],
    )


# One run's environment text (parameter: the run id), in a current table and in one of v8-v11.
READ = (
    "SELECT c.content FROM environments e JOIN environment_contents c ON c.sha256 = e.sha256"
    " WHERE e.run_id = ?"
)
READ_UNSHARED = "SELECT content FROM environments WHERE run_id = ?"


def read_sql(version: int | None) -> str:
    """`READ` for a table of schema `version` (an older one, opened only to read, is read as it is)."""
    return READ_UNSHARED if version is not None and version < SINCE else READ

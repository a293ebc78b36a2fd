"""What is at a result-table location, found out without writing to it, and what may be done there.

Why a module of its own: every command opens a table, and "who may create or migrate one" must be
the same rule for all of them. A command that only reads must leave whatever it is pointed at
byte for byte as it was: an unrelated SQLite file, a DeepBoard table, a typo'd path or an empty
PostgreSQL database is told apart *before* anything is opened for writing, and named in the error.

The three ways of opening a table (`Access`):
- READ (`runs`, `export`, `serve --read-only`, the source of `copy`): never writes. SQLite is
  opened with `mode=ro`, PostgreSQL in read-only transactions; an older schema is read as it is.
- EDIT (`serve`): an existing table at this schema version, whose rows the browser may edit;
  nothing is created or migrated (an older table gets a message naming `tallyboard migrate`).
- WRITE (`ResultTable`, `import --into`, the target of `copy`, the sink, `demo`, `migrate`):
  creates a table where there is nothing (no file, an empty file, a SQLite database without
  tables, a PostgreSQL schema without our tables); an older table is migrated by the first write.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit, urlunsplit

from tallyboard.errors import NotAResultTable
from tallyboard.store.schema import SCHEMA_VERSION

DEEPBOARD_TABLES = frozenset({"experiments", "results", "logs"})  # SQLite names ignore case
MAX_LISTED_TABLES = 5
NO_FILE = "no file"


def is_postgres_url(url_or_path: str | os.PathLike[str]) -> bool:
    """Whether a location names a PostgreSQL database (a URL) rather than a SQLite file (a path)."""
    return isinstance(url_or_path, str) and url_or_path.startswith(("postgresql://", "postgres://"))


def redacted(url_or_path: str | os.PathLike[str]) -> str:
    """The location as messages and logs may show it: a PostgreSQL URL's password (in the user
    part or as `password=` in the query) replaced by `***`. Errors end up in CI logs, terminals
    and bug reports; a password must not travel with them."""
    text = os.fspath(url_or_path)
    if not is_postgres_url(text):
        return text
    parts = urlsplit(text)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}"
    query = "&".join(
        f"{name}=***" if name.lower() == "password" else pair
        for pair in parts.query.split("&")
        for name in [pair.partition("=")[0]]
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query if parts.query else ""))


class Access(Enum):
    """How a table is opened (see the module docstring)."""

    READ = "read"
    EDIT = "edit"
    WRITE = "write"


class Kind(Enum):
    """What was found at a location."""

    NOTHING = "nothing"  # no file, an empty file or database: a table may be created there
    TABLE = "table"  # a tallyboard result table (of `Found.version`)
    DEEPBOARD = "deepboard"
    OTHER = "other"  # a SQLite database of something else, or not a SQLite file at all


@dataclass(frozen=True)
class Found:
    """What is at `location`: its kind, the schema version of a table, and in words what it is."""

    location: str
    kind: Kind
    what: str
    version: int | None = None

    def check(self, access: Access) -> None:
        """Raise unless a table may be opened at this location with `access`.

        FileNotFoundError for a missing SQLite file that is only to be read, `NotAResultTable`
        (one line saying what is there instead, or which command helps) otherwise."""
        where = redacted(self.location)
        if self.kind is Kind.DEEPBOARD:
            raise NotAResultTable(
                f"{where!r} is a DeepBoard table, not a tallyboard one: import it with "
                f"`tallyboard import deepboard {where} --into results.db` (nothing was changed)"
            )
        if self.kind is Kind.OTHER:
            raise NotAResultTable(
                f"{where!r} is not a tallyboard result table: it is {self.what} (nothing was changed)"
            )
        if self.kind is Kind.NOTHING:
            if access is Access.WRITE:
                return
            if self.what == NO_FILE:
                raise FileNotFoundError(
                    f"no result table at {where!r}: the file does not exist (nothing was created)"
                )
            raise NotAResultTable(
                f"{where!r} holds no result table ({self.what}; nothing was created): "
                "log a run into it or `tallyboard import` one first"
            )
        assert self.version is not None
        if self.version > SCHEMA_VERSION:
            raise NotAResultTable(
                f"{where} has schema version {self.version}, but this tallyboard reads versions up to "
                f"{SCHEMA_VERSION}: upgrade tallyboard to open it"
            )
        if access is Access.EDIT:
            require_current(self.location, self.version, "the dashboard")


def require_current(location: str, version: int | None, who: str) -> None:
    """Raise when a table at `version` is too old for `who` (which reads the current schema only)."""
    if version is not None and version < SCHEMA_VERSION:
        location = redacted(location)
        raise NotAResultTable(
            f"{location} has schema version {version} and {who} needs version {SCHEMA_VERSION}: "
            f"migrate it with `tallyboard migrate {location}` (nothing was changed)"
        )


def describe_sqlite_path(path: str) -> Found | None:
    """What the file system alone tells about `path` (no file, a directory, an empty file), or None
    when SQLite must look at it (`describe_sqlite_tables`).

    Only `stat`: opening and closing the file here would drop every POSIX lock this process holds
    on it (a lock belongs to the process, not to the descriptor), and a SQLite connection of this
    process that lost its lock may see its WAL deleted under it by another process."""
    if not os.path.lexists(path):
        return Found(path, Kind.NOTHING, NO_FILE)
    if os.path.isdir(path):
        return Found(path, Kind.OTHER, "a directory")
    if os.path.getsize(path) == 0:
        return Found(path, Kind.NOTHING, "an empty file")
    return None


NOT_SQLITE = "a file that is not a SQLite database"


def describe_sqlite_tables(path: str, tables: list[str], schema_version: str | None) -> Found:
    """What a SQLite database is, from its table names and (if it has one) our `meta` version."""
    names = {name.lower() for name in tables}
    if not tables:
        return Found(path, Kind.NOTHING, "an empty SQLite database")
    if {"meta", "runs"} <= names and schema_version is not None:
        return Found(path, Kind.TABLE, "a result table", int(schema_version))
    if names >= DEEPBOARD_TABLES:
        return Found(path, Kind.DEEPBOARD, "a DeepBoard table")
    listed = ", ".join(sorted(tables)[:MAX_LISTED_TABLES])
    if len(tables) > MAX_LISTED_TABLES:
        listed += ", ..."
    return Found(path, Kind.OTHER, f"another SQLite database (tables: {listed})")

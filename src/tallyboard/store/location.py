"""A result table's location: the value that names it, and what is at it, found out without writing.

`Location` is what the user typed -- a SQLite file's path, a `postgresql://` URL, a tallyboard
server's `http(s)://` URL (logged to through a spool: store/http_shipping.py) or `spool:PATH`
(store/spool.py) -- parsed once where it enters (ResultTable, the CLI, copy, serve, the spool).
Why a value of its own: a URL may carry a password, and a location ends up in errors, log lines,
progress bars and the dashboard's start line, which end up in CI logs, terminals and bug reports.
Its `str()` and `repr()` hide the password (`postgresql://alice:***@db/results`), as SQLAlchemy's
`URL` does, so no message can print it whatever its author remembered; `secret()` hands out the
full text, to the connect call (store/pg_session.py) and to the spool that must reach the database
later. It is not a `str` subclass: concatenation, `json.dumps` or `os.fspath` of one would hand the
secret out without anyone asking for it. libpq's own errors may quote parts of the URL (a token it
cannot percent-decode is quoted whole); `scrub` removes the password from such a message.

Why "who may create or migrate a table" lives here too: every command opens a table, and the rule
must be the same for all of them. A command that only reads must leave whatever it is pointed at
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
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias
from urllib.parse import unquote

from tallyboard.errors import NotAResultTable
from tallyboard.store.schema import SCHEMA_VERSION

DEEPBOARD_TABLES = frozenset({"experiments", "results", "logs"})  # SQLite names ignore case
MAX_LISTED_TABLES = 5
NO_FILE = "no file"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
HTTP_SCHEMES = ("http://", "https://")  # a tallyboard server accepting writes (docs/server.md)
SPOOL_PREFIX = "spool:"  # "spool:" + the spool file's path (store/spool.py)
HIDDEN = "***"
# A query parameter that holds a secret: `password`, and libpq's `sslpassword` (a client key's).
_SECRET_PARAMETER = re.compile(r"(?i)(?:ssl)?password")


def is_postgres_url(url_or_path: str | os.PathLike[str]) -> bool:
    """Whether a location names a PostgreSQL database (a URL) rather than a SQLite file (a path)."""
    return isinstance(url_or_path, str) and url_or_path.startswith(POSTGRES_SCHEMES)


def _credentials(rest: str) -> tuple[str | None, str]:
    """libpq's reading of a URL after `scheme://`: (user[:password] before the first `@` that comes
    before any `/`, or None; what follows)."""
    for index, char in enumerate(rest):
        if char == "@":
            return rest[:index], rest[index + 1 :]
        if char == "/":
            break
    return None, rest


def _ambiguous(rest: str) -> bool:
    """Whether libpq would read other credentials than the writer meant: an `@` left in the host
    (a password with an unencoded `@`), or one in the path of a URL without credentials (a password
    with an unencoded `/`). libpq would then quote pieces of the password as a host or database."""
    credentials, after = _credentials(rest)
    if credentials is not None:
        return "@" in re.split(r"[/?]", after, maxsplit=1)[0]
    return "@" in rest.partition("?")[0]


def _is_secret(parameter: str) -> bool:
    """Whether a query's `name=value` holds a secret."""
    return _SECRET_PARAMETER.fullmatch(parameter.partition("=")[0]) is not None


def _hide_query(text: str) -> str:
    base, mark, query = text.partition("?")
    if not mark:
        return text
    shown = (f"{pair.partition('=')[0]}={HIDDEN}" if _is_secret(pair) else pair for pair in query.split("&"))
    return f"{base}?{'&'.join(shown)}"


def without_password(text: str) -> str:
    """`text` with the password of a URL (in its user part or as `password=`) replaced by `***`:
    for any URL a message may name, a table's or an artefact store's."""
    scheme, separator, rest = text.partition("://")
    if not separator:
        return text
    if _ambiguous(rest):  # where the password ends is unclear: hide everything up to the last `@`
        return f"{scheme}://{HIDDEN}@{_hide_query(rest.rpartition('@')[2])}"
    credentials, after = _credentials(rest)
    if credentials is None:
        return f"{scheme}://{_hide_query(after)}"
    user, colon, _ = credentials.partition(":")
    return f"{scheme}://{user}{colon and ':' + HIDDEN}@{_hide_query(after)}"


LocationLike: TypeAlias = "str | os.PathLike[str] | Location"  # what `Location.of` takes


@dataclass(frozen=True, repr=False)
class Location:
    """Where a result table is (see the module docstring): a SQLite file's path, a PostgreSQL URL
    or a spool. `str()` and `repr()` never show a password; `secret()` is the text as given."""

    _text: str = field(repr=False)

    @classmethod
    def of(cls, value: LocationLike) -> Location:
        """The location the user gave (a Location as it is). A URL other than `postgresql://` is
        refused, and so is one whose password libpq would misread (unencoded `@` or `/`): both
        would otherwise reach a message that shows part of the password as a path or host."""
        if isinstance(value, Location):
            return value
        text = os.fspath(value)
        if not isinstance(text, str):
            raise TypeError(f"a location is a path or URL as text, not {type(text).__name__}")
        location = cls(text)
        if "://" in text and not is_postgres_url(text) and not location.is_http:
            raise NotAResultTable(
                f"{location} is no location of a result table: give a SQLite file's path, a "
                "postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE URL or a tallyboard server's "
                "http(s)://HOST:PORT URL"
            )
        if is_postgres_url(text) and _ambiguous(text.partition("://")[2]):
            raise NotAResultTable(
                f"{location} cannot be read the way it was meant: percent-encode `@` as %40 and "
                "`/` as %2F in the user name, password and database name"
            )
        return location

    def secret(self) -> str:
        """The location as given, password included: for the connect call and the spool's binding
        only, never for a message."""
        return self._text

    @property
    def is_postgres(self) -> bool:
        return is_postgres_url(self._text)

    @property
    def is_http(self) -> bool:
        """A tallyboard server (`tallyboard serve --accept-writes`), logged to through a spool."""
        return self._text.startswith(HTTP_SCHEMES)

    @property
    def spool_path(self) -> str | None:
        """The spool file's path, for a spool's location; else None."""
        return self._text.removeprefix(SPOOL_PREFIX) if self._text.startswith(SPOOL_PREFIX) else None

    @property
    def sqlite_path(self) -> str | None:
        """The SQLite file's path (nothing in it to hide), for a SQLite table; else None."""
        remote = self.is_postgres or self.is_http
        return None if remote or self.spool_path is not None else self._text

    def scrub(self, message: str) -> str:
        """`message` (a driver's error about this location) without the password: libpq quotes the
        token it cannot decode, and a password written unencoded may be that token."""
        rest = self._text.partition("://")[2]
        credentials, after = _credentials(rest)
        secrets = [credentials.partition(":")[2]] if credentials is not None else []
        secrets += [pair.partition("=")[2] for pair in after.partition("?")[2].split("&") if _is_secret(pair)]
        for secret in sorted({*secrets, *map(unquote, secrets)} - {""}, key=len, reverse=True):
            message = message.replace(secret, HIDDEN)
        return message

    def __str__(self) -> str:
        return without_password(self._text)

    def __repr__(self) -> str:
        return f"Location({str(self)!r})"


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

    location: Location
    kind: Kind
    what: str
    version: int | None = None

    def check(self, access: Access) -> None:
        """Raise unless a table may be opened at this location with `access`.

        FileNotFoundError for a missing SQLite file that is only to be read, `NotAResultTable`
        (one line saying what is there instead, or which command helps) otherwise."""
        where = str(self.location)
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


def require_current(location: Location, version: int | None, who: str) -> None:
    """Raise when a table at `version` is too old for `who` (which reads the current schema only)."""
    if version is not None and version < SCHEMA_VERSION:
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
        return Found(Location(path), Kind.NOTHING, NO_FILE)
    if os.path.isdir(path):
        return Found(Location(path), Kind.OTHER, "a directory")
    if os.path.getsize(path) == 0:
        return Found(Location(path), Kind.NOTHING, "an empty file")
    return None


NOT_SQLITE = "a file that is not a SQLite database"


def describe_sqlite_tables(path: str, tables: list[str], schema_version: str | None) -> Found:
    """What a SQLite database is, from its table names and (if it has one) our `meta` version."""
    names = {name.lower() for name in tables}
    if not tables:
        return Found(Location(path), Kind.NOTHING, "an empty SQLite database")
    if {"meta", "runs"} <= names and schema_version is not None:
        return Found(Location(path), Kind.TABLE, "a result table", int(schema_version))
    if names >= DEEPBOARD_TABLES:
        return Found(Location(path), Kind.DEEPBOARD, "a DeepBoard table")
    listed = ", ".join(sorted(tables)[:MAX_LISTED_TABLES])
    if len(tables) > MAX_LISTED_TABLES:
        listed += ", ..."
    return Found(Location(path), Kind.OTHER, f"another SQLite database (tables: {listed})")

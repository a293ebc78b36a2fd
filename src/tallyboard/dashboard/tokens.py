"""The tokens file of a server: named read and write tokens, kept as hashes (`tallyboard tokens`).

Why a file of its own: a team's server hands out one token per person or per cluster, and takes
one back without restarting everyone else; `--token` and `--write-token` give one of each, for a
single user. Why hashes: the file sits on the server's disk and in its backups; a token is shown
once, when it is made, and the file only lets the server recognise it (sha256 of a random
32-byte token: nothing to guess). `serve --tokens FILE` reads it at start.

A read token opens the dashboard; a write token also writes through the ingest endpoints
(dashboard/ingest.py), which refuse a read token with 403.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path

KINDS = ("read", "write")


def default_file() -> Path:
    """`$XDG_CONFIG_HOME/tallyboard/tokens.json`, else `~/.config/tallyboard/tokens.json`."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "tallyboard" / "tokens.json"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    """One token of the file: its name, what it may do, its hash, when it was made."""

    name: str
    kind: str
    sha256: str
    created: float


def read(path: str | os.PathLike[str]) -> list[TokenEntry]:
    """The entries of a tokens file (none when it does not exist)."""
    file = Path(path)
    if not file.exists():
        return []
    try:
        entries = [TokenEntry(**item) for item in json.loads(file.read_text(encoding="utf-8"))]
    except (ValueError, TypeError) as error:
        raise ValueError(f"{file} is not a tokens file of `tallyboard tokens`: {error}") from None
    for entry in entries:
        if entry.kind not in KINDS:
            raise ValueError(
                f"{file}: the token {entry.name!r} is of kind {entry.kind!r}, not one of {KINDS}"
            )
    return entries


def add(path: str | os.PathLike[str], name: str, kind: str) -> str:
    """Make a token `name` of `kind`, record its hash in the file (created, readable by its owner
    only) and return the token: the only time it is shown."""
    if kind not in KINDS:
        raise ValueError(f"a token is one of {KINDS}, not {kind!r}")
    entries = read(path)
    if not name or any(entry.name == name for entry in entries):
        raise ValueError(f"the file has a token named {name!r} already: pick another name or remove it first")
    token = secrets.token_urlsafe(32)
    entries.append(TokenEntry(name, kind, digest(token), time.time()))
    _write(Path(path), entries)
    return token


def remove(path: str | os.PathLike[str], name: str) -> None:
    """Take back the token `name` (a running server keeps it until it restarts)."""
    entries = read(path)
    kept = [entry for entry in entries if entry.name != name]
    if len(kept) == len(entries):
        raise ValueError(f"no token named {name!r} in {path}")
    _write(Path(path), kept)


def _write(file: Path, entries: list[TokenEntry]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    temporary = file.with_name(file.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        json.dump([asdict(entry) for entry in entries], out, indent=1)
    os.replace(temporary, file)


class TokenSet:
    """The hashes of a server's tokens of one kind: does a given token belong?"""

    def __init__(self, hashes: frozenset[str] = frozenset()) -> None:
        self.hashes = hashes

    @classmethod
    def of(cls, entries: list[TokenEntry], kinds: tuple[str, ...], plain: tuple[str, ...] = ()) -> TokenSet:
        """Entries of `kinds`, and tokens given as they are (`--token`, `--write-token`)."""
        hashes = {entry.sha256 for entry in entries if entry.kind in kinds}
        return cls(frozenset(hashes | {digest(token) for token in plain}))

    def __bool__(self) -> bool:
        return bool(self.hashes)

    def __contains__(self, token: object) -> bool:
        if not isinstance(token, str):
            return False
        given = digest(token)
        return any(hmac.compare_digest(given, known) for known in self.hashes)

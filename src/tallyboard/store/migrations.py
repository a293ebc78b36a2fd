"""Creating a store's schema, and bringing an older one forward.

Engine-neutral: the DDL in `schema` is formatted with the engine's type names, and every step runs
inside the engine's `_atomic`, so two processes opening a new file at once create it once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tallyboard.store.schema import MIGRATIONS, RUN_COLUMNS, SCHEMA_V1, SCHEMA_VERSION

if TYPE_CHECKING:
    from tallyboard.store.base import Store


def _statements(script: str, ddl_types: dict[str, str]) -> list[str]:
    return [s.strip() for s in script.format(**ddl_types).split(";") if s.strip()]


def stored_version(store: Store) -> int | None:
    """The schema version of the store, or None for a store without our tables."""
    if not store._table_exists("meta"):
        return None
    rows = store._execute("SELECT value FROM meta WHERE key = 'schema_version'")
    return int(rows[0][0]) if rows else None


def ensure_schema(store: Store, ddl_types: dict[str, str], unique_columns: tuple[str, ...]) -> None:
    """Create the schema (recording `unique_columns`) or migrate it to `SCHEMA_VERSION`.

    Raises `StoreError` for a store written by a newer tallyboard, naming the versions.
    """
    from tallyboard.store.base import StoreError

    def upgrade() -> None:
        version = stored_version(store)
        if version is None:
            for sql in _statements(SCHEMA_V1, ddl_types):
                store._execute(sql)
            store._execute(
                "INSERT INTO meta (key, value) VALUES ('unique_columns', ?)", (json.dumps(unique_columns),)
            )
            store._execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
            for name, alias, position in RUN_COLUMNS:
                store._execute(
                    "INSERT INTO columns (name, kind, alias, position) VALUES (?, 'run', ?, ?)",
                    (name, alias, position),
                )
            version = 1
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{store.url} has schema version {version}, but this tallyboard reads versions up to "
                f"{SCHEMA_VERSION}: upgrade tallyboard to open it"
            )
        for step in range(version, SCHEMA_VERSION):
            for sql in _statements(MIGRATIONS[step], ddl_types):
                store._execute(sql)
            store._execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(step + 1),))

    if stored_version(store) != SCHEMA_VERSION:
        store._atomic(upgrade)

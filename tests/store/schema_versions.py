"""Turning a table back into what an older tallyboard left, to test that opening it migrates it."""

from __future__ import annotations

from tallyboard.store import open_store


def downgrade(url: str, version: int, drop: tuple[str, ...]) -> None:
    """Drop the tables that later versions added and record `version` as the table's schema."""
    store = open_store(url)

    def work() -> None:
        for table in drop:
            store._execute(f"DROP TABLE {table}")
        store._execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))

    try:
        store._atomic(work)
    finally:
        store.close()

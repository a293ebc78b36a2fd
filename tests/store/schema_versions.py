"""Turning a table back into what an older tallyboard left, to test that the first write migrates it."""

from __future__ import annotations

from tallyboard.store import open_store
from tallyboard.store.imported import IMPORT_RUN_TABLES

# The tables each schema version added (v4 changed columns only: its step runs again harmlessly).
TABLES_ADDED: dict[int, tuple[str, ...]] = {
    2: ("scalar_blocks",),
    3: ("quarantine",),
    5: IMPORT_RUN_TABLES,
    6: ("run_tags",),
    7: ("histograms",),
    8: ("console", "environments"),  # and texts.markdown, a column its step adds only when missing
    9: ("artifacts",),
}


def downgrade(url: str, version: int) -> None:
    """Drop the tables that versions after `version` added and record `version` as the table's schema."""
    store = open_store(url)
    drop = [table for added, tables in TABLES_ADDED.items() if added > version for table in tables]

    def work() -> None:
        for table in drop:
            store.execute(f"DROP TABLE {table}")
        store.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))

    try:
        store.atomic(work)
    finally:
        store.close()

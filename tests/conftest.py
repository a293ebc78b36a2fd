"""Fixtures shared across test folders.

`db_url` is the database every result-table test writes to. It is a real SQLite file on disk
today; parametrising it over engines (e.g. adding a PostgreSQL URL) runs the same tests on each.
"""

from pathlib import Path

import pytest


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A fresh result-table location: a SQLite file path in the test's temporary folder."""
    return str(tmp_path / "results.db")

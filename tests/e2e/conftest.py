"""Fixtures for browser tests: the sample table served on a real port, and headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.sample_table import sample_db, sample_snapshot  # noqa: F401 (fixtures)
from e2e.browser import browser_page, chromium_available, running_dashboard
from support import require


@pytest.fixture
def base_url(sample_db: Path) -> Iterator[str]:  # noqa: F811 (the imported fixture)
    with running_dashboard(str(sample_db)) as url:
        yield url


@pytest.fixture
def page() -> Iterator[object]:
    require(chromium_available(), "headless Chromium (/usr/bin/chromium) and playwright")
    with browser_page() as browser_tab:
        yield browser_tab

"""Fixtures for browser tests: the sample table served on a real port, and headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.sample_table import sample_db, sample_snapshot  # noqa: F401 (fixtures)
from e2e.browser import chromium_available, launched_chromium, page_in, running_dashboard
from support import require


@pytest.fixture
def base_url(sample_db: Path) -> Iterator[str]:  # noqa: F811 (the imported fixture)
    with running_dashboard(str(sample_db)) as url:
        yield url


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """One browser per test module; each test gets a page in a fresh context (`page`)."""
    require(chromium_available(), "headless Chromium (/usr/bin/chromium) and playwright")
    with launched_chromium() as browser:
        yield browser


@pytest.fixture
def page(chromium) -> Iterator[object]:
    with page_in(chromium) as browser_tab:
        yield browser_tab

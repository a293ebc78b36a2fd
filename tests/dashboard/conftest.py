"""Fixtures for dashboard tests: a private copy of the sample table and clients of its dashboard."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from dashboard.sample_table import csrf_of, sample_db, sample_snapshot  # noqa: F401 (fixtures)
from tallyboard.dashboard import create_app

BASE_URL = "http://127.0.0.1"


@pytest.fixture
def make_client(sample_db: Path) -> Iterator[Callable[..., TestClient]]:  # noqa: F811 (imported fixture)
    """Factory of clients of a dashboard for the sample table (options as for `create_app`).
    `client.csrf` holds the CSRF secret of the app's pages, as their scripts send it."""
    with ExitStack() as stack:

        def make(base_url: str = BASE_URL, **options) -> TestClient:
            test_client = stack.enter_context(
                TestClient(create_app(str(sample_db), **options), base_url=base_url)
            )
            page = test_client.get("/", headers={"Authorization": f"Bearer {options.get('token')}"})
            test_client.csrf = csrf_of(page.text) if page.status_code == 200 else None
            return test_client

        yield make


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()

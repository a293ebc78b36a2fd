"""Helpers for tests that need real services: in CI (CI=true) a missing one is a failure, not a skip."""

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(available: bool, what: str) -> None:
    """Skip locally when a real service is missing; fail in CI, where the project must provide it."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{what} is required in CI but is not available")
    pytest.skip(f"{what} is not available on this machine")

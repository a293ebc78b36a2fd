"""Fixtures of the export and import tests."""

from pathlib import Path

import pytest

from exchange.one_run import export_one_run


@pytest.fixture
def export(tmp_path: Path) -> Path:
    """A real export of one run: 100 scalars, 1 image, 1 artefact (`one_run.export_one_run`)."""
    return export_one_run(tmp_path)

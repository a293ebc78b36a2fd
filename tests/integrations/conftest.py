"""Fixtures shared by the integration tests: a real result table on disk and a way to read a row."""

import os

import pytest

# The Transformers test builds its model from a config: nothing may be fetched from the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def results_of(table):
    """``results_of(run_id)``: the run's row of the result table as {column id: value}."""

    def read(run_id):
        names = table.get_results(run_id)
        [row] = names.data
        return dict(zip(names.col_ids, row, strict=True))

    return read

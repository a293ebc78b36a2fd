"""The histograms endpoint on both engines: tags, then one tag's histograms by repetition and step."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.testclient import TestClient

import tallyboard as tb
from tallyboard.dashboard import create_app


@pytest.fixture
def histogram_table(db_url):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("hist", auto_log_plt=False) as run:
        for step in range(3):
            run.add_histogram("layer/weight", np.arange(10.0) + step, step=step, bins=5)
        run.add_histogram("grad", [1.0, float("nan"), 3.0], step=7, epoch=2, bins=2)
        run.new_repetition()
        run.add_histogram("layer/weight", [0.5], step=0)
    yield db_url
    table.close()


def test_histograms_endpoint(histogram_table):
    with TestClient(create_app(histogram_table), base_url="http://127.0.0.1") as client:
        first = client.get("/api/runs/1/histograms").json()
        assert (first["tags"], first["tag"]) == (["grad", "layer/weight"], "grad")
        assert first["histograms"] == [
            {"rep": 0, "step": 7, "epoch": 2, "count": 2, "nonfinite": 1, "min": 1.0, "max": 3.0,
             "sum": 4.0, "sum_squares": 10.0, "edges": [1.0, 2.0, 3.0], "counts": [1, 1]},
        ]  # fmt: skip
        weights = client.get("/api/runs/1/histograms", params={"tag": "layer/weight"}).json()["histograms"]
        assert [(h["rep"], h["step"]) for h in weights] == [(0, 0), (0, 1), (0, 2), (1, 0)]
        assert weights[2]["edges"] == [2.0, 3.8, 5.6, 7.4, 9.2, 11.0] and weights[2]["counts"] == [2] * 5
        assert weights[3]["counts"] == [1] and weights[3]["edges"] == [0.5, 0.5]
        assert client.get("/api/runs/1/histograms", params={"tag": "missing"}).json()["histograms"] == []
        assert client.get("/api/runs/99/histograms").json() == {"tags": [], "tag": None, "histograms": []}

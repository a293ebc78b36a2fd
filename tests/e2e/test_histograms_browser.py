"""The Histograms tab in real headless Chromium: the heat map over steps and one step's buckets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tallyboard as tb
from e2e.browser import running_dashboard

TIMEOUT = 15_000  # ms; generous for a loaded CI machine, never reached when things work
# Share of a canvas's pixels that differ from its background (the first pixel).
PAINTED = """id => { const c = document.getElementById(id), d = c.getContext('2d').getImageData(0, 0, c.width,
    c.height).data; let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] !== d[0] || d[i + 1] !== d[1]
    || d[i + 2] !== d[2]) n++; return n / (d.length / 4); }"""


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "results.db")
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    rng = np.random.default_rng(1)
    with table.new_run("hist", auto_log_plt=False) as run:
        for step in range(10):
            run.add_histogram("weights", rng.normal(step, 1.0, size=1000).astype(np.float32), step=step * 10)
        run.add_histogram("weights", [np.nan, 2.0], step=100)
    table.close()
    with running_dashboard(path) as url:
        yield url


def test_histograms_tab_draws_the_distribution_and_one_step(page, base_url):
    page.goto(base_url + "/runs/1")
    page.click('.tabs button[data-tab="histogram"]')
    page.wait_for_selector("#hist-stats", timeout=TIMEOUT)
    assert page.text_content("#hist-stats") == (
        "step 100 · count 1 · min 2 · max 2 · mean 2 · std 0 · NaN/inf 1"
    )  # the last step is picked first
    assert page.evaluate(PAINTED, "hist-heatmap") > 0.05
    assert page.evaluate(PAINTED, "hist-bars") > 0.05
    box = page.locator("#hist-heatmap").bounding_box()
    left = box["width"] * 70 / 900
    page.mouse.click(box["x"] + left + 2, box["y"] + box["height"] / 2)  # the first column: step 0
    page.wait_for_function("() => document.getElementById('hist-stats').textContent.startsWith('step 0 ')")
    assert "count 1000" in page.text_content("#hist-stats")
    assert page.input_value("#hist-step") == "0"
    page.reload()  # the tab is kept in the URL state
    page.wait_for_selector("#hist-heatmap", timeout=TIMEOUT)
    assert page.errors == []


def test_histograms_tab_without_histograms(page, tmp_path):
    path = str(tmp_path / "empty.db")
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("none", auto_log_plt=False) as run:
        run.add_scalar("loss", 1.0)
    table.close()
    with running_dashboard(path) as url:
        page.goto(url + "/runs/1?tab=histogram")
        page.wait_for_selector("text=no histograms logged", timeout=TIMEOUT)
    assert page.errors == []

"""A run with many metrics in real headless Chromium: groups, search (text and regex), pins, the
layout kept in localStorage, charts loaded only when seen, and live growth through one event stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tallyboard as tb
from e2e.browser import running_dashboard

TIMEOUT = 15_000
WEIGHTS = 60  # grad/w00..grad/w59: one group of 60 charts


@pytest.fixture
def many_metrics(tmp_path: Path) -> Iterator[tuple[str, tb.LogWriter]]:
    """A running run with 62 metrics (grad/w*, train+val loss, sys/cpu), served; yields (url, run)."""
    table = tb.ResultTable(tmp_path / "many.db", nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("many", auto_log_plt=False)
    for step in range(5):
        for i in range(WEIGHTS):
            run.add_scalar(f"grad/w{i:02d}", i + step, step=step)
        for tag in ("train/loss", "val/loss", "sys/cpu"):
            run.add_scalar(tag, 1.0 / (step + 1), step=step)
    run.flush()
    try:
        with running_dashboard(str(tmp_path / "many.db"), live_interval=0.1) as base:
            yield f"{base}/runs/{run.run_id}", run
    finally:
        run.close()
        table.close()


def card(metric: str) -> str:
    return f'.chart-card[data-metric="{metric}"]'


def visible_metrics(page) -> list[str]:
    return page.eval_on_selector_all(
        ".chart-card", "cards => cards.filter(c => c.offsetParent !== null).map(c => c.dataset.metric)"
    )


def test_groups_search_pins_and_lazy_charts(page, many_metrics):
    url, _ = many_metrics
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/api/series" in request.url else None)
    page.goto(url)
    page.wait_for_selector(f"{card('w00')} canvas", timeout=TIMEOUT)
    groups = page.eval_on_selector_all(".chart-group:not([hidden])", "gs => gs.map(g => g.dataset.group)")
    assert groups == ["grad", "sys", "train · val"]
    assert page.text_content("#chart-count") == "62 of 62 charts"
    assert 0 < len(asked) <= 8  # only the charts in view (and just below) asked for their series

    page.fill("#chart-search", "LOSS")  # a substring, any case
    page.wait_for_selector(f"{card('loss')} canvas", timeout=TIMEOUT)  # drawn once it came into view
    assert visible_metrics(page) == ["loss"]
    page.check("#chart-regex")
    page.fill("#chart-search", r"^w0[0-2]$")
    assert visible_metrics(page) == ["w00", "w01", "w02"]
    page.fill("#chart-search", "w(")
    assert "invalid regex" in page.text_content("#chart-search-error")
    assert len(visible_metrics(page)) == 62  # an invalid regex filters nothing
    page.fill("#chart-search", "")

    page.click('.chart-group[data-group="grad"] .group-head')
    assert page.is_hidden('.chart-group[data-group="grad"] .charts')
    page.click(f"{card('cpu')} button.pin")
    assert page.eval_on_selector(card("cpu"), "c => c.closest('.chart-group').dataset.group") == "pinned"

    page.reload()  # the layout is kept for this table
    page.wait_for_selector(f"{card('cpu')} canvas", timeout=TIMEOUT)
    first = page.eval_on_selector(".chart-group:not([hidden])", "g => g.dataset.group")
    assert first == "pinned" and page.is_hidden('.chart-group[data-group="grad"] .charts')
    assert page.is_checked("#chart-regex")
    assert page.errors == []


def test_a_chart_grows_through_one_event_stream(page, many_metrics):
    url, run = many_metrics
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(url)
    loss = f"document.querySelector('{card('loss')}')"
    page.fill("#chart-search", "loss")
    page.wait_for_function(f"() => {loss}?.dataset.points === '10'", timeout=TIMEOUT)  # train + val
    for step in range(5, 40):
        run.add_scalar("train/loss", 1.0 / (step + 1), step=step)
    run.add_scalar("train/new_metric", 1.0, step=0)
    run.flush()
    page.wait_for_function(f"() => {loss}.dataset.points === '45'", timeout=TIMEOUT)
    page.fill("#chart-search", "new_")
    page.wait_for_selector(f"{card('new_metric')} canvas", timeout=TIMEOUT)  # a new metric joins the board
    run.close()
    page.wait_for_function(
        "() => document.getElementById('live').textContent === 'finished'", timeout=TIMEOUT
    )
    assert sum("/api/stream" in u for u in asked) == 1 and not any("/api/live" in u for u in asked)
    assert page.errors == []

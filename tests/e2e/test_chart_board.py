"""Many metrics in real headless Chromium, on a run's page and on the compare page: groups, search
(text and regex), pins, the layout kept in localStorage, charts loaded only when seen, and live
growth through one event stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tallyboard as tb
from e2e.browser import running_dashboard

TIMEOUT = 15_000
WEIGHTS = 60  # grad/w00..grad/w59: one group of 60 charts


def log_many(run: tb.LogWriter) -> None:
    """62 metrics (grad/w*, train+val loss, sys/cpu) of 5 steps each."""
    for step in range(5):
        for i in range(WEIGHTS):
            run.add_scalar(f"grad/w{i:02d}", i + step, step=step)
        for tag in ("train/loss", "val/loss", "sys/cpu"):
            run.add_scalar(tag, 1.0 / (step + 1), step=step)
    run.flush()


@pytest.fixture
def many_metrics(tmp_path: Path) -> Iterator[tuple[str, tb.LogWriter]]:
    """A running run with 62 metrics, served; yields (url, run)."""
    table = tb.ResultTable(tmp_path / "many.db", nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("many", auto_log_plt=False)
    log_many(run)
    try:
        with running_dashboard(str(tmp_path / "many.db"), live_interval=0.1) as base:
            yield f"{base}/runs/{run.run_id}", run
    finally:
        run.close()
        table.close()


@pytest.fixture
def two_running(tmp_path: Path) -> Iterator[tuple[str, tb.LogWriter, tb.LogWriter]]:
    """Two running runs of 62 metrics each, served; yields (base url, first run, second run)."""
    table = tb.ResultTable(tmp_path / "two.db", nocommit_action=tb.NoCommitAction.NOP)
    first = table.new_run("many", comment="first", auto_log_plt=False)
    second = table.new_run("many", comment="second", auto_log_plt=False)
    log_many(first)
    log_many(second)
    try:
        with running_dashboard(str(tmp_path / "two.db"), live_interval=0.1) as base:
            yield base, first, second
    finally:
        first.close()
        second.close()
        table.close()


def card(metric: str) -> str:
    return f'.chart-card[data-metric="{metric}"]'


def visible_metrics(page) -> list[str]:
    return page.eval_on_selector_all(
        ".chart-card", "cards => cards.filter(c => c.offsetParent !== null).map(c => c.dataset.metric)"
    )


def visible_charts(page) -> list[str]:
    """The compare page's shown charts as split/metric."""
    shown = "cards => cards.filter(c => c.offsetParent !== null)"
    name = "c => `${c.dataset.split}/${c.dataset.metric}`"
    return page.eval_on_selector_all(".chart-card", f"{shown}.map({name})")


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


def test_the_compare_page_has_the_same_board(page, two_running):
    base, first, second = two_running
    url = f"{base}/compare?runs={first.run_id},{second.run_id}"
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(url)
    page.wait_for_selector('.chart-card[data-split="train"][data-metric="loss"] canvas', timeout=TIMEOUT)
    groups = page.eval_on_selector_all(".chart-group:not([hidden])", "gs => gs.map(g => g.dataset.group)")
    assert groups == ["train", "val", "grad", "sys"]  # one group per split, train and val first
    assert page.text_content("#chart-count") == "63 of 63 charts"
    series = [u for u in asked if "/api/series?" in u]
    assert 0 < len(series) <= 10  # only the metrics in view (and just below) asked for their series
    assert all(f"runs={first.run_id}%2C{second.run_id}" in u for u in series)  # one request serves both runs

    page.fill("#chart-search", "LOSS")
    assert visible_charts(page) == ["train/loss", "val/loss"]
    page.check("#chart-regex")
    page.fill("#chart-search", r"^grad/w0[0-2]$")
    page.wait_for_selector('.chart-card[data-metric="w02"] canvas', timeout=TIMEOUT)  # drawn once in view
    assert visible_charts(page) == ["grad/w00", "grad/w01", "grad/w02"]
    lines = page.eval_on_selector('.chart-card[data-metric="w02"]', "c => c.dataset.lines")
    assert lines == "2"  # one line per compared run
    page.fill("#chart-search", "")
    page.uncheck("#chart-regex")

    page.click('.chart-group[data-group="grad"] .group-head')
    assert page.is_hidden('.chart-group[data-group="grad"] .charts')
    page.click('.chart-card[data-split="sys"][data-metric="cpu"] button.pin')
    page.reload()  # the layout is kept for this table's compare page
    page.wait_for_selector('.chart-card[data-split="sys"][data-metric="cpu"] canvas', timeout=TIMEOUT)
    first_group = page.eval_on_selector(".chart-group:not([hidden])", "g => g.dataset.group")
    assert first_group == "pinned" and page.is_hidden('.chart-group[data-group="grad"] .charts')

    loss = 'document.querySelector(\'.chart-card[data-split="train"][data-metric="loss"]\')'
    page.wait_for_function(f"() => {loss}?.dataset.points === '10'", timeout=TIMEOUT)  # 5 steps of 2 runs
    for step in range(5, 40):
        first.add_scalar("train/loss", 1.0 / (step + 1), step=step)
    first.add_scalar("train/new_metric", 1.0, step=0)
    first.flush()
    page.wait_for_function(f"() => {loss}.dataset.points === '45'", timeout=TIMEOUT)
    page.fill("#chart-search", "new_")  # a metric logged for the first time joins the board
    page.wait_for_selector('.chart-card[data-metric="new_metric"] canvas', timeout=TIMEOUT)
    assert page.text_content("#chart-count") == "1 of 64 charts"
    first.close()
    second.close()
    finished = "() => document.getElementById('live').textContent === 'all finished'"
    page.wait_for_function(finished, timeout=TIMEOUT)
    assert sum("/api/stream" in u for u in asked) == 2  # one per page load
    assert page.errors == []

    page.goto(f"{base}/runs/{first.run_id}")  # the run page keeps a layout of its own
    page.wait_for_selector("#chart-search", timeout=TIMEOUT)
    assert page.input_value("#chart-search") == "" and not page.is_checked("#chart-regex")
    assert page.eval_on_selector_all(".chart-card.pinned", "cs => cs.length") == 0

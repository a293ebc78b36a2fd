"""The first screen written into the page (dashboard/first_view.py), checked in headless Chromium:
the run page draws its first chart from the inlined series as it draws the one it fetches, the run
page and the runs page ask the API for none of their first screen, and no stored name can end the
inlined element or run as script."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

import tallyboard as tb

TIMEOUT = 15_000
FIRST_VIEW = re.compile(r'<script type="application/json" id="first-view">.*?</script>', re.S)
INLINED = "JSON.parse(document.getElementById('first-view').textContent)"
DRAWN = """metric => {
    const card = document.querySelector(`.chart-card[data-metric="${CSS.escape(metric)}"]`);
    const u = card.chart.plot;
    return { data: u.data.map((column) => Array.from(column)), labels: u.series.map((s) => s.label ?? null),
             axes: u.axes.map((a) => a.label), points: card.dataset.points, x: card.dataset.x };
}"""
HOSTILE = "</script><script>window.pwned=1</script><!--<script>"


@pytest.fixture
def table(sample_db):
    result_table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    yield result_table
    result_table.close()


def drawn_chart(page, url: str) -> tuple[str, dict]:
    """The first chart the run page at `url` draws: its metric and what uPlot holds."""
    page.goto(url)
    page.wait_for_function("() => document.querySelector('.chart-card[data-points]')", timeout=TIMEOUT)
    metric = page.eval_on_selector(".chart-card[data-points]", "card => card.dataset.metric")
    return metric, page.evaluate(DRAWN, metric)


def test_the_inlined_first_chart_draws_as_the_fetched_one(page, chromium, base_url):
    asked: list[str] = []
    page.on(
        "request", lambda r: asked.append(r.url) if "/api/series" in r.url or "/api/runs/" in r.url else None
    )
    metric, inlined = drawn_chart(page, f"{base_url}/runs/2")
    width = [url for url in page.evaluate(f"Object.keys({INLINED})") if url.startswith("/api/series")]
    assert width and width[0].endswith("&width=800") and f"metric={metric}" in width[0]
    assert not [
        url for url in asked if f"metric={metric}" in url or url.endswith(("/api/runs/2", "/2/alerts"))
    ]
    assert page.errors == []
    # The same page without its first view asks the API (at the inlined width, to compare like for like).
    with_fetch = chromium.new_page(viewport={"width": 1440, "height": 900})
    try:

        def without_first_view(route):
            answer = route.fetch()
            route.fulfill(
                status=answer.status, content_type="text/html", body=FIRST_VIEW.sub("", answer.text())
            )

        with_fetch.route(re.compile(r".*/runs/2$"), without_first_view)

        def at_the_inlined_width(route):
            route.continue_(url=re.sub(r"width=\d+", "width=800", route.request.url))

        with_fetch.route(re.compile(r".*/api/series\?.*"), at_the_inlined_width)
        fetched_metric, fetched = drawn_chart(with_fetch, f"{base_url}/runs/2")
    finally:
        with_fetch.context.close()
    assert fetched_metric == metric and fetched == inlined


def test_the_runs_page_draws_its_first_screen_without_asking_the_api(page, base_url):
    asked: list[str] = []
    page.on("request", lambda r: asked.append(urlsplit(r.url).path))
    page.goto(f"{base_url}/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    assert set(page.evaluate(f"Object.keys({INLINED})")) >= {"/api/experiments", "/api/alerts"}
    assert not {"/api/runs", "/api/experiments", "/api/alerts"} & set(asked)
    assert page.errors == []


def test_the_first_view_holds_hostile_names_as_data(page, base_url, table):
    with table.new_run(HOSTILE, comment=HOSTILE, cli={"x": 1}, auto_log_plt=False) as run:
        run.add_hparams(**{HOSTILE: HOSTILE})
        run.set_note(HOSTILE)
        for step in range(5):
            run.add_scalar(f"train/{HOSTILE}", float(step), step=step)
    for url in (f"/runs/{run.run_id}", "/?experiment=*"):
        page.goto(base_url + url)
        page.wait_for_selector(".chart-card .uplot, #runs tbody tr[data-run]", timeout=TIMEOUT)
        assert page.evaluate("document.querySelectorAll('script').length") == 2  # ours and the first view
        assert page.evaluate("window.pwned") is None and page.errors == []
        inlined = page.evaluate(INLINED)
        for asked, answer in inlined.items():  # the very answers of the API, hostile text and all
            fetched = page.evaluate("async (url) => (await fetch(url)).json()", asked)
            assert {**fetched, "now": None} == {**answer, "now": None}  # but the server's clock
        assert HOSTILE in page.evaluate("JSON.stringify(" + INLINED + ")")
        if url.startswith("/runs/"):
            assert page.inner_text(".chart-card h4") == HOSTILE

"""`?live=0`: a page of a running run opens no event stream and tails no console, so it reaches
network idle (screenshots, printing, crawlers), and still shows what was logged."""

from __future__ import annotations

from e2e.test_dashboard_browser import TIMEOUT


def test_a_running_run_with_live_0_reaches_network_idle_and_opens_no_stream(page, base_url):
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{base_url}/runs/3?live=0")
    page.wait_for_load_state("networkidle", timeout=TIMEOUT)
    page.wait_for_selector(".chart-card canvas", timeout=TIMEOUT)
    assert page.inner_text("#live") == "not live (?live=0)"
    assert not [url for url in asked if "/api/stream" in url]
    page.goto(f"{base_url}/compare?runs=1,3&live=0")
    page.wait_for_load_state("networkidle", timeout=TIMEOUT)
    page.wait_for_selector(".chart-card canvas", timeout=TIMEOUT)
    assert not [url for url in asked if "/api/stream" in url]
    assert page.errors == []

"""The runs table in Chromium pages a big view by cursor and shows "N+ runs" until the exact count
arrives (the count of a page stops at runs_walk.COUNT_CAP; here 2, on the 4-run sample table)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from e2e.test_dashboard_browser import TIMEOUT, row_ids
from tallyboard.store import runs_walk


def test_pages_follow_the_cursor_and_the_count_becomes_exact(page, base_url, monkeypatch):
    monkeypatch.setattr(runs_walk, "COUNT_CAP", 2)
    asked: list[dict[str, list[str]]] = []
    page.on(
        "request", lambda r: asked.append(parse_qs(urlparse(r.url).query)) if "/api/runs?" in r.url else None
    )
    counted: list[str] = []
    page.on("request", lambda r: counted.append(r.url) if "/api/runs/count" in r.url else None)
    page.goto(base_url + "/?limit=2")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    assert row_ids(page) == [-1, 1]
    page.wait_for_function("() => document.querySelector('#count').textContent === '4 runs'", timeout=TIMEOUT)
    assert len(counted) == 1
    page.click("#next-page")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#runs tbody tr')].map(r => r.dataset.run).join() === '2,3'",
        timeout=TIMEOUT,
    )
    assert "after" in asked[-1] and asked[-1]["offset"] == ["2"]  # by cursor; the offset for the URL
    assert page.is_disabled("#next-page")
    assert page.errors == []

"""The runs table draws only the rows in view: a page of 150 runs holds a few dozen rows in the
DOM, scrolling draws the rows it reaches (and drops those it leaves), and the scroll bar spans the
whole page; a page of a few rows is drawn whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tallyboard as tb
from e2e.browser import running_dashboard
from e2e.test_dashboard_browser import TIMEOUT, row_ids

RUNS = 150


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory) -> Iterator[str]:
    path = Path(tmp_path_factory.mktemp("virtual")) / "runs.db"
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    for i in range(RUNS):
        table.new_run("sweep", cli={"i": i}, auto_log_plt=False).write_result(accuracy=i / RUNS)
    table.close()
    with running_dashboard(str(path)) as url:
        yield url


def test_a_long_page_draws_the_rows_in_view_and_scrolls_through_all(page, many_runs):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(many_runs + f"/?limit={RUNS}")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    first = row_ids(page)
    assert first[0] == 1 and len(first) < RUNS / 2  # the rows in view and a few more, not the page
    assert first == list(range(1, len(first) + 1))
    assert page.inner_text(".pager span >> nth=0") == f"1–{RUNS} of {RUNS}"
    scroll = "document.querySelector('.table-wrap')"
    assert page.evaluate(f"{scroll}.scrollHeight") > RUNS * 20  # the scroll bar is the whole page's
    page.evaluate(f"{scroll}.scrollTop = {scroll}.scrollHeight")
    page.wait_for_function(
        f"() => document.querySelector('#runs tr[data-run=\"{RUNS}\"]') !== null", timeout=TIMEOUT
    )
    last = row_ids(page)
    assert last == list(range(last[0], RUNS + 1)) and len(last) < RUNS / 2 and 1 not in last
    # the last row is in view, under the sticky header, not past the end of the box
    box = page.locator(".table-wrap").bounding_box()
    row = page.locator(f'#runs tr[data-run="{RUNS}"]').bounding_box()
    assert box and row and box["y"] < row["y"] and row["y"] + row["height"] <= box["y"] + box["height"] + 1
    page.click(f'#runs tr[data-run="{RUNS - 1}"] input[type=checkbox]')
    page.evaluate(f"{scroll}.scrollTop = 0")
    page.wait_for_function(
        "() => document.querySelector('#runs tr[data-run=\"1\"]') !== null", timeout=TIMEOUT
    )
    assert page.inner_text("#compare") == "Compare 1"  # a selection outlives its row's leaving the DOM
    assert page.errors == []


def test_the_first_rows_come_with_the_page_and_later_pages_are_asked_for(page, many_runs):
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/runs?" in r.url else None)
    page.goto(many_runs + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    assert asked == []  # the first page was inlined (first_view.py)
    page.click("#next-page")
    page.wait_for_selector('#runs tr[data-run="101"]', timeout=TIMEOUT)
    assert len(asked) == 1 and "offset=100" in asked[0]


def test_a_short_page_is_drawn_whole(page, many_runs):
    page.goto(many_runs + "/?limit=30")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    assert row_ids(page) == list(range(1, 31))

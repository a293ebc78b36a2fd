"""The Hparams and Compare views of several runs leave out the debug run, hidden runs and, until a
visible toggle brings them back, failed runs; they say what they left out, their counts agree, and
nothing overflows from 1280 to 1920 px. Compare has one "Group by": the statistics' hparams group
the charts too."""

from __future__ import annotations

import pytest

import tallyboard as tb
from e2e.test_dashboard_browser import TIMEOUT


@pytest.fixture
def with_failed(sample_db):
    """The sample table (runs 1-3 and the debug run) with run 3 failed and a fourth run (to hide)."""
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    table.load_run(3).set_status("failed")
    hidden = table.new_run("exp", cli={"lr": 0.5}, auto_log_plt=False)
    hidden.add_hparams(lr=0.5)
    hidden.add_scalar("train/loss", 1.0, step=0)
    hidden.write_result(accuracy=0.5)
    table.close()
    return hidden.run_id


HIDE = """id => fetch(`/api/runs/${id}`, {method: 'POST', body: JSON.stringify({hidden: true}),
    headers: {'Content-Type': 'application/json',
              'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content}})
    .then(r => r.status)"""


WIDER = """() => [...document.querySelectorAll('.hp-card')]
    .filter((card) => card.scrollWidth > card.clientWidth + 1)
    .map((card) => [card.querySelector('strong')?.textContent, card.scrollWidth, card.clientWidth])"""
FITS = f"() => document.documentElement.scrollWidth <= innerWidth && ({WIDER})().length === 0"


def hide(page, base_url: str, run_id: int) -> None:
    page.goto(base_url + "/diff")
    assert page.evaluate(HIDE, run_id) == 200


def test_hparams_leave_out_debug_hidden_and_failed_runs_and_counts_agree(page, base_url, with_failed):
    hide(page, base_url, with_failed)
    page.goto(f"{base_url}/hparams?runs=-1,1,2,3,{with_failed}")
    page.wait_for_selector("#importance", timeout=TIMEOUT)
    assert page.inner_text("#hp-count").lower() == "2 runs"
    assert page.inner_text("#left-out") == "left out: the debug run, 1 hidden, 1 failed"
    assert page.inner_text("#importance-count") in ("2 runs", "1 of the 2 runs have accuracy")
    assert not page.is_checked("#with-failed")
    page.check("#with-failed")  # the toggle: failed runs back in, kept in the address
    page.wait_for_function("() => location.search.includes('failed=1')", timeout=TIMEOUT)
    page.wait_for_function(
        "() => document.querySelector('#hp-count')?.textContent === '3 runs'", timeout=TIMEOUT
    )
    for width in (1280, 1440, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        try:  # a resize lays the plots out again, at the new width
            page.wait_for_function(FITS, timeout=TIMEOUT)
        except Exception:
            raise AssertionError(
                f"content wider than its card at {width} px: {page.evaluate(WIDER)}"
            ) from None
    assert page.errors == []


def test_compare_leaves_out_failed_runs_until_asked_and_has_one_group_by(page, base_url, with_failed):
    page.goto(f"{base_url}/compare?runs=-1,1,2,3")
    page.wait_for_selector(".chart-card canvas", timeout=TIMEOUT)
    legend = page.eval_on_selector_all("#runs-legend [data-run]", "spans => spans.map(s => s.dataset.run)")
    assert legend == ["1", "2"]
    assert page.inner_text("#left-out") == "left out: the debug run, 1 failed"
    assert page.locator("select#group").count() == 0  # no second Group by
    page.check("#with-failed")
    page.wait_for_function(
        "() => document.querySelectorAll('#runs-legend [data-run]').length === 3", timeout=TIMEOUT
    )
    page.check("input[data-by='lr']")
    page.wait_for_function("() => document.querySelectorAll('.group-key').length === 3", timeout=TIMEOUT)
    assert "by=lr" in page.url
    assert page.errors == []

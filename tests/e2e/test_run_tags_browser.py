"""A run's tags in the runs table of real headless Chromium: one chip per tag, text never markup,
and the filter language selecting on them."""

from __future__ import annotations

import tallyboard as tb

TIMEOUT = 15_000  # ms; generous for a loaded CI machine, never reached when things work
HOSTILE = '<img src=x onerror="window.pwned=1">'


def test_tags_are_chips_and_filter_the_table(page, base_url, sample_db):
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    table.show_column("tags", 1)
    table.load_run(1).add_tags("baseline", HOSTILE)
    table.load_run(3).add_tags("baseline")
    table.close()
    page.goto(base_url + "/")
    chips = '#runs tr[data-run="1"] td.tags .chip'
    page.wait_for_selector(chips, timeout=TIMEOUT)
    assert page.eval_on_selector_all(chips, "chips => chips.map(c => c.textContent)") == [HOSTILE, "baseline"]
    assert page.query_selector("#runs img") is None and page.evaluate("window.pwned") is None
    page.fill("#filter", '"baseline" in tags')
    page.press("#filter", "Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#runs tbody tr')].map(r => r.dataset.run).join() === '1,3'",
        timeout=TIMEOUT,
    )
    assert page.errors == []

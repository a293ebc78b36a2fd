"""The runs table's row controls in headless Chromium (static/table.js answers them with one
listener on the table): a row's checkbox selects it, its hide button hides the run, a click
anywhere else opens the run, and a read-only dashboard's buttons do nothing."""

from __future__ import annotations

import tallyboard as tb
from e2e.browser import running_dashboard

TIMEOUT = 15_000  # ms; generous for a loaded CI machine, never reached when things work
ROWS = "() => [...document.querySelectorAll('#runs tbody tr[data-run]')].map(r => r.dataset.run).join()"


def shown(page) -> str:
    return page.evaluate(ROWS)


def test_the_checkbox_selects_and_the_hide_button_hides_without_opening_the_run(page, base_url, sample_db):
    page.goto(base_url + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    assert shown(page) == "-1,1,2,3"
    page.click('#runs tr[data-run="1"] td.pick input')
    page.click('#runs tr[data-run="3"] td.pick input')
    assert page.text_content("#compare") == "Compare 2"
    selected = page.eval_on_selector_all("#runs tr.selected", "rows => rows.map(r => r.dataset.run)")
    assert selected == ["1", "3"]
    page.click('#runs tr[data-run="2"] td.tools button.icon-btn')
    page.wait_for_function(f"() => ({ROWS})() === '-1,1,3'", timeout=TIMEOUT)
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    hidden = table.get_experiment_raw(2)["hidden"]
    table.close()
    assert hidden
    page.click("#show-hidden")
    page.wait_for_selector('#runs tr.hidden-run[data-run="2"]', timeout=TIMEOUT)
    assert page.text_content('#runs tr[data-run="2"] td.tools button.icon-btn') == "show"
    assert page.url.split("?")[0].rstrip("/") == base_url  # none of it opened a run
    page.click('#runs tr[data-run="3"] td:nth-child(3)')
    page.wait_for_url("**/runs/3", timeout=TIMEOUT)
    assert page.errors == []


def test_a_read_only_table_selects_but_neither_hides_nor_edits(page, sample_db):
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    table.show_column("note", 1)
    table.close()
    with running_dashboard(str(sample_db), read_only=True) as base_url:
        page.goto(base_url + "/")
        page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
        assert page.locator("#runs td.editable").count() == 0
        hide = '#runs tr[data-run="2"] td.tools button.icon-btn'
        assert page.is_disabled(hide) and page.is_disabled('#runs tr[data-run="2"] td.tools button.colour')
        page.click(hide, force=True)  # a click on the disabled button, as a user's would land
        page.click('#runs tr[data-run="2"] td:nth-child(2)')  # the note: not editable here, so it opens
        page.wait_for_url("**/runs/2", timeout=TIMEOUT)
        page.go_back()
        page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
        assert shown(page) == "-1,1,2,3"
        page.click('#runs tr[data-run="1"] td.pick input')
        page.click('#runs tr[data-run="2"] td.pick input')
        assert page.text_content("#compare") == "Compare 2"
        assert page.errors == []

"""The run page's Logs and Environment tabs and rendered Markdown, in real headless Chromium: the
console tails a running run, search narrows it, and logged text never runs as code."""

from __future__ import annotations

from pathlib import Path

import pytest

import tallyboard as tb
from e2e.browser import running_dashboard

TIMEOUT = 15_000  # ms; generous for a loaded CI machine, never reached when things work
HOSTILE_LINE = '<img src=x onerror="window.pwned=1"> not markup'
MARKDOWN = "# Results\n\n**fine** [bad](javascript:window.pwned=2)\n\n<script>window.pwned=3</script>\n"
LINES = "document.querySelectorAll('#console-lines .console-line').length"


@pytest.fixture
def running_run(tmp_path: Path):
    table = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("logs", auto_log_plt=False)
    for number in range(3):
        run.add_console_line(f"epoch {number} done")
    run.add_console_line(HOSTILE_LINE, stream="stderr")
    run.add_text(MARKDOWN, tag="report", markdown=True)
    run.set_note("see **the report**")
    run.flush()
    yield table, run
    run.close()
    table.close()


def test_logs_tab_tails_a_running_run_and_searches(page, running_run, tmp_path: Path) -> None:
    _, run = running_run
    with running_dashboard(str(tmp_path / "results.db")) as url:
        page.goto(f"{url}/runs/{run.run_id}?tab=logs")
        page.wait_for_function(f"() => {LINES} === 4", timeout=TIMEOUT)
        shown = page.inner_text("#console-lines")
        assert "epoch 0 done" in shown and HOSTILE_LINE in shown  # the markup is text
        run.add_console_line("epoch 3 done")  # the live tail picks it up without a reload
        run.flush()
        page.wait_for_function(f"() => {LINES} === 5", timeout=TIMEOUT)
        page.fill("#console-search", "EPOCH 1")
        page.press("#console-search", "Enter")
        page.wait_for_function(
            "() => [...document.querySelectorAll('#console-lines .l')].map(l => l.textContent).join()"
            " === 'epoch 1 done'",
            timeout=TIMEOUT,
        )
        page.click('.tabs button[data-tab="environment"]')
        page.wait_for_selector("#environment", timeout=TIMEOUT)
        environment = page.inner_text("#environment")
        assert "Packages" in environment and "python" in environment
        assert page.evaluate("window.pwned") is None
        assert page.errors == []


def test_markdown_texts_and_notes_render_and_run_nothing(page, running_run, tmp_path: Path) -> None:
    _, run = running_run
    with running_dashboard(str(tmp_path / "results.db")) as url:
        page.goto(f"{url}/runs/{run.run_id}?tab=text")
        page.wait_for_selector(".markdown h1", timeout=TIMEOUT)
        assert page.inner_text(".card.item .markdown h1") == "Results"
        assert page.inner_text(".card.item .markdown strong") == "fine"
        dangerous = ".markdown script, .markdown [href^=javascript]"
        assert page.eval_on_selector_all(dangerous, "n => n.length") == 0
        assert page.inner_text("aside .markdown strong") == "the report"  # the note, rendered
        assert page.evaluate("window.pwned") is None
        assert page.errors == []

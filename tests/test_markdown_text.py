"""Texts logged with `markdown=True` keep the flag (schema v8), and a v7 table gains it."""

from __future__ import annotations

import pytest

import tallyboard as tb
from store.schema_versions import downgrade
from tallyboard.store.schema import SCHEMA_VERSION


def test_the_markdown_flag_is_stored_with_the_text(db_url: str) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("md", auto_log_plt=False) as run:
        run.add_text("# shown as Markdown", markdown=True)
        run.add_text("# shown as text")
        with pytest.raises(TypeError, match="markdown"):
            run.add_text("x", markdown="yes")
    assert [(t["fragment"], t["markdown"]) for t in table.load_run(run.run_id).get_text()] == [
        ("# shown as Markdown", True),
        ("# shown as text", False),
    ]
    table.close()


def test_a_version_7_table_gains_console_environment_and_markdown(db_url: str) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("old", auto_log_plt=False, environment=False) as old:
        old.add_text("written by v4")
    table.close()
    downgrade(db_url, 7)  # what tallyboard with schema version 7 left
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("new", auto_log_plt=False) as new:  # the first write migrates
        new.add_text("**v5**", markdown=True)
        new.add_console_line("hello")
    assert table._store.meta("schema_version") == str(SCHEMA_VERSION)
    assert [t["markdown"] for t in table.load_run(old.run_id).get_text()] == [False]
    assert [t["markdown"] for t in new.get_text()] == [True]
    assert [line.line for line in new.get_console()] == ["hello"]
    assert new.get_environment() is not None and table.get_environment(old.run_id) is None
    table.close()

"""`copy_table`: SQLite -> PostgreSQL -> SQLite keeps every row of every table; twice changes nothing."""

import io
import math
import sqlite3

import pytest

import tallyboard as tb
from pg_support import connect
from tallyboard.store import StoreError
from tallyboard.store.copy import TABLES, copy_table

ALL_TABLES = ("meta", *(table for table, *_ in TABLES))


def png(color: tuple[int, int, int]) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (3, 2), color).save(buffer, format="PNG")
    return buffer.getvalue()


def fill(path: str) -> None:
    """A table with one of everything: statuses, hidden and debug runs, repetitions, NaN and inf,
    images, texts and HTML, hparams, results, and an edited column layout."""
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    first = table.new_run("resnet", cli={"lr": 0.1}, comment="ünïcode ✓")
    first.add_hparams(lr=0.1, batch_size=128, optimizer="adam")
    for step in range(300):
        first.add_scalar("train/loss", 1 / (step + 1), epoch=step // 100)
    first.add_scalar("train/loss", math.nan, step=300)
    first.add_scalar("val/acc/top1", math.inf)
    first.add_image(png((255, 0, 0)), tag="samples")
    first.add_text("plain text", tag="notes")
    first.add_fragment("<b>html</b>", tag="report")
    first.add_text("**markdown**", tag="notes", markdown=True)
    first.add_console_line("a console line", stream="stderr")
    first.new_repetition()
    first.add_scalar("train/loss", -math.inf)
    first.set_note("a note")
    first.write_result(accuracy=0.93, loss=math.nan)
    failed = table.new_run("resnet", comment="crashes")
    failed.add_scalar("train/loss", 2.0)
    failed._end("failed")
    hidden = table.new_run("hidden one")
    hidden.write_result(accuracy=0.1)
    table.hide_run(hidden.run_id)
    debug = table.new_debug_run("debugging")
    debug.add_image(png((0, 0, 255)), tag="debug")
    debug.close()
    table.set_column_alias({"accuracy": "Acc."})
    table.hide_column("comment")


def dump_sqlite(path: str) -> dict[str, list[tuple]]:
    with sqlite3.connect(path) as conn:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in ALL_TABLES}


def dump_postgres(url: str) -> dict[str, list[tuple]]:
    with connect(url) as conn:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in ALL_TABLES}


def test_sqlite_to_postgres_to_sqlite_keeps_every_row(tmp_path, pg_url):
    original, returned = str(tmp_path / "original.db"), str(tmp_path / "returned.db")
    fill(original)
    counts = copy_table(original, pg_url, progress=False)
    assert counts["scalar_blocks"] > 0 and counts["media"] == 2 and counts["texts"] == 3
    assert counts["console"] == 1 and counts["environments"] == 4  # every run records one
    copy_table(pg_url, returned, progress=True)
    before, after = dump_sqlite(original), dump_sqlite(returned)
    for table in ALL_TABLES:
        assert after[table] == before[table], table
    assert sum(row[5] for row in before["scalar_blocks"]) == 304  # n: the points of each block
    assert before["media"] and before["hparams"]  # the comparison compared something
    via_postgres = dump_postgres(pg_url)
    assert [row[-1] for row in via_postgres["media"]] == [row[-1] for row in before["media"]]  # PNG bytes


def test_copying_twice_changes_nothing_and_new_ids_follow_the_copied_ones(tmp_path, pg_url):
    original = str(tmp_path / "original.db")
    fill(original)
    copy_table(original, pg_url, progress=False)
    once = dump_postgres(pg_url)
    copy_table(original, pg_url, progress=False)
    assert dump_postgres(pg_url) == once
    with tb.ResultTable(pg_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        run = table.new_run("after the copy")
        run.add_image(png((0, 255, 0)), tag="fresh")
        run.add_scalar("brand/new", 1.0)
        run.write_result(accuracy=1.0)
        assert run.run_id == max(row[0] for row in once["runs"]) + 1
        assert len(run.get_images()) == 1


def test_a_source_that_logged_more_is_brought_up_to_date(tmp_path, pg_url):
    original = str(tmp_path / "original.db")
    table = tb.ResultTable(original, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("live")
    run.add_scalar("train/loss", 1.0)
    run.flush()
    copy_table(original, pg_url, progress=False)
    run.add_scalar("train/loss", 0.5)
    run.write_result(accuracy=0.5)
    copy_table(original, pg_url, progress=False)
    with tb.ResultTable(pg_url) as destination:
        copied = destination.load_run(run.run_id)
        assert [s.value for s in copied.get_scalar("train/loss")] == [1.0, 0.5]
        assert copied.status == "finished"


def test_a_destination_with_other_runs_under_the_same_ids_is_refused_untouched(tmp_path, pg_url):
    original, other = str(tmp_path / "original.db"), str(tmp_path / "other.db")
    fill(original)
    table = tb.ResultTable(other, nocommit_action=tb.NoCommitAction.NOP)
    table.new_run("someone else's run 1").write_result(accuracy=0.0)
    table.new_debug_run("their debug run").close()  # differs from the source's, and must survive too
    before = dump_sqlite(other)
    with pytest.raises(StoreError, match=r"other run ids \[1\]"):
        copy_table(original, other, progress=False)
    assert dump_sqlite(other) == before

"""Records the real database rejects after they passed the checks at the call: split out of their
batch and quarantined, while every other record, and every other run, arrives.

The rejection is the database's own: a CHECK constraint on PostgreSQL, a trigger on SQLite (which
cannot add a CHECK to an existing table), added by the test to the table the run writes to.
"""

import base64
import json
import logging
import math
import random
import sqlite3

import psycopg
import pytest

import tallyboard as tb
from store.schema_versions import downgrade
from tallyboard.run.exit_paths import end_runs
from tallyboard.store import Batch, postgres, sqlite
from tallyboard.store.quarantine import halves, record_json
from tallyboard.store.schema import SCHEMA_VERSION


@pytest.fixture
def table(db_url):
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP, commit_interval=0.05) as table:
        yield table
        end_runs("failed")


def run_sql(db_url: str, sql: str) -> None:
    if "://" in db_url:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(sql)
    else:
        with sqlite3.connect(db_url) as conn:
            conn.executescript(sql)


def refuse(db_url: str, table: str, column: str, bad: str) -> None:
    """Make the database itself reject rows of `table` whose `column` is the SQL literal `bad`."""
    if "://" in db_url:
        run_sql(db_url, f"ALTER TABLE {table} ADD CONSTRAINT test_{table} CHECK ({column} <> {bad})")
        return
    for event in ("INSERT", "UPDATE"):
        run_sql(
            db_url,
            f"CREATE TRIGGER test_{table}_{event} BEFORE {event} ON {table} WHEN NEW.{column} = {bad}"
            f" BEGIN SELECT RAISE(ABORT, 'test refuses this {table} row'); END",
        )


def test_rejected_records_are_quarantined_and_hold_back_nothing(table, db_url, caplog):
    refuse(db_url, "scalar_blocks", "highest", "666")  # a block holding a 666 among ones
    refuse(db_url, "texts", "content", "'poison'")
    refuse(db_url, "hparams", "name", "'bad'")
    refuse(db_url, "runs", "note", "'poison'")
    run = table.new_run("poisoned", auto_log_plt=False)
    other = table.new_run("clean", auto_log_plt=False)
    for step in range(2000):
        run.add_scalar("loss", 666.0 if step in (3, 1500) else 1.0)
        other.add_scalar("loss", step + 0.5)
    run.add_text("poison", tag="notes")
    run.add_text("fine", tag="notes")
    # Row changes are written at once (in the caller's thread): a refusal is a ValueError at the call.
    with pytest.raises(ValueError, match="refused this change"):
        run.add_hparams(lr=0.5, bad=True)
    run.add_hparams(lr=0.5)
    with pytest.raises(ValueError, match="refused this change"):
        run.set_note("poison")
    other.add_text("other text")
    run.flush()  # does not raise: nothing is failing any more
    run.close()
    other.close()

    assert [s.step for s in run.get_scalar("loss")] == [s for s in range(2000) if s not in (3, 1500)]
    assert [s.value for s in other.get_scalar("loss")] == [s + 0.5 for s in range(2000)]
    assert [t["fragment"] for t in run.get_text()] == ["fine"]
    assert [t["fragment"] for t in other.get_text()] == ["other text"]
    assert run.get_hparams() == {"lr": 0.5}
    assert (run.status, other.status) == ("finished", "finished")  # the close after the bad note

    set_aside = table.quarantined(run.run_id)
    assert [(q.kind, q.tag) for q in set_aside] == [
        ("scalar", "loss"), ("scalar", "loss"), ("text", "notes"),
    ]  # fmt: skip
    records = [json.loads(q.record) for q in set_aside]
    assert [(r["step"], r["value"]) for r in records[:2]] == [(3, 666.0), (1500, 666.0)]
    assert records[2]["content"] == "poison"
    assert all(q.error and q.quarantined_at > 0 for q in set_aside)
    assert table.quarantined(other.run_id) == []
    assert len(table.quarantined()) == 3


def test_a_rejected_record_warns_once_per_run_kind_and_tag_without_a_traceback(table, db_url, caplog):
    refuse(db_url, "texts", "content", "'poison'")
    run = table.new_run("poisoned", auto_log_plt=False)
    with caplog.at_level(logging.WARNING, logger="tallyboard.run.sink"):
        for _ in range(3):
            run.add_text("poison", tag="notes")
            run.flush()
        run.add_text("poison", tag="other")
        run.close()
    warnings = [r for r in caplog.records if "rejected" in r.getMessage()]
    assert len(warnings) == 2 and not any(r.exc_info for r in warnings)
    assert f"run {run.run_id}" in warnings[0].getMessage() and "'notes'" in warnings[0].getMessage()
    assert "'other'" in warnings[1].getMessage()
    assert len(table.quarantined(run.run_id)) == 4


def test_a_database_failure_warns_once_keeps_the_rows_and_is_not_quarantined(table, db_url, caplog):
    """A failure of the database, not of a record (here: a trigger writing to a table that does not
    exist): flush() reports it, the log says so once, and once it is fixed everything arrives."""
    if "://" in db_url:
        run_sql(
            db_url,
            "CREATE FUNCTION broken() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN INSERT INTO nowhere VALUES (1); RETURN NEW; END $$;"
            " CREATE TRIGGER broken BEFORE INSERT ON texts FOR EACH ROW EXECUTE FUNCTION broken()",
        )
    else:
        run_sql(
            db_url, "CREATE TRIGGER broken BEFORE INSERT ON texts BEGIN INSERT INTO nowhere VALUES (1); END"
        )
    run = table.new_run("broken", auto_log_plt=False)
    with caplog.at_level(logging.WARNING, logger="tallyboard.run.sink"):
        for index in range(3):
            run.add_text(f"text {index}")
            with pytest.raises(RuntimeError, match="nowhere"):
                run.flush()
        run_sql(db_url, "DROP TRIGGER broken" + (" ON texts" if "://" in db_url else ""))
        run.close()
    failures = [r for r in caplog.records if "could not write" in r.getMessage()]
    assert len(failures) == 1 and not failures[0].exc_info  # then again every REPORT_EVERY (10 s)
    assert any("accepts writes again" in r.getMessage() for r in caplog.records)
    assert [t["fragment"] for t in run.get_text()] == ["text 0", "text 1", "text 2"]
    assert table.quarantined() == [] and run.status == "finished"


def test_halves_split_a_batch_down_to_single_records_in_order():
    rows = [(0, step, None, 0.0, float(step)) for step in range(5)]
    batch = Batch(scalars=[(1, "a", rows)], texts=[(1, "", 0, 0, None, 0.0, "text", "t")])
    left, right = halves(batch)
    assert (left.scalars, left.texts, right.scalars, right.texts) == ([(1, "a", rows)], [], [], batch.texts)
    first, second = halves(left)
    assert first.scalars == [(1, "a", rows[:2])] and second.scalars == [(1, "a", rows[2:])]
    assert halves(Batch(texts=batch.texts)) is None
    assert halves(Batch(scalars=[(1, "a", rows[:1])])) is None


def test_a_quarantined_record_is_kept_losslessly():
    record = {"value": math.nan, "high": math.inf, "text": "x \udcff\x00", "big": 10**5000, "step": 3}
    text = record_json(record)
    assert text.isascii()
    back = json.loads(text)
    assert math.isnan(back["value"]) and back["high"] == math.inf and back["text"] == "x \udcff\x00"
    assert int(back["big"]["int_hex"], 16) == 10**5000 and back["step"] == 3


@pytest.mark.parametrize(
    ("error", "record_level"),
    [
        (sqlite3.IntegrityError("CHECK constraint failed"), True),
        (sqlite3.DataError("string or blob too big"), True),
        (sqlite3.OperationalError("string or blob too big"), True),
        (UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"), True),
        (OverflowError("Python int too large to convert to SQLite INTEGER"), True),
        (sqlite3.OperationalError("database or disk is full"), False),
        (sqlite3.OperationalError("attempt to write a readonly database"), False),
        (sqlite3.OperationalError("disk I/O error"), False),
        (sqlite3.OperationalError("no such table: nowhere"), False),
    ],
)
def test_sqlite_tells_record_errors_from_database_errors(error, record_level):
    assert sqlite.is_record_error(error) is record_level


@pytest.mark.parametrize(
    ("error", "record_level"),
    [
        (psycopg.errors.CheckViolation("check"), True),
        (psycopg.errors.ProgramLimitExceeded("index row size 3016 exceeds btree maximum"), True),
        (psycopg.errors.NumericValueOutOfRange("out of range"), True),
        (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), True),
        (UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"), True),
        (psycopg.OperationalError("connection refused"), False),
        (psycopg.errors.AdminShutdown("terminating connection"), False),
        (psycopg.errors.DiskFull("could not extend file"), False),
        (psycopg.errors.InsufficientPrivilege("permission denied"), False),
        (psycopg.errors.UndefinedTable("relation nowhere does not exist"), False),
    ],
)
def test_postgres_tells_record_errors_from_database_errors(error, record_level):
    assert postgres.is_record_error(error) is record_level


def test_a_version_2_table_gets_the_quarantine_and_keeps_its_runs_unique(db_url):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    table.new_run("exp", cli={"lr": 1}, auto_log_plt=False).close()
    table.close()
    # What tallyboard with schema version 2 left: no quarantine, the unique key indexed whole.
    downgrade(db_url, 2)
    run_sql(
        db_url,
        "DROP INDEX runs_by_unique_key;"
        " CREATE INDEX runs_by_unique_key ON runs (unique_key);"
        " UPDATE meta SET value = '2' WHERE key = 'schema_version'",
    )
    with tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        with pytest.raises(tb.DuplicateRunError):
            table.new_run("exp", cli={"lr": 1}, auto_log_plt=False, on_duplicate="raise")
        refuse(db_url, "texts", "content", "'poison'")
        run = table.new_run("exp", cli={"lr": 2}, auto_log_plt=False)
        run.add_text("poison")
        run.close()
        assert [q.kind for q in table.quarantined(run.run_id)] == ["text"]
        assert table._store.meta("schema_version") == str(SCHEMA_VERSION)


def test_records_that_skip_the_checks_are_quarantined_by_the_engines_own_refusal(table):
    """Records put straight into the sink, past every check at the call: each engine refuses them
    its own way (a surrogate the driver cannot encode, a NUL PostgreSQL text cannot hold, a tag
    longer than PostgreSQL's index rows) -- and the connection, the run and another run go on."""
    run = table.new_run("unchecked", auto_log_plt=False)
    other = table.new_run("other", auto_log_plt=False)
    sink = run._sink
    long_tag = base64.b64encode(random.Random(0).randbytes(6000)).decode()  # 8 kB, not compressible
    for content in ("x \udcff", "a\x00b", "fine"):
        sink.put("texts", (run.run_id, "", 0, 0, None, 0.0, "text", content))
    sink.series(run.run_id, long_tag).append((0, 0, None, 0.0, 1.0))
    sink.series(run.run_id, "bad \udcff").append((0, 0, None, 0.0, 2.0))
    run.add_scalar("good", 3.0)
    other.add_scalar("good", 4.0)
    run.close()
    other.close()
    on_postgres = "://" in table.db_path
    assert [t["fragment"] for t in run.get_text()] == (["fine"] if on_postgres else ["a\x00b", "fine"])
    assert [s.value for s in run.get_scalar("good")] == [3.0]
    assert [s.value for s in other.get_scalar("good")] == [4.0]
    set_aside = [(q.kind, q.tag, json.loads(q.record)) for q in table.quarantined(run.run_id)]
    texts = [record["content"] for kind, _, record in set_aside if kind == "text"]
    assert texts == (["x \udcff", "a\x00b"] if on_postgres else ["x \udcff"])
    scalars = sorted((tag, record["value"]) for kind, tag, record in set_aside if kind == "scalar")
    # The tag column shows a surrogate escaped; the record keeps the value whole.
    assert scalars == ([("bad \\udcff", 2.0), (long_tag, 1.0)] if on_postgres else [("bad \\udcff", 2.0)])
    assert run.status == other.status == "finished"

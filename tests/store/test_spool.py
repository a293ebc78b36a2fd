"""The spool (store/spool.py, store/spool_shipper.py): logging goes to a node-local SQLite file and
arrives in PostgreSQL once, in order, with the database's run ids and uniqueness check.

Outages of a real server (stopped, killed writers) are in tests/crash/test_spool_outage.py.
"""

from __future__ import annotations

import io
import math
from typing import Any

import pytest

import tallyboard as tb
from tallyboard.store import StoreError, open_store
from tallyboard.store.spool import SpoolStore, batch_from_json, batch_to_json, decode, encode
from tallyboard.store.spool_shipper import postgres_destination, ship_once, shipper_for

pytestmark = pytest.mark.usefixtures("shippers_end_with_the_test")  # tests/conftest.py


def png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (2, 2), (0, 128, 255)).save(buffer, format="PNG")
    return buffer.getvalue()


def spooled_table(url: str, spool: str, **options: Any) -> tb.ResultTable:
    return tb.ResultTable(
        url, spool=spool, nocommit_action=tb.NoCommitAction.NOP, commit_interval=0.05, **options
    )


def log_run(table: tb.ResultTable, name: str, steps: int) -> tb.LogWriter:
    run = table.new_run(name, auto_log_plt=False)
    run.add_hparams(lr=0.1, optimizer="adam")
    for step in range(steps):
        run.add_scalar("train/loss", step * 0.5, step=step)
        if step % 100 == 0:
            run.add_text(f"text {step}", tag="log", step=step)
            run.add_image(png(), tag="sample", step=step)
    run.add_scalar("train/loss", math.nan, step=steps)
    run.write_result(acc=0.75)
    return run


def test_a_batch_survives_the_journal_unchanged():
    from tallyboard.store import Batch
    from tallyboard.store.records import QueuedMedia, QueuedText, RunUpdate

    batch = Batch(
        scalars=[(1, "loss", [(0, 3, None, 1.5, math.inf), (0, 4, 1, 1.75, -0.0)])],
        media=[QueuedMedia(1, "img", 0, 0, None, 0.0, "image", 2, 2, b"\x00\xff png")],
        texts=[QueuedText(1, "log", 0, 0, None, 0.0, "text", "ünïcode \U0001f600")],
        run_updates=[RunUpdate(1, {"status": "finished", "end_time": 2.0})],
    )
    assert batch_from_json(decode(encode(batch_to_json(batch)))) == batch
    assert math.isnan(decode(encode([math.nan]))[0])


def test_everything_logged_through_a_spool_arrives_once_with_the_databases_run_id(pg_url, tmp_path):
    spool = str(tmp_path / "spool.db")
    direct = tb.ResultTable(pg_url, nocommit_action=tb.NoCommitAction.NOP)
    direct.new_run("taken first", auto_log_plt=False).close()
    direct.close()
    table = spooled_table(pg_url, spool)
    run = log_run(table, "spooled", 1000)
    assert table.ship(timeout=60)
    assert run.run_id == 1 and table.database_run_id(run.run_id) == 2  # the spool's id, the database's
    db = open_store(pg_url)
    local = SpoolStore(spool)
    steps = db.scalars(2, "train/loss")
    assert [row[1] for row in steps] == list(range(1001)) and steps == local.scalars(1, "train/loss")
    assert [row[-1] for row in db.texts(2)] == [f"text {step}" for step in range(0, 1000, 100)]
    assert [row[-1] for row in db.media(2)] == [png()] * 10
    assert db.values("hparams", 2) == {2: {"lr": 0.1, "optimizer": "adam"}}
    assert db.values("results", 2) == {2: {"acc": 0.75}}
    assert db.run(2).status == "finished"
    db.close()
    assert local.backlog() == (0, None)  # shipped entries leave the journal; the rows stay local
    local.close()


def test_artefacts_logged_through_a_spool_are_listed_in_the_database(pg_url, tmp_path):
    spool, store = str(tmp_path / "spool.db"), str(tmp_path / "store")
    table = tb.ResultTable(pg_url, spool=spool, artifacts=store, nocommit_action=tb.NoCommitAction.NOP)
    (tmp_path / "model.ckpt").write_bytes(b"weights")
    run = table.new_run("kept", auto_log_plt=False)
    run.log_artifact(tmp_path / "model.ckpt", step=3)
    run.close()
    assert table.ship(timeout=60)
    db = open_store(pg_url)
    [row] = db.artifacts(table.database_run_id(run.run_id))
    assert (row.name, row.size, row.step) == ("model.ckpt", 7, 3)
    db.close()


def test_a_shipment_sent_again_is_skipped_by_the_databases_watermark(pg_url, tmp_path):
    """What a process killed between the database's COMMIT and the spool's own note of it leaves:
    the next shipper sends the same entries again; the database already has them and skips them."""
    spool = str(tmp_path / "spool.db")
    table = spooled_table(pg_url, spool)
    shipper_for(spool).stop()  # this process's shipper must not race the test's shipments
    local = SpoolStore(spool)
    run = table.new_run("twice", auto_log_plt=False)
    for step in range(300):
        run.add_scalar("x", float(step))
    run.add_text("once", tag="log")
    run.close()
    entries = local.pending(0, 1000, 2**30)
    assert len(entries) >= 2 and local.pending(0, 1000, 1) == entries[:1]  # a byte budget, not less than one
    destinations = [postgres_destination(pg_url, local.state("spool_id"))]  # a process that dies after this:
    first, _ = destinations[0].ship(entries)
    destinations.append(postgres_destination(pg_url, local.state("spool_id")))  # the next process
    again, created = destinations[1].ship(entries)
    assert again == first and created == [(run.run_id, 1, None)]  # known, for the spool to note
    assert table.database_run_id(run.run_id) is None  # the killed process never noted it
    destinations.append(postgres_destination(pg_url, local.state("spool_id")))
    ship_once(local, destinations[2])
    assert table.database_run_id(run.run_id) == 1
    db = open_store(pg_url)
    assert len(db.scalars(1, "x")) == 300 and [row[-1] for row in db.texts(1)] == ["once"]
    for store in (*destinations, local, db):
        store.close()


def test_a_run_that_duplicates_one_in_the_database_is_shipped_hidden_and_marked(pg_url, tmp_path):
    with tb.ResultTable(pg_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        table.new_run("same", auto_log_plt=False).close()
    table = spooled_table(pg_url, str(tmp_path / "spool.db"), on_duplicate="raise")
    run = table.new_run("same", auto_log_plt=False)  # unique in the spool, not in the database
    run.add_scalar("x", 1.0)
    run.close()
    assert table.ship(timeout=60)
    db = open_store(pg_url)
    duplicate = db.run(table.database_run_id(run.run_id))
    assert duplicate.hidden == 1 and "duplicate of run 1" in duplicate.note
    assert db.scalars(duplicate.run_id, "x")[0][-1] == 1.0  # not lost
    db.close()


def test_a_run_again_through_a_spool_ships_as_a_rerun_by_default(pg_url, tmp_path):
    with tb.ResultTable(pg_url, nocommit_action=tb.NoCommitAction.NOP) as table:
        table.new_run("same", auto_log_plt=False).close()
    table = spooled_table(pg_url, str(tmp_path / "spool.db"))
    run = table.new_run("same", auto_log_plt=False)
    run.close()
    assert table.ship(timeout=60)
    db = open_store(pg_url)
    shipped = db.run(table.database_run_id(run.run_id))
    assert (shipped.hidden, shipped.rerun_of) == (0, 1)
    db.close()
    table.close()


def test_a_spool_ships_to_one_database_only(pg_url, pg_database, tmp_path):
    spool = str(tmp_path / "spool.db")
    spooled_table(pg_url, spool).ship(timeout=10)
    with pytest.raises(StoreError, match="ships to"):
        spooled_table(pg_database, spool)
    with pytest.raises(ValueError, match="postgresql://"):
        tb.ResultTable(str(tmp_path / "results.db"), spool=str(tmp_path / "other.db"))


def test_repeating_a_spools_run_by_its_own_id_is_refused_with_the_reason(pg_url, tmp_path):
    table = spooled_table(pg_url, str(tmp_path / "spool.db"))
    run = table.new_run("r", comment="same", auto_log_plt=False)
    run.close()
    with pytest.raises(StoreError, match="reopened by the database's id"):
        table.new_run("r", comment="same", auto_log_plt=False, on_duplicate="repeat")


def test_sync_of_a_table_that_is_not_a_spool_is_refused_and_changes_nothing(tmp_path, capsys):
    import sqlite3

    from tallyboard.cli import main

    path = str(tmp_path / "results.db")
    with tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP) as table:
        table.new_run("r", auto_log_plt=False).close()

    def tables() -> list[str]:
        with sqlite3.connect(path) as conn:
            return sorted(row[0] for row in conn.execute("SELECT name FROM sqlite_master"))

    before = tables()
    assert main(["sync", path]) == 1
    assert "is not a spool" in capsys.readouterr().err
    assert tables() == before

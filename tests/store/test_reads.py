"""One object per table owns its reads and writes (issue 10): the dashboard's queries are the
store's `reads`, on reader connections its engine lends, read-only when the store was opened to read."""

from __future__ import annotations

import pytest

import tallyboard as tb
from pg_support import scratch_schema
from store.schema_versions import downgrade
from tallyboard.store import Access, open_for_dashboard, open_store


@pytest.fixture
def table_url(db_url):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("reads")
    run.add_scalar("loss", 0.5)
    run.close()
    table.close()
    return db_url


def test_a_store_lends_the_dashboard_one_pool_of_readers(table_url):
    store = open_store(table_url, access=Access.EDIT)
    try:
        assert store.reads is store.reads
        assert store.reads.store is store and store.reads.postgres == (store.dialect == "postgresql")
        assert store.reads.runs_version()[0] == 1
        store.update_run(1, note="seen")
        assert store.reads.run(1)["note"] == "seen"  # the writes are visible to the pool at once
    finally:
        store.close()


def test_the_readers_of_a_store_opened_to_read_cannot_write(table_url):
    store = open_store(table_url, access=Access.READ)
    try:
        assert store.reads.read_only
        conn = store.reader_connection(read_only=True)
        try:
            with pytest.raises(Exception, match=r"(?i)read-?only"):
                conn.execute(store.reader_sql("UPDATE runs SET note = ? WHERE run_id = 1"), ("no",))
        finally:
            conn.close()
    finally:
        store.close()


def test_the_runs_version_changes_with_every_new_edited_or_deleted_run_and_a_v10_table_gets_it(table_url):
    """The version is read by index seeks (largest id, latest edit, deletions counted in `meta`),
    never by counting the runs; a table of schema v10 gains the count at its first write."""
    downgrade(table_url, 10)
    store = open_store(table_url)
    try:
        store.create_run({"experiment": "reads", "start_time": 0.0})  # the first write migrates
        assert store.meta("runs_deleted") == "0"
        seen = [store.reads.runs_version()]
        store.update_run(1, note="seen")
        seen.append(store.reads.runs_version())
        store.delete_run(1)  # not the last run: neither the largest id nor the latest edit moves
        seen.append(store.reads.runs_version())
        store.delete_run(1)  # nothing deleted: nothing changes
        seen.append(store.reads.runs_version())
    finally:
        store.close()
    assert [v.last_run_id for v in seen] == [2, 2, 2, 2] and [v.deleted for v in seen] == [0, 0, 1, 1]
    assert seen[1].updated_at > seen[0].updated_at and len(set(seen)) == 3


def test_a_dashboard_that_may_edit_gives_postgres_its_statistics_and_a_read_only_one_does_not(
    pg_database, monkeypatch
):
    """Tables never analysed (bulk-loaded; autovacuum off or not yet by) are analysed once by a
    dashboard opened to edit, never by a read-only one (it may not write)."""
    monkeypatch.setattr("tallyboard.store.postgres.ANALYZE_FROM_BYTES", 0)  # the tables here are small
    with scratch_schema(pg_database) as url:
        table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
        with table.new_run("stats") as run:
            run.add_hparams(lr=0.1)
        table.close()
        analysed = (
            "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema()"
            " AND last_analyze IS NOT NULL ORDER BY relname"
        )
        for read_only, expected in (
            (True, []),
            (False, [("hparams",), ("results",), ("run_tags",), ("runs",)]),
        ):
            queries, _ = open_for_dashboard(url, read_only)
            try:
                assert queries.read(analysed) == expected, read_only
            finally:
                queries.store.close()  # its reader pool, then its own connection (read-only too)

"""Schema v5 (what imports keep): a version 4 table gains its tables at the first write, and keeps every
row it had; a run deleted as the debug run takes its import rows along."""

from __future__ import annotations

import tallyboard as tb
from store.schema_versions import downgrade
from tallyboard.store import open_store
from tallyboard.store.imported import ImportRecords
from tallyboard.store.records import Batch
from tallyboard.store.schema import SCHEMA_VERSION
from tallyboard.store.tables import IMPORT_RUN_TABLES


def test_a_version_4_table_gains_the_import_tables_at_the_first_write(db_url: str) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("before") as run:
        run.add_scalar("loss", 1.0, step=3)
    table.close()
    downgrade(db_url, 4)
    store = open_store(db_url)
    try:
        store.ready_for_writing()
        assert store.meta("schema_version") == str(SCHEMA_VERSION)
        [run] = store.runs()
        assert [row[1] for row in store.scalars(run.run_id, "loss")] == [3]
        records = ImportRecords(
            scalar_events=[(run.run_id, "loss", [(0, 0, 3, None, 0.5, 1.0), (0, 1, 3, None, 0.6, 2.0)])],
            raw=[(run.run_id, "weights", 0, 3, 0.5, "histogram", "HistogramProto", b"\x01\x02")],
            files=[("/logs/run", "events.out.tfevents.1", run.run_id, 120, 1.7e9, '{"loss": "scalars"}')],
        )
        store.write_import(Batch(), records)
        assert [row[:3] for row in store.scalar_events(run.run_id, "loss")] == [(0, 0, 3), (0, 1, 3)]
        [raw] = store.raw_summaries(run.run_id)
        assert (raw.tag, raw.step, raw.walltime_ms, raw.data) == ("weights", 3, 500, b"\x01\x02")
        assert store.import_progress("/logs/run") == {
            "events.out.tfevents.1": (run.run_id, 120, 1.7e9, {"loss": "scalars"})
        }
    finally:
        store.close()


def test_the_debug_run_replaced_takes_its_import_rows_along(db_url: str) -> None:
    store = open_store(db_url)
    try:
        run_id = store.create_run({"experiment": "debug", "start_time": 0.0}, debug=True)
        records = ImportRecords(
            scalar_events=[(run_id, "loss", [(0, 0, 1, None, 0.0, 1.0)])],
            files=[("/logs/debug", "f", run_id, 10, None, "{}")],
        )
        store.write_import(Batch(), records)
        store.create_run({"experiment": "debug again", "start_time": 1.0}, debug=True)
        for name in IMPORT_RUN_TABLES:
            assert store.execute(f"SELECT COUNT(*) FROM {name}") == [(0,)], name
    finally:
        store.close()

"""Environments stored once per distinct one (schema v12), and the tables written before that."""

from __future__ import annotations

import json

import tallyboard as tb
from store.schema_versions import downgrade
from tallyboard.store import Batch, open_store
from tallyboard.store.environments import sha256_of
from tallyboard.store.records import QueuedEnvironment
from tallyboard.store.schema import SCHEMA_VERSION, SHARED_ENVIRONMENTS_STEP


def environment(host: str) -> str:
    return json.dumps({"hostname": host, "packages": {f"package-{i}": "1.0" for i in range(400)}})


def write_environments(url: str, hosts: list[str]) -> list[int]:
    store = open_store(url)
    try:
        runs = [store.create_run({"experiment": "e", "start_time": 0.0}) for _ in hosts]
        queued = [QueuedEnvironment(r, environment(h)) for r, h in zip(runs, hosts, strict=True)]
        store.write_batch(Batch(environments=queued))
        return runs
    finally:
        store.close()


def texts_stored(url: str) -> list[str]:
    with open_store(url) as store:
        return [row[0] for row in store.execute("SELECT content FROM environment_contents ORDER BY content")]


def test_runs_recorded_in_one_environment_share_its_one_stored_text(db_url: str) -> None:
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    runs = []
    for i in range(3):
        with table.new_run("sweep", cli={"i": i}, auto_log_plt=False) as run:
            runs.append(run.run_id)
    recorded = [table.get_environment(run_id) for run_id in runs]
    table.close()
    assert recorded[0]["packages"] and recorded[0] == recorded[1] == recorded[2]
    assert len(texts_stored(db_url)) == 1


def test_a_later_environment_of_a_run_replaces_its_link_and_leaves_the_shared_text(db_url: str) -> None:
    first, second = write_environments(db_url, ["a", "a"])
    with open_store(db_url) as store:
        store.write_batch(Batch(environments=[QueuedEnvironment(first, environment("b"))]))
        assert json.loads(store.environment(first))["hostname"] == "b"
        assert json.loads(store.environment(second))["hostname"] == "a"
        links = dict(store.execute("SELECT run_id, sha256 FROM environments"))
    assert links == {first: sha256_of(environment("b")), second: sha256_of(environment("a"))}
    assert texts_stored(db_url) == sorted([environment("a"), environment("b")])


def test_a_v11_table_keeps_each_run_s_environment_and_stores_each_text_once(db_url: str) -> None:
    runs = write_environments(db_url, ["a", "b", "a", "a"])
    downgrade(db_url, SHARED_ENVIRONMENTS_STEP)
    with open_store(db_url) as store:
        assert store.schema_version == SHARED_ENVIRONMENTS_STEP
        assert store.execute("SELECT count(*) FROM environments")[0][0] == 4  # a copy per run
    reader = tb.ResultTable(db_url, read_only=True)  # read as it is, not migrated
    assert [reader.get_environment(r)["hostname"] for r in runs] == ["a", "b", "a", "a"]
    reader.close()
    table = tb.ResultTable(db_url)
    table.migrate()
    assert [table.get_environment(r)["hostname"] for r in runs] == ["a", "b", "a", "a"]
    table.close()
    with open_store(db_url) as store:
        assert store.schema_version == SCHEMA_VERSION
    assert texts_stored(db_url) == sorted([environment("a"), environment("b")])

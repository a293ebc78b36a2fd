"""The `Store` contract, held against every engine: runs, uniqueness, batches, versions, reads.

`db_url` is a real SQLite file and a fresh PostgreSQL schema in turn (tests/conftest.py); tests that
open the SQLite file directly live in test_sqlite.py, PostgreSQL's own in test_postgres.py.
"""

import json
import math
import time

import pytest

from tallyboard.store import Access, Batch, DuplicateRunError, open_store, schema


def new_run(store, **fields):
    return store.create_run({"experiment": "e", "start_time": time.time(), **fields})


def test_reopening_keeps_the_recorded_unique_columns(db_url):
    open_store(db_url, ("experiment",)).close()
    with open_store(db_url, ("tag",)) as store:
        assert json.loads(store.meta("unique_columns")) == ["experiment"]


def test_an_older_file_is_migrated_forward_by_the_first_write(db_url, monkeypatch):
    open_store(db_url).close()
    newer = schema.SCHEMA_VERSION + 1
    monkeypatch.setattr("tallyboard.store.migrations.SCHEMA_VERSION", newer)
    monkeypatch.setitem(
        schema.MIGRATIONS, newer - 1, "ALTER TABLE runs ADD COLUMN host TEXT; CREATE INDEX x ON runs (host)"
    )
    with open_store(db_url) as store:
        assert store.meta("schema_version") == str(newer - 1)  # opening alone changes nothing
        new_run(store)
        assert store.meta("schema_version") == str(newer)
        assert store.execute("SELECT host FROM runs") == [(None,)]


def test_create_run_refuses_a_duplicate_but_not_a_failed_hidden_or_debug_one(db_url):
    with open_store(db_url) as store:
        first = new_run(store, unique_key='["a"]')
        with pytest.raises(DuplicateRunError) as info:
            new_run(store, unique_key='["a"]')
        assert info.value.run_id == first
        store.update_run(first, status="failed")
        second = new_run(store, unique_key='["a"]')
        store.update_run(second, hidden=1)
        third = new_run(store, unique_key='["a"]')
        assert first < second < third
        store.create_run({"experiment": "e", "start_time": 0.0, "unique_key": '["b"]'}, debug=True)
        new_run(store, unique_key='["b"]')  # the debug run takes no part in uniqueness


def test_debug_run_replaces_the_previous_one_and_its_records(db_url):
    with open_store(db_url) as store:
        debug = store.create_run({"experiment": "old", "start_time": 0.0}, debug=True)
        store.write_batch(Batch(scalars=[(debug, "loss", [(0, 0, None, 0.0, 1.0)])]))
        again = store.create_run({"experiment": "new", "start_time": 0.0}, debug=True)
        assert debug == again == -1
        assert store.run(-1).experiment == "new"
        assert store.scalars(-1, "loss") == []


def test_new_run_ids_start_above_ids_inserted_explicitly_once_id_sequences_are_synced(db_url):
    store = open_store(db_url)
    store.atomic(
        lambda: store.execute(
            "INSERT INTO runs (run_id, experiment, start_time, updated_at) VALUES (41, 'copied', 0, 0)"
        )
    )
    store.sync_id_sequences()  # every engine has it, so a copy calls it without asking which
    assert new_run(store) == 42
    store.close()


def test_walltimes_are_stored_to_the_nearest_millisecond_on_every_path(db_url):
    store = open_store(db_url)
    run = new_run(store)
    seconds = [1.003, 12.3456, 0.0015, -0.0015, -1.003, 3]  # x 1000 = 1002.99.., .., ties, an int
    expected = [1003, 12346, 2, -2, -1003, 3000]
    store.write_batch(
        Batch(
            scalars=[(run, "s", [(0, step, None, walltime, 0.0) for step, walltime in enumerate(seconds)])],
            media=[
                (run, "m", 0, step, None, walltime, "image", 1, 1, b"p")
                for step, walltime in enumerate(seconds)
            ],
            texts=[(run, "t", 0, step, None, walltime, "text", "x") for step, walltime in enumerate(seconds)],
        )
    )
    assert [row[3] for row in store.scalars(run, "s")] == expected
    assert [row[5] for row in store.media(run, "image")] == expected
    assert [row[5] for row in store.texts(run, "text")] == expected
    store.close()


def test_batch_stores_nan_inf_and_the_last_value_of_a_repeated_step(db_url):
    with open_store(db_url) as store:
        run = new_run(store)
        rows = [
            (0, 0, None, 0.0015, None),
            (0, 1, 3, 1.0, math.inf),
            (0, 2, 3, 2.0, -math.inf),
            (0, 1, 4, 3.0, 7.0),
        ]
        store.write_batch(Batch(scalars=[(run, "a/b/c", rows)]))
        assert store.scalars(run, "a/b/c") == [
            (0, 0, None, 2, None),  # 1.5 ms: halves round away from zero
            (0, 1, 4, 3000, 7.0),
            (0, 2, 3, 2000, -math.inf),
        ]
        assert math.isnan(float(store.scalars(run, "a/b/c", columns=("value_or_nan",))[0][0]))


def test_a_failing_batch_commits_nothing_and_leaves_no_tag_id_cached(db_url):
    with open_store(db_url) as store:
        run = new_run(store)
        bad = Batch(scalars=[(run, "fresh", [(0, 0, None, 0.0, 1.0)])], run_updates=[(run, {"nope": 1})])
        with pytest.raises(ValueError, match="nope"):
            store.write_batch(bad)
        assert store.scalars(run, "fresh") == []
        assert store._tag_ids == {}
        store.write_batch(Batch(scalars=[(run, "fresh", [(0, 0, None, 0.0, 1.0)])]))
        assert store.scalars(run, "fresh") == [(0, 0, None, 0, 1.0)]


def test_hparams_results_and_columns(db_url):
    with open_store(db_url) as store:
        run = new_run(store)
        store.write_batch(
            Batch(hparams=[(run, "lr", "0.1")], results=[(run, "acc", "0.5"), (run, "acc", "0.75")])
        )
        assert store.values("hparams") == {run: {"lr": 0.1}}
        assert store.values("results", run) == {run: {"acc": 0.75}}
        kinds = {c.name: c.kind for c in store.columns()}
        assert kinds["lr"] == "hparam" and kinds["acc"] == "result" and kinds["experiment"] == "run"
        with pytest.raises(KeyError):
            store.set_columns({"missing": {"alias": "x"}})


def test_filters_of_media_and_texts(db_url):
    with open_store(db_url) as store:
        run = new_run(store)
        store.write_batch(
            Batch(
                media=[
                    (run, "a", 0, 1, None, 0.0, "image", 1, 1, b"png1"),
                    (run, "b", 1, 2, 5, 0.0, "figure", 1, 1, b"p2"),
                ],
                texts=[
                    (run, "", 0, 3, None, 0.0, "text", "hi"),
                    (run, "t", 0, 4, None, 0.0, "fragment", "<b>"),
                ],
            )
        )
        assert [r[-1] for r in store.media(run, "image")] == [b"png1"]
        assert [r[-1] for r in store.media(run, None, repetition=1, epoch=5)] == [b"p2"]
        assert store.media(run, None, tag="a", step=2) == []
        assert [r[-1] for r in store.texts(run, "fragment", tag="t")] == ["<b>"]
        with pytest.raises(TypeError, match="unknown filter"):
            store.texts(run, None, colour="red")


def test_reads_in_a_snapshot_do_not_see_commits_made_meanwhile(db_url):
    """What `tallyboard copy` relies on to copy a table that is being logged to."""
    writer = open_store(db_url)
    new_run(writer)
    reader = open_store(db_url, access=Access.READ)
    with reader.snapshot():
        before = reader.runs()
        new_run(writer)
        assert reader.runs() == before
    assert len(reader.runs()) == 2
    reader.close()
    writer.close()


def test_empty_notes_and_tags_of_a_version_2_table_become_null(db_url, monkeypatch):
    """v2 stored "no note" as '', so the documented filter `note == null` found nothing; v4 stores NULL."""
    with monkeypatch.context() as old:  # the table exactly as tallyboard with schema v2 made it
        old.setattr("tallyboard.store.migrations.SCHEMA_VERSION", 2)
        store = open_store(db_url)
        store.atomic(
            lambda: store.execute(
                "INSERT INTO runs (experiment, start_time, updated_at, note, tag)"
                " VALUES ('a', 0, 0, '', ''), ('b', 0, 0, 'kept', 'base')"
            )
        )
        store.execute("CREATE INDEX runs_by_tag ON runs (tag)")  # an index of a later step survives
        store.close()
    store = open_store(db_url)
    try:
        store.ready_for_writing()  # what every write does first
        assert store.meta("schema_version") == str(schema.SCHEMA_VERSION)
        assert [(r.experiment, r.note, r.tag) for r in store.runs()] == [
            ("a", None, None),
            ("b", "kept", "base"),
        ]
        blank = new_run(store, note="", tag="")
        store.update_run(1, note="x")
        store.update_run(1, note="")
        assert store.run(blank).note is None and store.run(blank).tag is None
        assert store.run(1).note is None
        assert new_run(store) == blank + 1  # ids go on from the copied rows
    finally:
        store.close()

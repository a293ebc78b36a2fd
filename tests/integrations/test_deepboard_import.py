"""`tallyboard import deepboard`: a table written by the real deepboard==0.3.0, compared row by row.

The expected side is DeepBoard's own SQLite file read with plain SQL, so every row of every table
(Experiments, ConfigFile, Results, Logs, Images, Fragments, ResultDisplay) is checked against what
the import put into ours.
"""

from __future__ import annotations

import json
import math
import sqlite3
import struct
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from tallyboard.store import open_store
from tallyboard.store.block_codec import walltime_ms as stored_walltime_ms

WRITER = Path(__file__).with_name("deepboard_writer.py")


@pytest.fixture(scope="module")
def deepboard_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("deepboard")
    subprocess.run([sys.executable, str(WRITER), "old.db"], cwd=folder, check=True, timeout=120)
    return folder / "old.db"


def deepboard_rows(path: Path, sql: str) -> list[sqlite3.Row]:
    connection = sqlite3.connect(path)
    connection.row_factory = sqlite3.Row
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def decoded(value: object) -> object:
    """What DeepBoard meant by a `Results.value` (numpy int64 and float32 were stored as bytes)."""
    if isinstance(value, bytes):
        return struct.unpack("<q" if len(value) == 8 else "<f", value)[0]
    return value


def test_every_row_arrives(deepboard_db: Path, db_url: str) -> None:
    url = db_url
    result = run_cli("import", "deepboard", deepboard_db, "--into", url, "--quiet")
    assert "imported 4 DeepBoard runs" in result.stdout
    store = open_store(url)
    try:
        runs = {run.run_id: run for run in store.runs(show_hidden=True)}
        configs = dict(deepboard_rows(deepboard_db, "SELECT run_id, file_content FROM ConfigFile"))
        experiments = deepboard_rows(deepboard_db, "SELECT * FROM Experiments")
        assert sorted(runs) == sorted(row["run_id"] for row in experiments) == [-1, 1, 2, 3]
        for old in experiments:
            new = runs[old["run_id"]]
            assert new.experiment == old["experiment"]
            assert (new.config_path, new.config_hash) == (old["config"], old["config_hash"])
            assert new.config_content == configs[old["run_id"]]
            expected_cli = dict(token.split("=") for token in old["cli"].split()) if old["cli"] else None
            assert (json.loads(new.cli) if new.cli else None) == expected_cli
            # an empty note or tag is NULL (schema v3)
            assert (new.command, new.comment, new.note, new.tag) == (
                old["command"], old["comment"], old["note"] or None, old["tag"] or None
            )  # fmt: skip
            assert new.color == (f"#{old['color']}" if old["color"] else None)
            assert new.start_time == datetime.fromisoformat(old["start"]).timestamp()
            assert (new.status, new.hidden) == (old["status"], old["hidden"])
            assert (new.git_commit, new.git_diff) == (old["commit_hash"], old["diff"])
        assert runs[1].config_content == "lr: 0.1\nepochs: 3\n"
        assert (runs[2].hidden, runs[3].status, runs[1].color) == (1, "failed", "#FF8800")

        hparams, results = store.values("hparams"), store.values("results")
        for row in deepboard_rows(deepboard_db, "SELECT * FROM Results"):
            target = hparams if row["is_hparam"] else results
            assert target[row["run_id"]][row["metric"]] == decoded(row["value"])
        assert hparams[1] == {"lr": 0.1, "bs": 32, "optimizer": "sgd"}

        logs = deepboard_rows(deepboard_db, "SELECT * FROM Logs ORDER BY id_")
        for run_id in runs:
            imported = {
                (tag, rep, step): (epoch, walltime_ms, value)
                for tag in store.tag_names(run_id, "scalars")
                for rep, step, epoch, walltime_ms, value in store.scalars(run_id, tag)
            }
            expected = [row for row in logs if row["run_id"] == run_id]
            assert len(imported) == len(expected)
            for row in expected:
                tag = f"{row['split']}/{row['label']}" if row["split"] else row["label"]
                epoch, walltime_ms, value = imported[(tag, row["run_rep"], row["step"])]
                assert epoch == row["epoch"]
                assert walltime_ms == stored_walltime_ms(row["wall_time"])
                assert value == row["value"] or (value is None and row["value"] is None)
        assert store.repetitions(1) == [0, 1]

        kinds = {"IMAGE": "image", "PLOT": "figure", "RAW": "text", "HTML": "fragment"}
        images = deepboard_rows(deepboard_db, "SELECT * FROM Images ORDER BY id_")
        ours = [(kind, row) for kind in ("image", "figure") for row in store.media(None, kind)]
        assert len(ours) == len(images) == 3
        for old in images:
            (_, _, epoch, _, _, _, _, _, png) = next(
                row for kind, row in ours if kind == kinds[old["img_type"]] and row[1] == old["step"]
                and row[4] == (old["tag"] or "") and row[3] == old["run_rep"]
            )  # fmt: skip
            assert (epoch, png) == (old["epoch"], old["image"])
        fragments = deepboard_rows(deepboard_db, "SELECT * FROM Fragments ORDER BY id_")
        texts = [(kind, row) for kind in ("text", "fragment") for row in store.texts(1, kind)]
        assert sorted((kind, row[1], row[2], row[3], row[4], row[6]) for kind, row in texts) == sorted(
            (kinds[r["fragment_type"]], r["step"], r["epoch"], r["run_rep"], r["tag"] or "", r["fragment"])
            for r in fragments
        )

        columns = {column.name: column for column in store.columns()}
        renamed = {
            "config": "config_path",
            "commit_hash": "git_commit",
            "diff": "git_diff",
            "start": "start_time",
        }
        for old in deepboard_rows(deepboard_db, "SELECT * FROM ResultDisplay"):
            column = columns[renamed.get(old["Name"], old["Name"])]
            assert (column.alias, column.position) == (old["alias"], old["display_order"])
    finally:
        store.close()


def test_importing_twice_and_into_a_used_table(deepboard_db: Path, tmp_path: Path) -> None:
    url = str(tmp_path / "mine.db")
    table = tb.ResultTable(url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_debug_run("my own debug run") as debug:
        debug.add_scalar("x", 7.0)
    table.set_column_alias({"run_id": "#"})
    table.close()

    run_cli("import", "deepboard", deepboard_db, "--into", url, "--quiet")
    again = run_cli("import", "deepboard", deepboard_db, "--into", url, "--quiet")
    assert "imported 0 DeepBoard runs (4 already present)" in again.stdout
    store = open_store(url)
    try:
        runs = store.runs(show_hidden=True)
        assert sorted(run.run_id for run in runs) == [-1, 1, 2, 3]
        assert store.run(-1).experiment == "my own debug run"  # never overwritten by an import
        assert {c.name: c.alias for c in store.columns()}["run_id"] == "#"  # layout of a used table kept
        assert not math.isnan(store.scalars(-1, "x")[0][4])
    finally:
        store.close()


def test_a_file_that_is_not_deepboard_is_a_one_line_error(tmp_path: Path) -> None:
    ours = str(tmp_path / "ours.db")
    tb.ResultTable(ours, nocommit_action=tb.NoCommitAction.NOP).close()
    result = run_cli("import", "deepboard", ours, "--into", tmp_path / "x.db", check=False)
    assert_one_line_error(result, "is not a DeepBoard table")
    missing = run_cli("import", "deepboard", tmp_path / "nope.db", "--into", tmp_path / "x.db", check=False)
    assert_one_line_error(missing, "no DeepBoard table")


def test_an_import_that_failed_part_way_is_completed_by_the_next(deepboard_db: Path, tmp_path: Path) -> None:
    """The database refused the first run's images (they share one batch with its scalars): the
    debug run went in whole, run 1 with nothing of its own. Importing again writes run 1 whole (not
    "already present"), and the others, as one clean import would."""
    from refusing_table import refuse

    clean, resumed = str(tmp_path / "clean.db"), str(tmp_path / "resumed.db")
    run_cli("import", "deepboard", deepboard_db, "--into", clean, "--quiet")
    tb.ResultTable(resumed, nocommit_action=tb.NoCommitAction.NOP).close()
    refuse(resumed, "media")
    failed = run_cli("import", "deepboard", deepboard_db, "--into", resumed, "--quiet", check=False)
    assert_one_line_error(failed, "disk full")
    assert record_counts(resumed) == {-1: (1, 0), 1: (0, 0)}

    refuse(resumed, None)
    again = run_cli("import", "deepboard", deepboard_db, "--into", resumed, "--quiet")
    assert "imported 3 DeepBoard runs (1 already present)" in again.stdout  # the debug run was whole
    assert record_counts(resumed) == record_counts(clean)
    third = run_cli("import", "deepboard", deepboard_db, "--into", resumed, "--quiet")
    assert "imported 0 DeepBoard runs (4 already present)" in third.stdout
    assert record_counts(resumed) == record_counts(clean)


def record_counts(url: str) -> dict[int, tuple[int, int]]:
    """{run id: (scalars, images and figures)} of every run."""
    store = open_store(url)
    try:
        return {
            run.run_id: (
                sum(len(store.scalars(run.run_id, tag)) for tag in store.tag_names(run.run_id, "scalars")),
                len(store.media(run.run_id, "image")) + len(store.media(run.run_id, "figure")),
            )
            for run in store.runs(show_hidden=True)
        }
    finally:
        store.close()

"""DeepBoard's documented usage with only the import changed: the real deepboard==0.3.0 and tallyboard
read back the same things (deepboard_usage.py, each run as a process of its own)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

USAGE = Path(__file__).with_name("deepboard_usage.py")
# Kept on purpose: tallyboard stores the CLI as JSON and the command with its interpreter.
DIFFERENT_BY_DESIGN = {"cli", "command"}
# An empty note or tag is None here (NULL since schema v4, so the filter `note == null` finds it).
EMPTY_IS_NONE = {"note", "tag"}


def usage(library, folder):
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, str(USAGE), library],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_documented_usage_reads_back_the_same(tmp_path):
    theirs = usage("deepboard", tmp_path / "deepboard")
    ours = usage("tallyboard", tmp_path / "tallyboard")
    raw_theirs, raw_ours = theirs.pop("raw"), ours.pop("raw")
    assert ours == theirs
    assert ours["global_step"] == {"train/loss": 3, "accuracy": 1} and ours["accuracy"] == [0.5]
    assert ours["hparams"] == {"lr": 0.1, "momentum": 0.9}  # the dict's value, not the keyword's
    assert (ours["color"], ours["active_colors"], ours["row_color"]) == ("ff8800", ["ff8800"], ["ff8800"])
    assert ours["not_a_number"] is True
    assert ours["cursor"] == ["sqlite3", "Cursor", [1, "a"]]
    assert ours["dict_cursor"] == ["Row", "a", 1, {"one": 1, "letter": "a"}]
    for key, (kind, value) in raw_theirs.items():
        if key in EMPTY_IS_NONE and value == "":
            assert raw_ours[key] == ["NoneType", None], key
            continue
        assert raw_ours[key][0] == kind, key
        if key not in DIFFERENT_BY_DESIGN | {"start"}:
            assert raw_ours[key][1] == value, key
    assert raw_ours["start"][1][10] == "T"  # ISO, as DeepBoard returns it


def test_a_string_that_is_no_number_is_refused_and_nothing_logged(table):
    with table.new_run("strings") as run:
        run.add_scalar("train/loss", " 2.5 ")
        with pytest.raises(TypeError, match="expected a number, got the string 'fast'"):
            run.add_scalar("train/loss", "fast")
        with pytest.raises(ValueError, match="expected a number"):  # what DeepBoard's float() raises
            run.add_scalar("train/loss", "fast")
        with pytest.raises(ValueError, match="expected a number, got list"):
            run.add_scalar("train/loss", [1.0, 2.0])
        run.flush()
        assert [(point.step, point.value) for point in run.get_scalar("train/loss")] == [(0, 2.5)]
    with pytest.raises(ValueError, match="unsupported hash type"):
        table.get_file_hash(__file__, hash_algo="no-such-hash")


def test_the_cursors_read_the_table_and_refuse_writes(table, db_url):
    """DeepBoard's `cursor`/`dict_cursor`, on our tables, on both engines; read-only on purpose
    (docs/result-table.md): a write through them fails and changes nothing."""
    with table.new_run("cursors", comment="first") as run:
        run.set_note("kept")
    placeholder = "%s" if "://" in db_url else "?"
    with table.cursor as cursor:
        cursor.execute(f"SELECT experiment, comment FROM runs WHERE run_id = {placeholder}", (run.run_id,))
        assert tuple(cursor.fetchone()) == ("cursors", "first")
    with table.dict_cursor as cursor:
        cursor.execute("SELECT run_id, note FROM runs")
        [row] = cursor.fetchall()
        assert (row["run_id"], row["note"]) == (run.run_id, "kept")
    with pytest.raises(Exception, match=r"read-?only") as refused, table.cursor as cursor:
        cursor.execute("UPDATE runs SET note = 'changed'")
    assert type(refused.value).__module__.partition(".")[0] in ("sqlite3", "psycopg")
    assert table.get_experiment_raw(run.run_id)["note"] == "kept"

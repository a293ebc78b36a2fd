"""Every `tallyboard` command is one method of `ResultTable`: called from Python, each does what the
command does; a table opened with `read_only=True` never writes, and never creates a missing file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tallyboard as tb
from cli_runner import CLI_TIMEOUT_S, run_cli
from store.test_opening import fingerprint, version_1_table
from tallyboard.analysis.runs_listing import format_runs
from tallyboard.exchange import importers
from tallyboard.json_numbers import dumps
from tallyboard.store import NotAResultTable, ReadOnlyTableError, schema

SRC = Path(tb.__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample table, written by a process that has exited: nothing of this one touches the file."""
    folder = tmp_path_factory.mktemp("sample")
    script = "import sys, pathlib, sample_tables; sample_tables.sample_table_in(pathlib.Path(sys.argv[1]))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(SRC), str(TESTS)))}
    subprocess.run([sys.executable, "-c", script, folder], env=env, check=True, timeout=CLI_TIMEOUT_S)
    return folder / "results.db"


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()
    }


def test_runs_table_is_what_tallyboard_runs_prints(sample_db: Path) -> None:
    table = tb.ResultTable(sample_db, read_only=True)
    everything, finished = table.runs_table(show_hidden=True), table.runs_table('status == "finished"')
    table.close()
    assert json.loads(dumps(everything.rows)) == json.loads(
        run_cli("runs", sample_db, "--json", "--all").stdout
    )
    assert (
        format_runs(finished)
        == run_cli("runs", sample_db, "--filter", 'status == "finished"').stdout.rstrip()
    )


def test_copy_export_and_import_from_python_do_what_the_commands_do(
    sample_db: Path, db_url: str, tmp_path: Path
) -> None:
    with pytest.raises((FileNotFoundError, NotAResultTable)):  # nothing there yet, and nothing made
        tb.ResultTable(db_url, read_only=True)
    source = tb.ResultTable(sample_db, read_only=True)
    assert source.copy_to(db_url)["runs"] == 4
    assert source.copy_to(db_url)["runs"] == 4  # copying twice changes nothing
    source.close()
    assert "copied 4 runs" in run_cli("copy", sample_db, db_url, "--quiet").stdout

    table = tb.ResultTable(db_url, read_only=True)
    counts = table.export(tmp_path / "python", format="jsonl", run_ids=[1, 2])
    table.close()
    run_cli("export", db_url, "--format", "jsonl", "--runs", "1", "2", "--out", tmp_path / "cli", "--quiet")
    assert counts["runs"] == 2
    assert files_of(tmp_path / "python") == files_of(tmp_path / "cli")

    restored = tb.ResultTable(tmp_path / "restored.db")
    summary = restored.import_export(tmp_path / "python")
    assert restored.import_export(tmp_path / "python") == "imported 0 runs (2 already present)"
    restored.close()
    said = run_cli("import", "tallyboard", tmp_path / "cli", "--into", tmp_path / "by_cli.db", "--quiet")
    assert (
        said.stdout.strip()
        == f"{summary} into {tmp_path / 'by_cli.db'}"
        == (f"imported 2 runs (0 already present) into {tmp_path / 'by_cli.db'}")
    )


def test_artifacts_and_migrate_from_python(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"weights")
    writing = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    with writing.new_run("one") as run:
        run.log_artifact(tmp_path / "weights.bin", kind="model")
    writing.close()
    table = tb.ResultTable(tmp_path / "results.db", read_only=True)
    rows = table.list_artifacts(run.run_id)
    listed = run_cli("artifacts", "list", str(run.run_id), "--table", tmp_path / "results.db", "--json")
    assert [row._asdict() for row in rows] == json.loads(listed.stdout)
    assert table.save_artifact(run.run_id, "weights.bin", tmp_path / "got.bin") == rows[0]
    assert (tmp_path / "got.bin").read_bytes() == b"weights"
    with pytest.raises(tb.ReadOnlyTableError):
        table.migrate()
    table.close()

    (tmp_path / "old").mkdir()
    old = version_1_table(tmp_path / "old")
    migrating = tb.ResultTable(old, create=False)
    assert migrating.migrate() == (1, schema.SCHEMA_VERSION)
    assert migrating.migrate() == (schema.SCHEMA_VERSION, schema.SCHEMA_VERSION)
    migrating.close()


def test_a_read_only_table_refuses_every_write_and_leaves_the_file_as_it_was(
    sample_db: Path, tmp_path: Path
) -> None:
    before = fingerprint(sample_db), os.stat(sample_db).st_mtime_ns, os.stat(sample_db).st_size
    table = tb.ResultTable(sample_db, read_only=True)
    writes = {
        "new_run": lambda: table.new_run("x"),
        "new_debug_run": lambda: table.new_debug_run("x"),
        "resume_run": lambda: table.resume_run(1),
        "hide_run": lambda: table.hide_run(1),
        "show_run": lambda: table.show_run(1),
        "set_column_order": lambda: table.set_column_order({"note": 0}),
        "set_column_alias": lambda: table.set_column_alias({"run_id": "#"}),
        "hide_column": lambda: table.hide_column("note"),
        "show_column": lambda: table.show_column("note"),
        "migrate": table.migrate,
        "import_export": lambda: table.import_export(tmp_path),
        "import_deepboard": lambda: table.import_deepboard(tmp_path / "deepboard.db"),
        "import_tensorboard": lambda: table.import_tensorboard(tmp_path),
    }
    for name, write in writes.items():
        with pytest.raises(ReadOnlyTableError, match="read_only=True"):
            write()
        assert name  # (named for the failure report)
    loaded = table.load_run(1)  # a loaded run's row edits go through the table's store, which refuses
    for edit in (
        lambda: loaded.set_note("n"),
        lambda: loaded.add_tags("t"),
        lambda: loaded.set_status("failed"),
    ):
        with pytest.raises(ReadOnlyTableError, match="opened read-only"):
            edit()
    assert table.runs and table.get_results().data  # reading is what it is for
    table.export(tmp_path / "out")
    table.close()
    assert (fingerprint(sample_db), os.stat(sample_db).st_mtime_ns, os.stat(sample_db).st_size) == before


def test_a_read_only_table_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tb.ResultTable(tmp_path / "missing.db", read_only=True)
    with pytest.raises(FileNotFoundError, match="it is a directory"):
        tb.ResultTable(tmp_path, read_only=True)
    with pytest.raises(ValueError, match="spool"):
        tb.ResultTable(tmp_path / "missing.db", read_only=True, spool=tmp_path / "spool.db")
    assert sorted(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tb.ResultTable(tmp_path / "missing.db", create=False)
    assert sorted(tmp_path.iterdir()) == []


def test_an_importer_nobody_registered_is_a_clear_error(tmp_path: Path) -> None:
    table = tb.ResultTable(tmp_path / "results.db")
    with pytest.raises(LookupError, match="no importer named 'mlflow' is installed; installed importers: "):
        table.import_from("mlflow", tmp_path)
    assert {"tensorboard", "deepboard"} <= set(importers.registered())
    table.close()


def test_an_importer_whose_dependency_is_missing_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    ghost = EntryPoint("ghost", "tensorboard.ghost_plugin:import_ghost", importers.GROUP)
    monkeypatch.setattr(importers, "registered", lambda: {"ghost": ghost})
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # importing it now raises ModuleNotFoundError
    with pytest.raises(ModuleNotFoundError, match=r"the ghost importer cannot load: .*\[tensorboard\] extra"):
        importers.load("ghost")

"""`tallyboard export` and `tallyboard import tallyboard`: every format round-trips losslessly.

Each test drives the real command in a subprocess on real SQLite files: a table logged through the
public API is exported, imported into a new table, and exported again. The two tables must hold the
same rows (ids, times, NaN and infinities, PNG bytes, text byte for byte) and the two exports must
be identical files.
"""

from __future__ import annotations

import csv
import filecmp
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from cli_runner import assert_one_line_error, run_cli
from sample_tables import MARKDOWN_TEXT, TEXT_WITH_EVERYTHING, sample_table_in
from store.schema_versions import downgrade
from tallyboard.exchange.formats import FORMATS
from tallyboard.store import is_postgres_url, open_store
from tallyboard.store.records import TEXT_KINDS


def csv_rows(path: Path, reader: Any = csv.DictReader) -> list[Any]:
    """The rows of an exported CSV file (closed again: an open file left to the GC warns)."""
    with path.open(newline="", encoding="utf-8") as file:
        return list(reader(file))


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return sample_table_in(tmp_path_factory.mktemp("sample"))


def table_contents(url: str) -> dict[str, Any]:
    """Everything a table holds, read through the store, in a form `==` can compare (NaN -> 'NaN')."""
    store = open_store(url)
    try:
        runs = store.runs(show_hidden=True)
        contents: dict[str, Any] = {
            "runs": [run._replace(updated_at=None) for run in runs],
            "hparams": store.values("hparams"),
            "results": _nan_safe(store.values("results")),
            "columns": store.columns(),
        }
        for run in runs:
            run_id = run.run_id
            contents[f"repetitions {run_id}"] = store.repetition_starts(run_id)
            for tag in store.tag_names(run_id, "scalars"):
                contents[f"scalars {run_id} {tag}"] = _nan_safe(store.scalars(run_id, tag))
            for kind in ("image", "figure"):
                contents[f"{kind} {run_id}"] = [row[1:] for row in store.media(run_id, kind)]
            markdown = store.markdown_text_ids(run_id)
            for kind in TEXT_KINDS:
                texts = store.texts(run_id, kind)
                contents[f"{kind} {run_id}"] = [(*row[1:], row[0] in markdown) for row in texts]
            contents[f"console {run_id}"] = [line[1:] for line in store.console(run_id)]
            contents[f"environment {run_id}"] = store.environment(run_id)
        return contents
    finally:
        store.close()


def _nan_safe(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_safe(v) for v in value]
    return value


def same_tree(left: Path, right: Path) -> bool:
    compared = filecmp.dircmp(left, right)
    if compared.left_only or compared.right_only or compared.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(left, right, compared.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(left / d, right / d) for d in compared.common_dirs)


@pytest.mark.parametrize("file_format", FORMATS)
def test_export_import_export_is_identical(
    sample_db: str, db_url: str, tmp_path: Path, file_format: str
) -> None:
    first, second, restored = tmp_path / "first", tmp_path / "second", db_url
    run_cli("export", sample_db, "--format", file_format, "--out", first, "--quiet")
    imported = run_cli("import", "tallyboard", first, "--into", restored, "--quiet")
    assert "imported 4 runs" in imported.stdout
    run_cli("export", restored, "--format", file_format, "--out", second, "--quiet")

    assert table_contents(restored) == table_contents(sample_db)
    assert same_tree(first, second)


def test_export_files_hold_every_point_in_plain_columns(sample_db: str, tmp_path: Path) -> None:
    import csv

    csv.field_size_limit(2**31 - 1)  # the runs' git diff of this checkout can be large
    out = tmp_path / "csv"
    result = run_cli("export", sample_db, "--out", out, "--quiet")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "csv"
    assert manifest["counts"]["runs"] == 4
    assert f"{manifest['counts']['scalars']} scalars" in result.stdout

    scalars = csv_rows(out / "scalars.csv")
    loss = [row for row in scalars if row["run_id"] == "1" and row["tag"] == "train/loss"]
    assert len(loss) == 100  # 50 steps x 2 repetitions: full resolution, nothing sampled
    assert [float(row["value"]) for row in loss[:3]] == [1.0, 0.5, 1 / 3]
    odd = [row["value"] for row in scalars if row["run_id"] == "1" and row["tag"] == "train/odd"]
    assert odd == ["nan", "inf", "-inf"] * 2  # a scalar is never missing: NaN is written as NaN
    texts = csv_rows(out / "texts.csv")
    assert [row["content"] for row in texts if row["tag"] == "notes"] == [TEXT_WITH_EVERYTHING] * 2
    assert [row["kind"] for row in texts if row["tag"] == "predictions"] == ["table"]
    assert {
        row["content"]: row["markdown"] for row in texts if row["run_id"] == "1" and row["kind"] != "table"
    } == {
        TEXT_WITH_EVERYTHING: "0",
        MARKDOWN_TEXT: "1",
        "<table><tr><td>1 &amp; 2</td></tr></table>": "0",
    }
    console = csv_rows(out / "console.csv")
    assert [(row["rep"], row["stream"], row["line"]) for row in console] == [
        ("0", "stdout", 'rep 0: ünïcode, "quotes", commas\tand tabs'),
        ("1", "stdout", 'rep 1: ünïcode, "quotes", commas\tand tabs'),
        ("1", "stderr", ""),
        ("1", "log", "WARNING train: loss is NaN"),
    ]
    environments = csv_rows(out / "environments.csv")
    assert sorted(int(row["run_id"]) for row in environments) == [-1, 1, 2, 3]
    assert all("python" in json.loads(row["content"]) for row in environments)
    media = csv_rows(out / "media.csv")
    assert {row["kind"] for row in media} == {"image", "figure"}
    for row in media:
        assert (out / row["file"]).read_bytes().startswith(b"\x89PNG")
    runs = {row["run_id"]: row for row in csv_rows(out / "runs.csv")}
    assert runs["1"]["config_content"] == "lr: 0.1\nlayers: [64, 64]\n"
    assert (runs["1"]["status"], runs["2"]["hidden"], runs["3"]["status"]) == ("finished", "1", "failed")


def test_export_of_chosen_runs(sample_db: str, tmp_path: Path) -> None:
    out = tmp_path / "some"
    run_cli("export", sample_db, "--format", "jsonl", "--out", out, "--runs", "1", "3", "--quiet")
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert [run["run_id"] for run in runs] == [1, 3]
    scalar_runs = {json.loads(line)["run_id"] for line in (out / "scalars.jsonl").read_text().splitlines()}
    assert scalar_runs == {1, 3}


def test_importing_twice_adds_nothing(sample_db: str, db_url: str, tmp_path: Path) -> None:
    out, restored = tmp_path / "out", db_url
    run_cli("export", sample_db, "--format", "parquet", "--out", out, "--quiet")
    run_cli("import", "tallyboard", out, "--into", restored, "--quiet")
    before = table_contents(restored)
    again = run_cli("import", "tallyboard", out, "--into", restored, "--quiet")
    assert "imported 0 runs (4 already present)" in again.stdout
    assert table_contents(restored) == before


def test_import_into_a_table_with_other_runs_renumbers_and_keeps_layout(
    sample_db: str, tmp_path: Path
) -> None:
    import tallyboard as tb

    out, target = tmp_path / "out", str(tmp_path / "busy.db")
    run_cli("export", sample_db, "--out", out, "--quiet")
    table = tb.ResultTable(target, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("other") as run:
        run.add_scalar("train/loss", 2.0)
        run.write_result(accuracy=0.5)
    table.set_column_alias({"accuracy": "mine"})
    table.close()

    run_cli("import", "tallyboard", out, "--into", target, "--quiet")
    contents = table_contents(target)
    ids = {(run.experiment, run.comment): run.run_id for run in contents["runs"]}
    assert ids == {
        ("other", None): 1,  # the table's own run keeps its id
        ("mnist", "baseline"): 4,  # 1 was taken: after the largest id in use
        ("mnist", "hidden one"): 2,
        ("mnist", "crashes"): 3,
        ("scratch", None): -1,
    }
    assert contents["scalars 4 train/loss"] == table_contents(sample_db)["scalars 1 train/loss"]
    assert {c.name: c.alias for c in contents["columns"]}["accuracy"] == "mine"


def test_an_export_of_version_1_still_imports(sample_db: str, db_url: str, tmp_path: Path) -> None:
    """Version 1 (before console, environments and the markdown flag) imports with what it has:
    every text plain, no console, no environment."""
    import csv

    csv.field_size_limit(2**31 - 1)
    out = tmp_path / "v1"
    run_cli("export", sample_db, "--out", out, "--quiet")
    for name in ("console.csv", "environments.csv"):
        (out / name).unlink()
    texts = csv_rows(out / "texts.csv", csv.reader)
    with (out / "texts.csv").open("w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows(row[:-1] for row in texts)
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "tallyboard_export": 1}))

    run_cli("import", "tallyboard", out, "--into", db_url, "--quiet")
    restored, source = table_contents(db_url), table_contents(sample_db)
    assert restored["text 1"] == [(*row[:-1], False) for row in source["text 1"]]
    assert restored["console 1"] == [] and restored["environment 1"] is None
    assert restored["scalars 1 train/loss"] == source["scalars 1 train/loss"]


@pytest.mark.parametrize("file_format", FORMATS)
def test_artifacts_come_back_with_their_runs_each_file_stored_once(
    db_url: str, tmp_path: Path, file_format: str
) -> None:
    import tallyboard as tb

    source = tmp_path / "source"
    source.mkdir()
    checkpoint = source / "model.ckpt"
    checkpoint.write_bytes(os.urandom(3 * 1024 * 1024 + 17))  # several chunks
    (source / "notes.txt").write_text("epoch 3 was best")
    table = tb.ResultTable(source / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("first") as first:
        first.log_artifact(checkpoint, step=3, kind="model")
        first.log_artifact(source / "notes.txt")
    with table.new_run("second") as second:
        second.log_artifact(checkpoint, name="../same bytes.ckpt", kind="model")
    table.close()
    backup, again = tmp_path / "backup", tmp_path / "again"
    run_cli("export", source / "results.db", "--format", file_format, "--out", backup, "--quiet")

    postgres = is_postgres_url(db_url)
    folder = tmp_path / ("shared" if postgres else "results.artifacts")  # SQLite: next to results.db
    configured = ["--artifacts", str(folder)] if postgres else []
    if postgres:  # no folder next to a server: refused before anything is written
        refused = run_cli("import", "tallyboard", backup, "--into", db_url, check=False)
        assert_one_line_error(refused, "carries artefacts", "--artifacts")
    imported = run_cli("import", "tallyboard", backup, "--into", db_url, *configured, "--quiet")
    assert "imported 2 runs" in imported.stdout

    assert _artifact_lists(db_url) == _artifact_lists(str(source / "results.db"))
    assert len([p for p in (folder / "sha256").rglob("*") if p.is_file()]) == 2  # the shared bytes once
    got = tmp_path / "got.ckpt"
    run_cli("artifacts", "get", str(second.run_id), "../same bytes.ckpt", "-o", got, "--table", db_url,
            *configured)  # fmt: skip
    assert got.read_bytes() == checkpoint.read_bytes()
    run_cli("export", db_url, "--format", file_format, "--out", again, *configured, "--quiet")
    assert same_tree(backup, again)


def _artifact_lists(url: str) -> dict[int, list[Any]]:
    store = open_store(url)
    try:
        return {run.run_id: store.artifacts(run.run_id) for run in store.runs()}
    finally:
        store.close()


def test_export_errors_are_one_line(sample_db: str, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    assert_one_line_error(run_cli("export", sample_db, "--out", busy, check=False), "not an empty directory")
    assert (busy / "keep.txt").read_text() == "mine"
    missing_run = run_cli("export", sample_db, "--out", tmp_path / "x", "--runs", "42", check=False)
    assert_one_line_error(missing_run, "no run with id 42")
    assert_one_line_error(
        run_cli("export", tmp_path / "nope.db", "--out", tmp_path / "y", check=False), "nope.db"
    )
    assert not (tmp_path / "nope.db").exists()
    not_export = run_cli("import", "tallyboard", busy, "--into", tmp_path / "z.db", check=False)
    assert_one_line_error(not_export, "not a tallyboard export")
    elsewhere = run_cli(
        "import", "tensorboard", busy, "--artifacts", busy, "--into", tmp_path / "w.db", check=False
    )
    assert_one_line_error(elsewhere, "--artifacts applies to `import tallyboard` only")
    assert not (tmp_path / "w.db").exists()


def test_a_damaged_export_imports_nothing(sample_db: str, tmp_path: Path) -> None:
    out, target = tmp_path / "out", tmp_path / "target.db"
    run_cli("export", sample_db, "--out", out, "--quiet")
    next((out / "media").rglob("*.png")).unlink()
    result = run_cli("import", "tallyboard", out, "--into", target, check=False)
    assert_one_line_error(result, "the export lacks media/")
    assert not target.exists()  # checked before anything is written: no half-imported run for a retry to skip


def test_an_export_missing_an_artifact_file_imports_nothing(tmp_path: Path) -> None:
    import tallyboard as tb

    (tmp_path / "weights.bin").write_bytes(b"weights")
    table = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("one") as run:
        run.log_artifact(tmp_path / "weights.bin")
    table.close()
    out, target = tmp_path / "out", tmp_path / "target.db"
    run_cli("export", tmp_path / "results.db", "--out", out, "--quiet")
    blob = next(p for p in (out / "artifacts" / "sha256").rglob("*") if p.is_file())
    blob.unlink()
    result = run_cli("import", "tallyboard", out, "--into", target, check=False)
    assert_one_line_error(result, f"the export lacks artifacts/sha256/{blob.name[:2]}/{blob.name}")
    assert not target.exists()


def test_a_table_older_than_the_import_tables_is_exported_as_it_is(tmp_path: Path) -> None:
    import tallyboard as tb

    path = str(tmp_path / "old.db")
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("old") as run:
        run.add_scalar("loss", 1.0)
    table.close()
    downgrade(path, 4)  # no scalar_events, raw_summaries, import_files
    result = run_cli("export", path, "--out", tmp_path / "out", "--quiet")
    assert "1 scalars" in result.stdout and "0 scalar_events, 0 raw_summaries" in result.stdout


def test_a_table_older_than_the_console_is_exported_as_it_is(tmp_path: Path) -> None:
    import tallyboard as tb

    path = str(tmp_path / "old.db")
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("old") as run:
        run.add_text("plain", tag="notes")
    table.close()
    downgrade(path, 7)  # what a version-7 tallyboard left: no console, no environments
    out = tmp_path / "out"
    result = run_cli("export", path, "--format", "jsonl", "--out", out, "--quiet")
    assert "0 console, 0 environments" in result.stdout
    (text,) = [json.loads(line) for line in (out / "texts.jsonl").read_text().splitlines()]
    assert (text["content"], text["markdown"]) == ("plain", 0)
    store = open_store(path)
    assert store.meta("schema_version") == "7"  # exporting changed nothing
    store.close()


@pytest.mark.parametrize("file_format", FORMATS)
def test_what_only_imports_keep_round_trips(tmp_path: Path, file_format: str) -> None:
    """A TensorBoard series that logged steps again keeps every point in `scalar_events`, and an
    import before schema v7 kept histograms as raw bytes in `raw_summaries`: both come back."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    from integrations.tb_reference import framed
    from tallyboard.store.imported import ImportRecords
    from tallyboard.store.records import Batch

    steps = [0, 1, 2, 1, 2, 3]  # a restart from step 1
    events = [event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2")]
    for index, step in enumerate(steps):
        value = summary_pb2.Summary.Value(tag="loss", simple_value=float("nan") if index == 4 else index)
        events.append(
            event_pb2.Event(wall_time=1.7e9 + index, step=step, summary=summary_pb2.Summary(value=[value]))
        )
    run_dir = tmp_path / "logs" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "events.out.tfevents.1700000000.host").write_bytes(
        b"".join(framed(event.SerializeToString()) for event in events)
    )
    source = str(tmp_path / "source.db")
    run_cli("import", "tensorboard", tmp_path / "logs", "--into", source, "--quiet")
    store = open_store(source)
    try:
        [run] = store.runs()
        raw = [(run.run_id, "weights", 0, 3, 0.5, "histogram", "HistogramProto", bytes(range(256)))]
        store.write_import(Batch(), ImportRecords(raw=raw))
    finally:
        store.close()

    first, second, restored = tmp_path / "first", tmp_path / "second", str(tmp_path / "restored.db")
    result = run_cli("export", source, "--format", file_format, "--out", first, "--quiet")
    assert "6 scalar_events, 1 raw_summaries" in result.stdout
    run_cli("import", "tallyboard", first, "--into", restored, "--quiet")
    run_cli("export", restored, "--format", file_format, "--out", second, "--quiet")
    assert imported_rows(restored) == imported_rows(source)
    assert [row[2] for row in imported_rows(source)["scalar_events"]] == steps
    assert same_tree(first, second)


def imported_rows(url: str) -> dict[str, list[Any]]:
    store = open_store(url)
    try:
        [run] = store.runs()
        return {
            "scalar_events": _nan_safe(store.scalar_events(run.run_id, "loss")),
            "raw_summaries": store.raw_summaries(run.run_id),
        }
    finally:
        store.close()

"""An import that fails part-way can be completed: importing the intact export again writes the run
it left partial, whole and once, and a third import adds nothing.

The failures are real ones, in the real command: the target database refusing a kind of record (a
trigger, as a full disk or a constraint added by hand would), and an artefact's file damaged in the
middle of the export, which is found only once the rows are in.
"""

from __future__ import annotations

from pathlib import Path

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from exchange.one_run import stored
from refusing_table import refuse
from tallyboard.store import open_store

COMPLETE = {"runs": ["sent"], "images": 1, "artifacts": 1, "scalars": 100}


def new_table(path: Path) -> Path:
    tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP).close()
    return path


def import_export(export: Path, target: Path, check: bool = True) -> str:
    result = run_cli("import", "tallyboard", export, "--into", target, "--quiet", check=check)
    return result.stdout if check else result.stderr


def test_a_run_left_partial_by_a_failed_import_is_completed_by_the_next(export: Path, tmp_path: Path) -> None:
    target = new_table(tmp_path / "target.db")
    refuse(target, "media")
    assert "disk full" in import_export(export, target, check=False)
    assert stored(target) == {**COMPLETE, "images": 0, "artifacts": 0}  # the scalars went in, then it stopped

    refuse(target, None)
    assert "imported 1 runs (0 already present)" in import_export(export, target)
    assert stored(target) == COMPLETE
    assert "imported 0 runs (1 already present)" in import_export(export, target)
    assert stored(target) == COMPLETE


def test_a_run_whose_import_stopped_before_any_record_is_completed(export: Path, tmp_path: Path) -> None:
    """The case of the report: the run created, none of its 100 scalars and 1 image written."""
    target = new_table(tmp_path / "target.db")
    refuse(target, "scalar_blocks")  # the first records after the run (it has no hparams or results)
    import_export(export, target, check=False)
    assert stored(target) == {"runs": ["sent"], "images": 0, "artifacts": 0, "scalars": 0}

    refuse(target, None)
    import_export(export, target)
    assert stored(target) == COMPLETE


def test_an_artifact_damaged_in_the_middle_of_the_export_then_mended(export: Path, tmp_path: Path) -> None:
    [blob] = [path for path in (export / "artifacts" / "sha256").rglob("*") if path.is_file()]
    intact = blob.read_bytes()
    blob.write_bytes(intact[:-1] + bytes([intact[-1] ^ 1]))  # same size, other bytes
    target = tmp_path / "target.db"
    result = run_cli("import", "tallyboard", export, "--into", target, "--quiet", check=False)
    assert_one_line_error(result, "the source store is damaged")
    assert stored(target) == {**COMPLETE, "artifacts": 0}  # its rows in, its artefact not
    kept = [path for path in (tmp_path / "target.artifacts").rglob("*") if path.is_file()]
    assert kept == []  # the damaged copy was not kept, not even as a temporary file

    blob.write_bytes(intact)
    assert "imported 1 runs (0 already present)" in import_export(export, target)
    assert stored(target) == COMPLETE  # one image, not two
    assert "imported 0 runs (1 already present)" in import_export(export, target)
    assert stored(target) == COMPLETE


def test_a_complete_run_is_left_alone_even_when_its_table_had_a_partial_one(
    export: Path, tmp_path: Path
) -> None:
    """Only the runs an import left incomplete are written again (under the id they had); a run
    the user logged is never touched."""
    target = new_table(tmp_path / "target.db")
    table = tb.ResultTable(target, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("mine") as run:
        run.add_scalar("loss", 0.5)
    table.close()
    refuse(target, "media")
    import_export(export, target, check=False)
    refuse(target, None)
    import_export(export, target)
    assert stored(target) == {**COMPLETE, "runs": ["mine", "sent"], "scalars": 101}
    assert run_ids(target) == {"mine": 1, "sent": 2}  # 1 was taken: "sent" got 2, and got it back


def run_ids(path: Path) -> dict[str, int]:
    store = open_store(str(path))
    try:
        return {run.experiment: run.run_id for run in store.runs(show_hidden=True)}
    finally:
        store.close()

"""An export made by someone else cannot make `tallyboard import tallyboard` read a file of this
machine: a name with "..", an absolute one, /etc/passwd, or a symlink in the export that leads out
of it is refused with a one-line error naming the entry, and nothing is stored.

The exports are real ones (`tallyboard export` of a table logged through the public API), edited
on disk the way a hostile sender would; the import is the real command in a subprocess.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from exchange.one_run import stored


def png_of(value: int) -> bytes:
    from tallyboard.media import to_png

    return to_png(np.full((4, 4, 3), value, dtype=np.uint8))[0]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A PNG outside the export: were it read, it would pass every check but confinement."""
    secret = tmp_path / "elsewhere" / "secret.png"
    secret.parent.mkdir()
    secret.write_bytes(png_of(200))
    return secret


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A table that has a run of its own already: a refused import must leave it as it was."""
    path = tmp_path / "target.db"
    table = tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("mine") as run:
        run.add_scalar("loss", 0.5)
    table.close()
    return path


def name_media_file(export: Path, name: str) -> None:
    """Rewrite media.csv so that its one row names `name` as its PNG."""
    with (export / "media.csv").open(newline="", encoding="utf-8") as file:
        header, *rows = list(csv.reader(file))
    with (export / "media.csv").open("w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows([header, *([*row[:-1], name] for row in rows)])


def assert_refused(export: Path, target: Path, *fragments: str) -> None:
    before = stored(target)
    result = run_cli("import", "tallyboard", export, "--into", target, check=False)
    assert result.returncode == 1
    assert_one_line_error(result, "outside", "refused", *fragments)
    assert stored(target) == before == {"runs": ["mine"], "images": 0, "artifacts": 0, "scalars": 1}
    assert not (target.parent / "target.artifacts" / "sha256").exists()  # no artefact copied either


@pytest.mark.parametrize("form", ["dot-dot", "absolute", "etc-passwd"])
def test_a_media_file_named_outside_the_export_is_refused(
    export: Path, outside: Path, target: Path, form: str
) -> None:
    name = {
        "dot-dot": os.path.relpath(outside, export),  # ../elsewhere/secret.png
        "absolute": str(outside),
        "etc-passwd": "/etc/passwd",
    }[form]
    name_media_file(export, name)
    assert_refused(export, target, "media.csv (run 1)", repr(name))


def test_a_media_file_that_is_a_symlink_leading_out_is_refused(
    export: Path, outside: Path, target: Path
) -> None:
    [png] = (export / "media").rglob("*.png")
    png.unlink()
    png.symlink_to(outside)
    assert_refused(export, target, "media.csv (run 1)", "a symlink leading to", str(outside))


def test_a_media_folder_that_is_a_symlink_leading_out_is_refused(
    export: Path, outside: Path, target: Path
) -> None:
    [png] = (export / "media").rglob("*.png")
    os.replace(outside, outside.parent / png.name)  # the same name, out there
    folder = png.parent
    png.unlink()
    folder.rmdir()
    folder.symlink_to(outside.parent, target_is_directory=True)
    assert_refused(export, target, "media.csv (run 1)", "a symlink")


def test_a_row_file_that_is_a_symlink_leading_out_is_refused(
    export: Path, tmp_path: Path, target: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.csv"
    os.replace(export / "scalars.csv", elsewhere)  # a file that would even parse
    (export / "scalars.csv").symlink_to(elsewhere)
    assert_refused(export, target, "scalars.csv")


def test_an_artifact_blob_that_is_a_symlink_leading_out_is_refused(
    export: Path, tmp_path: Path, target: Path
) -> None:
    """Even with the right bytes out there (the hash matches): the export may only name its own files."""
    [blob] = [path for path in (export / "artifacts" / "sha256").rglob("*") if path.is_file()]
    elsewhere = tmp_path / "weights-elsewhere.bin"
    os.replace(blob, elsewhere)
    blob.symlink_to(elsewhere)
    assert_refused(export, target, "artifacts (blob", "a symlink leading to")


def test_a_refused_export_creates_no_table(export: Path, tmp_path: Path) -> None:
    name_media_file(export, "/etc/passwd")
    fresh = tmp_path / "fresh.db"
    result = run_cli("import", "tallyboard", export, "--into", fresh, check=False)
    assert_one_line_error(result, "media.csv (run 1) names '/etc/passwd', an absolute path")
    assert not fresh.exists()


def test_a_media_file_inside_the_export_that_is_no_png_is_refused(export: Path, target: Path) -> None:
    """What the table stores as an image is a PNG, whoever wrote the export."""
    [png] = (export / "media").rglob("*.png")
    png.write_text("root:x:0:0:root:/root:/bin/bash\n")
    before = stored(target)
    result = run_cli("import", "tallyboard", export, "--into", target, check=False)
    assert_one_line_error(result, "media.csv (run 1)", "not a PNG image")
    assert stored(target) == before


def test_symlinks_that_stay_inside_the_export_are_followed(export: Path, tmp_path: Path) -> None:
    """Confinement is about where a file is, not how it is reached: a symlink within the export is fine."""
    [png] = (export / "media").rglob("*.png")
    kept = export / "media" / "kept.png"
    os.replace(png, kept)
    png.symlink_to(Path("..") / kept.name)
    fresh = tmp_path / "fresh.db"
    run_cli("import", "tallyboard", export, "--into", fresh, "--quiet")
    assert stored(fresh) == {"runs": ["sent"], "images": 1, "artifacts": 1, "scalars": 100}

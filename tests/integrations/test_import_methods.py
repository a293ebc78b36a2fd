"""`ResultTable.import_tensorboard` and `import_deepboard`: one call from Python does what
`tallyboard import tensorboard|deepboard` does, found through the `tallyboard.importers` entry
points (exchange/importers.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tallyboard as tb
from cli_runner import CLI_TIMEOUT_S, run_cli

DEEPBOARD_WRITER = Path(__file__).with_name("deepboard_writer.py")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two TensorBoard runs with a few scalars."""
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path_factory.mktemp("tb")
    for name in ("baseline", "sweep/lr_0.01"):
        writer = SummaryWriter(str(root / name))
        for step in range(5):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
        writer.close()
    return root


def test_import_tensorboard_from_python_is_the_command(logdir: Path, db_url: str, tmp_path: Path) -> None:
    table = tb.ResultTable(db_url)
    passes: list = []
    report = table.import_tensorboard(logdir, finished_after=0, on_pass=passes.append)
    again = table.import_tensorboard(logdir, finished_after=0)  # importing twice adds nothing
    table.close()
    assert passes == [report] and sorted(report.new) == ["baseline", "sweep/lr_0.01"]
    assert again.new == [] and sorted(again.unchanged) == ["baseline", "sweep/lr_0.01"]
    into = tmp_path / "by_cli.db"
    said = run_cli("import", "tensorboard", logdir, "--into", into, "--quiet", "--finished-after", "0")
    assert said.stdout == f"{report.text()}\ninto {into}\n"


def test_import_deepboard_from_python_is_the_command(db_url: str, tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(DEEPBOARD_WRITER), "old.db"], cwd=tmp_path, check=True,
                   timeout=CLI_TIMEOUT_S)  # fmt: skip
    table = tb.ResultTable(db_url)
    summary = table.import_deepboard(tmp_path / "old.db")
    assert table.import_deepboard(tmp_path / "old.db") == "imported 0 DeepBoard runs (4 already present)"
    assert len(table.runs) == 4
    table.close()
    into = tmp_path / "by_cli.db"
    said = run_cli("import", "deepboard", tmp_path / "old.db", "--into", into, "--quiet")
    assert (
        said.stdout
        == f"{summary} into {into}\n"
        == f"imported 4 DeepBoard runs (0 already present) into {into}\n"
    )


def test_a_failed_import_into_a_new_file_leaves_no_file(tmp_path: Path) -> None:
    """The command opens the target first (`ResultTable(into)`), so a source found bad afterwards
    must not leave an empty table behind."""
    into = tmp_path / "new.db"
    for kind in ("tensorboard", "deepboard", "tallyboard"):
        result = run_cli("import", kind, tmp_path / "nope", "--into", into, check=False)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert sorted(path.name for path in tmp_path.iterdir()) == []

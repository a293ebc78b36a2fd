"""Every importer leaves a PostgreSQL table ready for `new_run` (issue 11).

Importers write runs under ids of their choosing (a DeepBoard run keeps its id where it is free),
which PostgreSQL's identity sequences do not see; the next `new_run` then collided with an imported
run (`UniqueViolation ... Key (run_id)=(1)`). Each importer is run for real, then a run is logged.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import tallyboard as tb
from cli_runner import run_cli

pytestmark = pytest.mark.postgres
WRITER = Path(__file__).with_name("deepboard_writer.py")


def deepboard_source(folder: Path) -> Path:
    subprocess.run([sys.executable, str(WRITER), "old.db"], cwd=folder, check=True, timeout=120)
    return folder / "old.db"


def tensorboard_source(folder: Path) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    for name in ("first", "second"):
        writer = SummaryWriter(str(folder / "logs" / name))
        writer.add_scalar("loss", 1.0, 0)
        writer.close()
    return folder / "logs"


def tallyboard_source(folder: Path) -> Path:
    table = tb.ResultTable(str(folder / "source.db"), nocommit_action=tb.NoCommitAction.NOP)
    for comment in ("a", "b"):
        with table.new_run("exported", comment=comment) as run:
            run.add_scalar("loss", 1.0)
    table.close()
    run_cli("export", folder / "source.db", "--out", folder / "export", "--quiet")
    return folder / "export"


@pytest.mark.parametrize(
    ("kind", "source"),
    [("deepboard", deepboard_source), ("tensorboard", tensorboard_source), ("tallyboard", tallyboard_source)],
)
def test_a_run_starts_after_an_import_into_postgresql(
    kind: str, source: Callable[[Path], Path], tmp_path: Path, pg_url: str
) -> None:
    run_cli("import", kind, source(tmp_path), "--into", pg_url, "--quiet")
    table = tb.ResultTable(pg_url, nocommit_action=tb.NoCommitAction.NOP)
    try:
        imported = set(table.runs)
        assert imported
        with table.new_run("logged after the import") as run:
            run.add_scalar("loss", 0.5)
        assert run.run_id not in imported
        assert set(table.runs) == imported | {run.run_id}
    finally:
        table.close()

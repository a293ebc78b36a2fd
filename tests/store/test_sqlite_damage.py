"""A SQLite file whose middle pages are damaged: refused at open, or named by the read that meets
the damage, always as `DamagedTableError` with the way out, never a raw sqlite3 error or a 500."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import tallyboard as tb
from cli_runner import assert_one_line_error, run_cli
from tallyboard.dashboard import create_app
from tallyboard.store.sqlite_damage import WHOLE_CHECK_PAGES

PAGE = 4096  # SQLite's default page size, which our tables keep


def logged_table(path: Path, points: int) -> int:
    """A real table at `path` with one finished run of `points` scalars, all in the one file (no
    `-wal` that a writer still open in this process would fold back over the damage); its run id."""
    logged = path.with_name("logged.db")
    table = tb.ResultTable(str(logged), nocommit_action=tb.NoCommitAction.NOP)
    run = table.new_run("damaged", cli={"points": points})
    for step in range(points):
        run.add_scalar("train/loss", step * 0.5, step=step)
    run.write_result(accuracy=0.5)
    table.close()
    conn = sqlite3.connect(logged)
    conn.execute("VACUUM INTO ?", (str(path),))
    conn.close()
    return run.run_id


def scalar_leaves(path: Path) -> list[int]:
    """The page numbers of the `scalar_blocks` table's leaves and overflow pages (a block's points
    fill two of those), in key order."""
    conn = sqlite3.connect(path)
    pages = [row[0] for row in conn.execute(
        "SELECT pageno FROM dbstat WHERE name = 'scalar_blocks' AND pagetype IN ('leaf', 'overflow')"
        " ORDER BY path"
    )]  # fmt: skip
    conn.close()
    return pages


def damage(path: Path, pages: list[int]) -> None:
    """Overwrite each page with bytes no page of SQLite's holds (an overflow page's first four bytes
    name the next one: SQLite notices those)."""
    with open(path, "r+b") as file:
        for page in pages:
            file.seek((page - 1) * PAGE)
            file.write(b"\xde\xad" * (PAGE // 2))


@pytest.fixture
def damaged_small(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    logged_table(path, 3000)
    leaves = scalar_leaves(path)
    assert len(leaves) > 6 and path.stat().st_size // PAGE <= WHOLE_CHECK_PAGES
    damage(path, leaves[len(leaves) // 3 : 2 * len(leaves) // 3])
    return path


@pytest.mark.parametrize("read_only", [False, True])
def test_a_damaged_table_is_refused_at_open_and_left_as_it_was(damaged_small: Path, read_only: bool):
    before = damaged_small.read_bytes()
    refused = r"is damaged: SQLite cannot read .*nothing was changed.*\.recover"
    with pytest.raises(tb.DamagedTableError, match=refused):
        tb.ResultTable(str(damaged_small), read_only=read_only)
    assert damaged_small.read_bytes() == before
    assert not damaged_small.with_name("results.db-wal").exists()


def test_serve_refuses_a_damaged_table_in_one_line(damaged_small: Path):
    result = run_cli("serve", damaged_small, "--port", "0", check=False)
    assert_one_line_error(result, "tallyboard serve: error:", "is damaged", ".recover")
    assert result.returncode == 1


def test_damage_beyond_the_check_at_open_is_named_by_the_read_that_meets_it(tmp_path: Path):
    path = tmp_path / "results.db"
    run_id = logged_table(path, 60_000)
    assert path.stat().st_size // PAGE > WHOLE_CHECK_PAGES  # too large to be read whole at open
    leaves = scalar_leaves(path)
    damage(path, leaves[len(leaves) // 2 : len(leaves) // 2 + 3])
    table = tb.ResultTable(str(path), read_only=True)
    with pytest.raises(tb.DamagedTableError, match=r"is damaged.*this statement changed nothing"):
        table.load_run(run_id).get_scalar("train/loss")
    table.close()
    with TestClient(create_app(str(path), read_only=True), base_url="http://127.0.0.1") as client:
        answer = client.get(f"/api/series?runs={run_id}&metric=loss&width=4000")
    assert answer.status_code == 503
    assert "is damaged" in answer.json()["error"]

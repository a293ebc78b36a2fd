"""bench/scale.py still works: its smoke mode (two tiny sizes) builds, measures and prints the table.

No figure is checked (timings belong to the benchmark, not to tests); what is checked is that every
measured column is filled for every size and the targets section is printed."""

import os
import subprocess
import sys
from pathlib import Path

from pg_support import SERVER_URL, server_available
from support import require

SCRIPT = Path(__file__).parent.parent / "bench" / "scale.py"


def run_smoke(tmp_path: Path, *extra: str) -> str:
    paths = [str(SCRIPT.parent.parent / "src"), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--cache", str(tmp_path / "cache"), *extra],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def table_rows(output: str, engine: str) -> list[list[str]]:
    section = output.split(f"\n{engine}: one row per size", 1)[1].splitlines()
    return [line.split() for line in section[2:4]]


def test_smoke_prints_one_filled_row_per_size_and_the_ratios_then_reuses_its_tables(tmp_path: Path) -> None:
    output = run_smoke(tmp_path)
    assert "built" in output
    rows = table_rows(output, "SQLite")
    assert [row[:5] for row in rows] == [["2e4", "sc", "/", "1e2", "runs"], ["4e4", "sc", "/", "2e2", "runs"]]
    assert [row[5] for row in rows] == ["20,000", "40,000"]  # bulk + the appended series, all counted
    for row in rows:
        assert row.count("-") <= 2  # only the query API columns may be missing (see the note)
    assert "largest / smallest" in output and "write throughput" in output
    assert "server RSS after 100 charts" in output
    cached = sorted(p.name for p in (tmp_path / "cache").glob("*.db"))
    assert cached == ["scale-20000-100-10000.db", "scale-40000-200-10000.db"]
    again = run_smoke(tmp_path)
    assert "built" not in again  # the measured run was deleted again: the cache is the bulk content
    assert [row[5] for row in table_rows(again, "SQLite")] == ["20,000", "40,000"]


def test_smoke_on_postgres(tmp_path: Path) -> None:
    require(server_available(), f"PostgreSQL at {SERVER_URL}")
    output = run_smoke(tmp_path, "--postgres", SERVER_URL, "--no-sqlite")
    assert [row[5] for row in table_rows(output, "PostgreSQL")] == ["20,000", "40,000"]

"""docs/query.md runs as written: its Python blocks, in order, in a fresh process, on both engines."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "query.md"


def doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_every_example_of_the_query_docs_runs(db_url, tmp_path):
    blocks = doc_blocks()
    assert len(blocks) >= 6 and 'tb.ResultTable("results.db"' in blocks[0]
    script = "\n".join(blocks)
    if db_url.startswith("postgresql://"):  # the one change: where the table is
        script = script.replace('"results.db"', repr(db_url))
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr

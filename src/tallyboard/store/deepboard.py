"""Reading a DeepBoard 0.3 result table, a SQLite file of another tool, read-only.

Why in `store/`: only this package speaks SQL. This module knows DeepBoard's tables and columns
(deepboard/resultTable/table_schema.py, 0.3.0) and hands back their rows as they are stored; what
they become in our table is `integrations/deepboard_import.py`'s business.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REQUIRED_TABLES = frozenset({"Experiments", "Results", "Logs"})


class DeepBoardFile:
    """A read-only connection to a DeepBoard table; a file of any other kind is a clear error."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not Path(path).is_file():
            raise FileNotFoundError(f"no DeepBoard table at {str(path)!r}")
        self._connection = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        tables = {name for (name,) in self._rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = REQUIRED_TABLES - tables
        if missing:
            self.close()
            listed = ", ".join(sorted(missing))
            raise ValueError(f"{str(path)!r} is not a DeepBoard table (no {listed} table)")

    def close(self) -> None:
        self._connection.close()

    def _rows(self, sql: str) -> Iterator[tuple[Any, ...]]:
        return iter(self._connection.execute(sql))

    def experiments(self) -> list[dict[str, Any]]:
        """Every row of `Experiments` as {column: value}, by run id."""
        cursor = self._connection.execute("SELECT * FROM Experiments ORDER BY run_id")
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def config_files(self) -> dict[int, str]:
        """{run id: config file content}."""
        return dict(self._rows("SELECT run_id, file_content FROM ConfigFile"))

    def results(self) -> Iterator[tuple[int, str, Any, int]]:
        """(run_id, metric, value, is_hparam) in the order they were written; values still encoded."""
        return self._rows("SELECT run_id, metric, value, is_hparam FROM Results ORDER BY id_")

    def logs(self) -> Iterator[tuple[Any, ...]]:
        """(run_id, epoch, step, split, label, value, wall_time, run_rep) in the order they were written."""
        return self._rows(
            "SELECT run_id, epoch, step, split, label, value, wall_time, run_rep FROM Logs ORDER BY id_"
        )

    def images(self) -> Iterator[tuple[Any, ...]]:
        """(run_id, step, epoch, run_rep, img_type, tag, image bytes) in the order they were written."""
        return self._rows(
            "SELECT run_id, step, epoch, run_rep, img_type, tag, image FROM Images ORDER BY id_"
        )

    def fragments(self) -> Iterator[tuple[Any, ...]]:
        """(run_id, step, epoch, run_rep, fragment_type, tag, fragment) in the order they were written."""
        return self._rows(
            "SELECT run_id, step, epoch, run_rep, fragment_type, tag, fragment FROM Fragments ORDER BY id_"
        )

    def column_layout(self) -> list[tuple[str, int, str]]:
        """`ResultDisplay` as (name, display_order, alias) rows."""
        return list(self._rows("SELECT Name, display_order, alias FROM ResultDisplay"))

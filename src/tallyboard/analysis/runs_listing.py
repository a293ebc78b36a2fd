"""`tallyboard runs`: the runs table in a terminal, or as JSON for scripts.

The same rows the dashboard shows: every run with its built-in columns, hparams and results, in
the table's column order and under its aliases, filtered with the dashboard's expression language
(`lr < 0.05 and status == "finished"`; see filter.py). JSON output carries every column
(config content and git diff included), with hparams and results as nested objects.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tallyboard.filter import column_resolver, parse_tree, run_cell, run_filter
from tallyboard.store.runs_sql import NotInSql

if TYPE_CHECKING:
    from tallyboard.store import Store

MAX_CELL = 40
# Shown in the terminal even when the table's layout hides them: a run's state matters there.
ALWAYS_SHOWN = ("status",)
INTERNAL_FIELDS = ("unique_key", "updated_at")


@dataclass
class RunsView:
    """Runs as dicts of run fields plus `hparams` and `results`, and the (name, alias) of the
    columns a terminal shows."""

    rows: list[dict[str, Any]]
    columns: list[tuple[str, str]]


def load_runs(store: Store, filter_text: str | None = None, show_hidden: bool = False) -> RunsView:
    """The runs of the table of `store` by run id, those for which `filter_text` holds
    (`ResultTable.runs_table`)."""
    columns = store.columns()
    run_ids = None  # every run; else those the filter selects, found in SQL where it says them exactly
    if filter_text:
        with contextlib.suppress(NotInSql):  # answered in memory below
            run_ids = store.reads.run_ids_where(
                parse_tree(filter_text, column_resolver(columns)), show_hidden
            )
    runs = store.runs(show_hidden=show_hidden, run_ids=run_ids)
    hparams, results = store.values("hparams", run_ids=run_ids), store.values("results", run_ids=run_ids)
    tags = store.run_tags(run_ids=run_ids)
    rows = []
    for run in runs:
        row = {name: value for name, value in run._asdict().items() if name not in INTERNAL_FIELDS}
        row["hidden"] = bool(run.hidden)
        row["tags"] = tags.get(run.run_id, [])
        row["hparams"] = hparams.get(run.run_id, {})
        row["results"] = results.get(run.run_id, {})
        rows.append(row)
    if filter_text and run_ids is None:
        matches = run_filter(filter_text, columns)
        rows = [row for row in rows if matches(row)]
    shown = [(c.name, c.alias) for c in columns if c.position is not None or c.name in ALWAYS_SHOWN]
    return RunsView(rows=rows, columns=shown)


def _text(name: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):  # a run's tags
        value = ", ".join(value)
    if name in ("start_time", "end_time"):
        return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.6g}"
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def format_runs(view: RunsView) -> str:
    """An aligned text table (numbers right-aligned), or a short sentence when there are no runs."""
    rows, shown = view.rows, view.columns
    if not rows:
        return "no runs"
    header = [alias for _, alias in shown]
    body = [[_text(name, run_cell(row, name)) for name, _ in shown] for row in rows]
    numeric = [all(isinstance(run_cell(row, name), (int, float)) for row in rows) for name, _ in shown]
    widths = [max(len(text) for text in column) for column in zip(header, *body, strict=True)]
    lines = []
    for texts in [header, *body]:
        cells = [
            text.rjust(width) if right else text.ljust(width)
            for text, width, right in zip(texts, widths, numeric, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)

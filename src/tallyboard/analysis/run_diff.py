"""What changed between runs: config content, CLI, command, hparams, git commit and git diff of
two or more runs, each compared line by line against the first, with unchanged stretches folded.

Why on the server: difflib gives the same answer to the dashboard and to any script, and the
page only lays out what it is handed (as text, never markup)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

TEXT_FIELDS = ("config_content", "cli", "command", "git_commit", "git_diff")
CONTEXT = 3  # unchanged lines kept around each change; the rest is folded


def as_lines(value: Any) -> list[str]:
    """A field as lines: text as is, anything else (a CLI dict) as indented sorted JSON."""
    if value is None:
        return []
    text = (
        value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    )
    if isinstance(value, str):
        try:  # the CLI is stored as JSON text: diff it key by key, not as one long line
            parsed = json.loads(value)
            if isinstance(parsed, dict | list):
                text = json.dumps(parsed, indent=2, sort_keys=True, ensure_ascii=False)
        except ValueError:
            pass
    return text.splitlines()


def side_by_side(a: list[str], b: list[str], context: int = CONTEXT) -> list[dict[str, Any]]:
    """Rows {op, a, b} (op 'equal', 'replace', 'delete', 'insert'), with runs of unchanged lines
    longer than 2*context+1 folded into one {op: 'fold', count} row."""
    rows: list[dict[str, Any]] = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            same = a[a1:a2]
            head = 0 if not rows else context
            tail = context if a2 < len(a) or b2 < len(b) else 0
            if len(same) > head + tail + 1:
                rows += [{"op": "equal", "a": line, "b": line} for line in same[:head]]
                rows.append({"op": "fold", "count": len(same) - head - tail})
                rows += [{"op": "equal", "a": line, "b": line} for line in same[len(same) - tail :]]
            else:
                rows += [{"op": "equal", "a": line, "b": line} for line in same]
            continue
        left, right = a[a1:a2], b[b1:b2]
        for i in range(max(len(left), len(right))):
            rows.append(
                {"op": op, "a": left[i] if i < len(left) else None, "b": right[i] if i < len(right) else None}
            )
    return rows


def differing_hparams(hparams: Sequence[dict[str, Any]]) -> list[str]:
    """Names of hparams whose value is not the same in every run (missing counts as a value;
    1 and 1.0 are the same value, as the runs table's highlight sees them)."""
    names = sorted({name for values in hparams for name in values})
    return [name for name in names if len({_value_key(h, name) for h in hparams}) > 1]


def _value_key(values: dict[str, Any], name: str) -> str | None:
    if name not in values:
        return None
    value = values[name]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(float(value))
    return json.dumps(value, sort_keys=True)


def diff_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The diff of runs (rows with TEXT_FIELDS and `hparams`): each later run against the first."""
    if len(runs) < 2:
        raise ValueError("a diff needs at least two runs")
    base = runs[0]
    fields = []
    for name in TEXT_FIELDS:
        against = []
        for other in runs[1:]:
            a, b = as_lines(base.get(name)), as_lines(other.get(name))
            against.append({"run_id": other["run_id"], "changed": a != b, "rows": side_by_side(a, b)})
        fields.append({"field": name, "changed": any(x["changed"] for x in against), "against": against})
    hparams = [run.get("hparams", {}) for run in runs]
    return {
        "run_ids": [run["run_id"] for run in runs],
        "hparams": {
            "names": sorted({n for h in hparams for n in h}),
            "values": hparams,
            "differing": differing_hparams(hparams),
        },
        "fields": fields,
    }

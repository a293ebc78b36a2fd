"""A `Comparison` as text for the terminal (`tallyboard compare`): the groups table, then one line
per pair with its verdict; or as standard JSON, where a number that does not exist (the std of one
sample, the df of two noiseless groups) is the NaN it was computed as: "NaN" (json_numbers.py)."""

from __future__ import annotations

import math

from tallyboard.analysis.comparison import Comparison
from tallyboard.json_numbers import dumps


def json_text(found: Comparison) -> str:
    return dumps(found.to_json(), indent=2)


def _number(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.4g}"


def format_comparison(found: Comparison) -> str:
    header = ["group", "n", "mean", "std", "95% CI"]
    rows = [
        [g.label, str(g.description.n), _number(g.description.mean), _number(g.description.std),
         f"[{_number(g.description.ci_low)}, {_number(g.description.ci_high)}]"]
        for g in found.groups
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"{found.metric} (one sample per {'repetition' if found.unit == 'rep' else 'run'})"]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
              for row in [header, *rows]]  # fmt: skip
    for pair in found.pairs:
        test = pair.test
        lines.append(
            f"{pair.b} - {pair.a}: {_number(test.diff)} [{_number(test.ci_low)}, {_number(test.ci_high)}], "
            f"Welch p = {_number(test.p)}, Holm p = {_number(pair.p_holm)}: {pair.verdict}"
        )
    if not found.pairs:
        lines.append("no pair of groups has two samples each: nothing to test")
    return "\n".join(lines)

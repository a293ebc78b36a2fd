"""Groups of runs compared on one metric: the rows behind `ResultTable.compare`, the CLI's
`tallyboard compare` and the dashboard's statistics table, computed in one place so that the
three agree to the last digit.

A metric is either a logged scalar tag (each repetition's series reduced to one number by a
`Summary`) or a result written with `write_result` (one number per run). The unit of a sample is
a repetition or a run (the mean of its repetitions).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from tallyboard.analysis import stats

SUMMARIES = ("final", "best", "last_k")
GOALS = ("max", "min")
UNITS = ("rep", "run")
MISSING = "∅"  # the group label of a run without the hparam


@dataclass(frozen=True)
class Summary:
    """How a series becomes one number: its final value, its best value (max or min), or the
    mean of its last k points. NaN points are skipped."""

    kind: str = "final"
    k: int = 5
    goal: str = "max"

    def __post_init__(self) -> None:
        if self.kind not in SUMMARIES:
            raise ValueError(f"summary must be one of {', '.join(SUMMARIES)}, not {self.kind!r}")
        if self.goal not in GOALS:
            raise ValueError(f"goal must be 'max' or 'min', not {self.goal!r}")
        if not (isinstance(self.k, int) and 1 <= self.k <= 1_000_000):
            raise ValueError("k must be an integer from 1 to 1,000,000")

    def of(self, values: Sequence[float | None]) -> float | None:
        finite = [v for v in values if v is not None and math.isfinite(v)]
        if not finite:
            return None
        if self.kind == "final":
            return finite[-1]
        if self.kind == "best":
            return max(finite) if self.goal == "max" else min(finite)
        tail = finite[-self.k :]
        return math.fsum(tail) / len(tail)


@dataclass(frozen=True)
class RunSample:
    """One run's numbers for the metric: one per repetition (a result gives one, rep None)."""

    run_id: int
    hparams: dict[str, Any]
    values: dict[int | None, float]

    def mean(self) -> float:
        return math.fsum(self.values.values()) / len(self.values)


@dataclass(frozen=True)
class GroupRow:
    """One group: its hparam values, the runs in it, and the description of its samples."""

    label: str
    key: dict[str, Any]
    run_ids: list[int]
    samples: list[float]
    description: stats.Description


@dataclass(frozen=True)
class PairRow:
    """Group b against group a (a listed first): Welch's test, Holm's p, and the verdict."""

    a: str
    b: str
    test: stats.Welch
    p_holm: float
    verdict: str


@dataclass
class Comparison:
    metric: str
    unit: str
    groups: list[GroupRow] = field(default_factory=list)
    pairs: list[PairRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "unit": self.unit,
            "groups": [
                {
                    "label": g.label,
                    "key": g.key,
                    "run_ids": g.run_ids,
                    "samples": g.samples,
                    **vars(g.description),
                }
                for g in self.groups
            ],
            "pairs": [
                {"a": p.a, "b": p.b, **vars(p.test), "p_holm": p.p_holm, "verdict": p.verdict}
                for p in self.pairs
            ],
        }


def samples_from_series(
    runs: dict[int, dict[str, Any]], points: Sequence[tuple[int, int, float | None]], summary: Summary
) -> list[RunSample]:
    """RunSamples from (run_id, rep, value) points ordered by run, rep and step."""
    series: dict[int, dict[int, list[float | None]]] = {}
    for run_id, rep, value in points:
        series.setdefault(run_id, {}).setdefault(rep, []).append(value)
    out = []
    for run_id, reps in series.items():
        values = {rep: s for rep, s in ((rep, summary.of(v)) for rep, v in reps.items()) if s is not None}
        if values and run_id in runs:
            out.append(RunSample(run_id, runs[run_id], values))  # type: ignore[arg-type]
    return out


def samples_from_results(
    runs: dict[int, dict[str, Any]], results: dict[int, dict[str, Any]], metric: str
) -> list[RunSample]:
    """RunSamples of a result column (one number per run; non-numbers left out)."""
    out = []
    for run_id, hparams in runs.items():
        value = results.get(run_id, {}).get(metric)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out.append(RunSample(run_id, hparams, {None: float(value)}))
    return out


def run_samples(
    metric: str,
    runs: dict[int, dict[str, Any]],
    results: dict[int, dict[str, Any]],
    points: Callable[[], Sequence[tuple[int, int, float | None]]],
    summary: Summary,
) -> list[RunSample]:
    """The samples of `metric` for some runs (id -> hparams): a result column when any of them
    wrote a result of that name, otherwise the scalar tag, read only then through `points()`."""
    if any(metric in results.get(run_id, {}) for run_id in runs):
        return samples_from_results(runs, results, metric)
    return samples_from_series(runs, points(), summary)


def with_originals(
    runs: dict[int, dict[str, Any]],
    rerun_of: dict[int, int | None],
    hparams_of: Callable[[int], dict[str, Any]],
) -> dict[int, dict[str, Any]]:
    """The hparams by which each run is grouped (id -> hparams): a rerun (`new_run(on_duplicate=
    "new")`, `rerun_of` N) takes run N's over its own, so that it lands in N's group whatever it
    logged itself: running a configuration again adds a sample to it, never a group of its own."""
    grouped = {}
    for run_id, hparams in runs.items():
        original = rerun_of.get(run_id)
        grouped[run_id] = hparams if original is None else {**hparams, **hparams_of(original)}
    return grouped


def label_of(key: dict[str, Any]) -> str:
    return ", ".join(f"{name}={_shown(value)}" for name, value in key.items()) or "all runs"


def _shown(value: Any) -> str:
    return MISSING if value is None else str(value)


def compare(samples: Sequence[RunSample], by: Sequence[str], metric: str, unit: str = "rep") -> Comparison:
    """Group the samples by the hparams `by` and compare every pair of groups."""
    if unit not in UNITS:
        raise ValueError(f"unit must be 'rep' or 'run', not {unit!r}")
    grouped: dict[str, tuple[dict[str, Any], list[RunSample]]] = {}
    for sample in sorted(samples, key=lambda s: s.run_id):
        key = {name: sample.hparams.get(name) for name in by}
        grouped.setdefault(label_of(key), (key, []))[1].append(sample)
    result = Comparison(metric, unit)
    for label, (key, members) in sorted(grouped.items(), key=lambda item: _order(item[1][0])):
        values = (
            [s.mean() for s in members] if unit == "run" else [v for s in members for v in s.values.values()]
        )
        result.groups.append(
            GroupRow(label, key, [s.run_id for s in members], values, stats.describe(values))
        )
    testable = [
        (a, b) for a, b in combinations(result.groups, 2) if a.description.n >= 2 and b.description.n >= 2
    ]
    tests = [stats.welch(a.samples, b.samples) for a, b in testable]
    for (a, b), test, p in zip(testable, tests, stats.holm([t.p for t in tests]), strict=True):
        result.pairs.append(
            PairRow(
                a.label,
                b.label,
                test,
                p,
                stats.verdict(a.label, b.label, a.description, b.description, test, p),
            )
        )
    return result


def _order(key: dict[str, Any]) -> tuple[Any, ...]:
    """Groups in the order of their hparam values: numbers by value, anything else as text."""
    return tuple(
        (0, float(v), "") if isinstance(v, int | float) and not isinstance(v, bool) else (1, 0.0, _shown(v))
        for v in key.values()
    )


def importance_rows(samples: Sequence[RunSample], hparams: Sequence[str]) -> list[dict[str, Any]]:
    """Per hparam: how much of the metric (each run's mean over repetitions) it explains."""
    rows = []
    for name in hparams:
        pairs = [(s.hparams[name], s.mean()) for s in samples if s.hparams.get(name) is not None]
        pairs = [(v if isinstance(v, int | float | str | bool) else str(v), m) for v, m in pairs]
        if len(pairs) < 2:
            continue
        found = stats.importance([v for v, _ in pairs], [m for _, m in pairs])
        rows.append({"hparam": name, **vars(found)})
    return sorted(rows, key=lambda r: -(r["eta_squared"] or 0.0))

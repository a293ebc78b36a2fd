"""`BehindLeader`: at the same step, is this run behind the best configuration by more than noise?

The method (docs/alerts.md, "Behind the leader"). The leader is a configuration logged with n
repetitions (repetitions of one run, `new_repetition()`, or several runs, one repetition each or
more); at step s its band is the mean m_s and the sample standard deviation sd_s of its
repetitions' values. If this run were one more repetition of a configuration as good as the
leader (the null hypothesis; normal values at each step), its value x_s would be a draw from the
same distribution as the leader's, and the statistic

    t_s = (x_s - m_s - margin) / (sd_s * sqrt(1 + 1/n))      (mode 'min'; mirrored for 'max')

follows Student's t with n - 1 degrees of freedom (a one-sided prediction bound). The rule looks
at a few steps only, geometrically spaced (each look at least `spacing` times the step of the
last), and the j-th look fires when t_s exceeds the t quantile of alpha_j = alpha / (j (j + 1)).
Those sum to alpha, so by the union bound the probability that a run as good as the leader is
ever called behind is at most `alpha`, over the whole run, however long, and whatever the
dependence between steps (a run's values at nearby steps are strongly correlated, which is
what makes a test that assumes independent steps fire far too often). Early looks get the
largest share of alpha, which is where stopping a hopeless run saves the most.
`tests/alerts/test_behind_leader.py` measures the false-alarm rate by simulation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from tallyboard.alerts.rules import Finding, Mode, Rule, Watch, _mode
from tallyboard.alerts.student_t import upper_quantile


class BandPoint(NamedTuple):
    mean: float
    sd: float
    n: int


class Bands(Protocol):
    """Reads other runs: the points (repetition key, step, value) of `metric` in `run_ids`, and
    which runs have finished (the candidates for the leader when the rule names none)."""

    def points(self, run_ids: Sequence[int], metric: str) -> Iterable[tuple[object, int, float]]: ...

    def finished(self) -> list[int]: ...


def band(points: Iterable[tuple[object, int, float]], min_repetitions: int) -> dict[int, BandPoint]:
    """{step: the band} at the steps where at least `min_repetitions` repetitions logged a finite
    value and those values differ."""
    by_step: dict[int, list[float]] = defaultdict(list)
    for _key, step, value in points:
        if value is not None and math.isfinite(value):
            by_step[int(step)].append(float(value))
    found = {}
    for step, values in by_step.items():
        n = len(values)
        if n < min_repetitions:
            continue
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
        if sd > 0:
            found[step] = BandPoint(mean, sd, n)
    return found


def best_band(
    bands: Bands, metric: str, mode: Mode, min_repetitions: int, exclude: int
) -> tuple[int | None, dict[int, BandPoint]]:
    """The leader when a rule names none: of the finished runs (but `exclude`) whose repetitions
    form a band of `metric`, the one whose band is best at its last step; (None, {}) if none does."""
    best: tuple[float, int, dict[int, BandPoint]] | None = None
    for run_id in bands.finished():
        if run_id == exclude:
            continue
        found = band(bands.points([run_id], metric), min_repetitions)
        if not found:
            continue
        score = found[max(found)].mean * (1.0 if mode == "min" else -1.0)
        if best is None or score < best[0]:
            best = (score, run_id, found)
    return (None, {}) if best is None else (best[1], best[2])


def look_alpha(alpha: float, look: int) -> float:
    """The share of `alpha` the `look`-th look (1, 2, ...) spends: alpha / (j (j + 1)), summing to alpha."""
    return alpha / (look * (look + 1))


def behind_by(value: float, point: BandPoint, mode: Mode, margin: float) -> float:
    """The prediction statistic t of `value` against the band: large when the run is behind."""
    gap = value - point.mean if mode == "min" else point.mean - value
    return (gap - margin) / (point.sd * math.sqrt(1.0 + 1.0 / point.n))


class BehindLeader(Rule):
    """Fires when this run is behind the leader's band of repetitions at the same step by a margin a
    sequential test calls real, with a false-alarm rate of at most `alpha` over the whole run.

    `leader` is the run id of the best configuration (its repetitions form the band), or a list of
    run ids (the configuration's seeds as runs of their own); None (the default) takes, at the
    first value, the finished run of the table whose band of repetitions is best at its last step.
    `mode` 'min' when lower is better (a loss), 'max' when higher is (an accuracy). `margin` (in
    the metric's units) is how far behind counts as behind. Looks are spaced by `spacing` (a
    factor on the step); a step where fewer than `min_repetitions` of the leader's repetitions
    logged the metric is not looked at."""

    def __init__(
        self,
        metric: str,
        leader: int | Sequence[int] | None = None,
        mode: Mode = "min",
        alpha: float = 0.01,
        margin: float = 0.0,
        spacing: float = 1.5,
        min_repetitions: int = 3,
        stop: bool = False,
    ) -> None:
        super().__init__(metric, stop)
        leaders = None if leader is None else [leader] if isinstance(leader, int) else list(leader)
        if leaders is not None and (
            not leaders or not all(isinstance(run, int) and not isinstance(run, bool) for run in leaders)
        ):
            raise TypeError(f"leader must be a run id, a list of run ids or None, got {leader!r}")
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
        if not spacing > 1.0:
            raise ValueError(f"spacing must be above 1 (a factor between looks), got {spacing!r}")
        if not isinstance(min_repetitions, int) or min_repetitions < 2:
            raise ValueError(f"min_repetitions must be 2 or more, got {min_repetitions!r}")
        self.leaders = leaders
        self.mode = _mode(mode)
        self.alpha = float(alpha)
        self.margin = float(margin)
        self.spacing = float(spacing)
        self.min_repetitions = min_repetitions

    def _arguments(self) -> str:
        leader = self.leaders[0] if self.leaders is not None and len(self.leaders) == 1 else self.leaders
        return f"leader={leader}, mode={self.mode!r}, alpha={self.alpha}" + (
            f", margin={self.margin}" if self.margin else ""
        )

    def watch(self, tag: str, run_id: int, bands: Bands | None) -> Watch:
        if bands is None:
            raise ValueError("BehindLeader needs to read the leader's runs")
        return BehindLeaderWatch(self, tag, run_id, bands)


class BehindLeaderWatch:
    """One run's sequential test against the leader: its looks so far and the leader's band."""

    def __init__(self, rule: BehindLeader, tag: str, run_id: int, bands: Bands) -> None:
        self.rule = rule
        self.tag = tag
        self.bands = bands
        self.run_id = run_id
        self.leaders = None if rule.leaders is None else [run for run in rule.leaders if run != run_id]
        self.band: dict[int, BandPoint] | None = None
        self.looks = 0
        self.next_look = 0
        self.fired = False

    def _band_at(self, step: int) -> BandPoint | None:
        if self.leaders is None:  # the rule names no leader: the best finished run, chosen once
            rule = self.rule
            chosen, self.band = best_band(self.bands, self.tag, rule.mode, rule.min_repetitions, self.run_id)
            self.leaders = [] if chosen is None else [chosen]
        elif self.band is None or (step not in self.band and step > max(self.band, default=-1)):
            self.band = band(self.bands.points(self.leaders, self.tag), self.rule.min_repetitions)
        return self.band.get(step)

    def observe(self, step: int, value: float) -> Finding | None:
        if self.fired or step < self.next_look or self.leaders == []:
            return None
        point = self._band_at(step)
        if point is None or not self.leaders:
            return None  # no band here: no look, no alpha spent
        self.looks += 1
        self.next_look = max(step + 1, math.ceil(step * self.rule.spacing))
        alpha = look_alpha(self.rule.alpha, self.looks)
        bound = upper_quantile(alpha, point.n - 1)
        statistic = (
            math.inf if math.isnan(value) else behind_by(value, point, self.rule.mode, self.rule.margin)
        )
        if statistic <= bound:
            return None
        self.fired = True
        who = f"run {self.leaders[0]}" if len(self.leaders) == 1 else f"runs {self.leaders}"
        return Finding(
            f"{self.tag} behind the leader",
            f"{self.tag} = {value:.6g} at step {step}; the leader ({who}) has {point.mean:.6g} ± "
            f"{point.sd:.3g} over {point.n} repetitions. Behind by more than the margin "
            f"{self.rule.margin:g} at a false-alarm rate of {self.rule.alpha:g} for the whole run "
            f"(look {self.looks}: t = {statistic:.3g} > {bound:.3g}).",
            self.rule.level,
        )

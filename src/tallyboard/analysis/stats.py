"""Statistics for deciding between configurations: group summaries, Welch's t-test with Holm's
correction, the n per group a test would need, and how much of a result an hparam explains.

Why scipy: these numbers decide which configuration a researcher keeps, so they come from a
well-kept library (t and noncentral-t distributions, Spearman's rho) rather than our own
approximations. scipy is imported inside the functions: the logging path never loads it, and a
table without the `dashboard` extra only needs it when statistics are asked for.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.8
MAX_N = 100_000  # the power search stops here: a difference this small is "not detectable"


@dataclass(frozen=True)
class Description:
    """n, mean, sample std (ddof 1) and the t-based 95% confidence interval of the mean."""

    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Welch:
    """Welch's two-sample t-test of b against a (the same numbers as R's `t.test(b, a)`):
    diff = mean(b) - mean(a) with its 95% CI, t, the Welch-Satterthwaite df and the two-sided p."""

    diff: float
    ci_low: float
    ci_high: float
    t: float
    df: float
    p: float


@dataclass(frozen=True)
class Importance:
    """How much of a result an hparam explains: Spearman's rho (monotone association, numeric
    hparams only) and eta-squared of a one-way ANOVA over its distinct values (any hparam)."""

    n: int
    levels: int
    spearman: float | None
    spearman_p: float | None
    eta_squared: float | None


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _var(values: Sequence[float]) -> float:
    mean = _mean(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def describe(values: Sequence[float]) -> Description:
    """Summary of one group; std and CI are NaN for fewer than two values (nothing to estimate)."""
    from scipy import stats

    if not values:
        raise ValueError("describe() needs at least one value")
    n, mean = len(values), _mean(values)
    if n < 2:
        return Description(n, mean, math.nan, math.nan, math.nan)
    std = math.sqrt(_var(values))
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * std / math.sqrt(n)
    return Description(n, mean, std, mean - half, mean + half)


def welch(a: Sequence[float], b: Sequence[float]) -> Welch:
    """Welch's t-test of b against a. Needs two values per group; identical constant groups give
    p = 1 (no difference), different constant groups p = 0 (a difference with no noise)."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        raise ValueError("Welch's t-test needs at least two values per group")
    diff = _mean(b) - _mean(a)
    va, vb = _var(a) / len(a), _var(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return Welch(
            diff, diff, diff, math.copysign(math.inf, diff) if diff else 0.0, math.nan, 0.0 if diff else 1.0
        )
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t = diff / se
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, df) * se
    p = 2 * stats.t.sf(abs(t), df)
    return Welch(diff, diff - half, diff + half, t, df, min(1.0, p))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (R's `p.adjust(p, "holm")`): controls the chance of any false
    'difference' across all pairs, without Bonferroni's loss of power."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [0.0] * len(pvalues)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def power(n: int, delta: float, sd: float, alpha: float = ALPHA) -> float:
    """Power of a two-sided two-sample t-test with n per group (R's `power.t.test`, strict=FALSE:
    the chance that t exceeds the upper critical value under the noncentral t)."""
    from scipy import stats

    df = 2 * (n - 1)
    ncp = math.sqrt(n / 2) * abs(delta) / sd
    return float(stats.nct.sf(stats.t.ppf(1 - alpha / 2, df), df, ncp))


def n_per_group(delta: float, sd: float, target: float = POWER, alpha: float = ALPHA) -> int | None:
    """The smallest n per group that detects a true difference `delta` (noise `sd`) with the
    target power; None when no n up to MAX_N does (or there is no difference to detect)."""
    if delta == 0 or not math.isfinite(delta) or not sd > 0:
        return None
    if power(MAX_N, delta, sd, alpha) < target:
        return None
    lo, hi = 2, MAX_N  # power grows with n: bisect for the first n that reaches the target
    while lo < hi:
        mid = (lo + hi) // 2
        if power(mid, delta, sd, alpha) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def verdict(a_name: str, b_name: str, a: Description, b: Description, test: Welch, p_adjusted: float) -> str:
    """The comparison in plain words: which is higher and how sure, or what n it would take."""
    if p_adjusted < ALPHA:
        higher, lower = (b_name, a_name) if test.diff > 0 else (a_name, b_name)
        return f"{higher} > {lower}, p = {p_adjusted:.2g}"
    each = f"n = {a.n}" if a.n == b.n else f"n = {a.n} and {b.n}"
    sd = math.sqrt((a.std**2 + b.std**2) / 2)
    needed = n_per_group(test.diff, sd)
    if needed is None:
        return f"no detectable difference with {each} (p = {p_adjusted:.2g})"
    if needed <= min(a.n, b.n):  # enough runs for a true difference this size: it is likely smaller
        return (
            f"no detectable difference with {each} (p = {p_adjusted:.2g}), although n = {needed} per "
            "group would usually see a true difference this size: it is likely smaller than measured"
        )
    return (
        f"no detectable difference with {each} (p = {p_adjusted:.2g}); about n = {needed} per group "
        "would be needed to see a difference this size"
    )


def importance(levels: Sequence[Hashable], results: Sequence[float]) -> Importance:
    """Importance of one hparam for one result over runs (pairs with a missing value left out
    by the caller). Spearman's rho only when every level is a real number."""
    from scipy import stats

    n = len(results)
    distinct = len(set(levels))
    numbers = [float(v) for v in levels if isinstance(v, int | float) and not isinstance(v, bool)]
    rho = rho_p = None
    if len(numbers) == len(levels) and distinct > 1 and n > 2 and len(set(results)) > 1:
        found = stats.spearmanr(numbers, results)
        rho, rho_p = float(found.statistic), float(found.pvalue)
    return Importance(n, distinct, rho, rho_p, eta_squared(levels, results) if distinct > 1 else None)


def eta_squared(levels: Sequence[Hashable], results: Sequence[float]) -> float | None:
    """Between-group over total sum of squares of a one-way ANOVA (None when results are constant)."""
    groups: dict[Hashable, list[float]] = {}
    for level, value in zip(levels, results, strict=True):
        groups.setdefault(level, []).append(value)
    grand = _mean(results)
    total = math.fsum((v - grand) ** 2 for v in results)
    if total == 0:
        return None
    between = math.fsum(len(g) * (_mean(g) - grand) ** 2 for g in groups.values())
    return between / total

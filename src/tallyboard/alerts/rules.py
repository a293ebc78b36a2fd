"""The rules: what to watch a metric for. A rule is a description (immutable, shareable by every
run of a table); `watch()` gives the state one series of one run keeps while it is evaluated.

Rules are evaluated off the training thread (run/alerting.py: a background evaluator; the
`tallyboard watch` command: a poll of the table), one observation `(step, value)` at a time, in
the order of logging. A watch answers a `Finding` when its rule fires and None otherwise; each
fires on the change from fine to not fine (edge-triggered) and again only after things were
fine again, so a metric that stays NaN gives one alert, not one per step.
"""

from __future__ import annotations

import math
from collections import deque
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    from tallyboard.alerts.behind_leader import Bands

Mode = Literal["min", "max"]


class Finding(NamedTuple):
    """A rule that fired: the alert it asks for (the title is stable, for rate limiting)."""

    title: str
    text: str
    level: str


class Watch(Protocol):
    def observe(self, step: int, value: float) -> Finding | None: ...


class Rule:
    """What every rule shares: the metric it watches (a tag, or a pattern such as 'train/*'),
    the level of its alerts, and `stop`: whether firing asks the run to stop (`should_stop()`)."""

    level = "warn"

    def __init__(self, metric: str, stop: bool = False) -> None:
        if not isinstance(metric, str) or not metric:
            raise TypeError(f"a rule's metric must be a non-empty tag or pattern, got {metric!r}")
        if not isinstance(stop, bool):
            raise TypeError(f"stop must be True or False, got {stop!r}")
        self.metric = metric
        self.stop = stop

    def watches(self, tag: str) -> bool:
        """Whether this rule watches `tag` (asked once per new tag of a run, never per value)."""
        return fnmatchcase(tag, self.metric)

    def watch(self, tag: str, run_id: int, bands: Bands | None) -> Watch:
        """Fresh state for series `tag` of run `run_id`; `bands` reads other runs' bands
        (only `BehindLeader` asks)."""
        raise NotImplementedError

    def _arguments(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self._arguments()
        stop = ", stop=True" if self.stop else ""
        return f"{type(self).__name__}({self.metric!r}{', ' + extra if extra else ''}{stop})"


def _mode(mode: str) -> Mode:
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' (lower is better) or 'max', got {mode!r}")
    return "min" if mode == "min" else "max"


class NonFinite(Rule):
    """Fires when the metric is NaN or infinite ("did the loss just go NaN?")."""

    level = "error"

    def watch(self, tag: str, run_id: int, bands: Bands | None) -> Watch:
        return _NonFiniteWatch(tag)


class _NonFiniteWatch:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.fine = True

    def observe(self, step: int, value: float) -> Finding | None:
        finite = math.isfinite(value)
        fired = self.fine and not finite
        self.fine = finite
        if fired:
            return Finding(f"{self.tag} is not finite", f"{self.tag} = {value} at step {step}", "error")
        return None


class Threshold(Rule):
    """Fires when the metric goes above `above` or below `below` (at least one of them)."""

    def __init__(
        self, metric: str, above: float | None = None, below: float | None = None, stop: bool = False
    ) -> None:
        super().__init__(metric, stop)
        if above is None and below is None:
            raise ValueError("Threshold needs above=, below= or both")
        self.above = None if above is None else float(above)
        self.below = None if below is None else float(below)

    def _arguments(self) -> str:
        parts = [f"above={self.above}"] if self.above is not None else []
        return ", ".join([*parts, *([f"below={self.below}"] if self.below is not None else [])])

    def watch(self, tag: str, run_id: int, bands: Bands | None) -> Watch:
        return _ThresholdWatch(self, tag)


class _ThresholdWatch:
    def __init__(self, rule: Threshold, tag: str) -> None:
        self.rule = rule
        self.tag = tag
        self.fine = True

    def observe(self, step: int, value: float) -> Finding | None:
        if math.isnan(value):  # neither side of a threshold (NonFinite's business)
            return None
        above, below = self.rule.above, self.rule.below
        crossed = None
        if above is not None and value > above:
            crossed = f"above {above}"
        elif below is not None and value < below:
            crossed = f"below {below}"
        fired = self.fine and crossed is not None
        self.fine = crossed is None
        if fired:
            return Finding(
                f"{self.tag} crossed a threshold",
                f"{self.tag} = {value} at step {step}, {crossed}",
                self.rule.level,
            )
        return None


class NoImprovement(Rule):
    """Fires when the metric's best value (lowest for mode 'min', highest for 'max') has not
    improved by more than `min_delta` for `patience` steps ("is this run stuck?"). On the windows
    of a `monitor.Stat`, steps are window indices, so `patience` counts windows."""

    def __init__(
        self, metric: str, patience: int, mode: Mode = "min", min_delta: float = 0.0, stop: bool = False
    ) -> None:
        super().__init__(metric, stop)
        if not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be a whole number of steps, 1 or more, got {patience!r}")
        self.patience = patience
        self.mode = _mode(mode)
        self.min_delta = float(min_delta)

    def _arguments(self) -> str:
        return f"patience={self.patience}, mode={self.mode!r}" + (
            f", min_delta={self.min_delta}" if self.min_delta else ""
        )

    def watch(self, tag: str, run_id: int, bands: Bands | None) -> Watch:
        return _NoImprovementWatch(self, tag)


class _NoImprovementWatch:
    def __init__(self, rule: NoImprovement, tag: str) -> None:
        self.rule = rule
        self.tag = tag
        self.best: float | None = None
        self.best_step = 0
        self.fired = False

    def observe(self, step: int, value: float) -> Finding | None:
        if math.isnan(value):
            return None
        sign = 1.0 if self.rule.mode == "min" else -1.0
        if self.best is None or sign * (self.best - value) > self.rule.min_delta:
            self.best, self.best_step, self.fired = value, step, False
            return None
        if self.fired or step - self.best_step < self.rule.patience:
            return None
        self.fired = True
        return Finding(
            f"{self.tag} stopped improving",
            f"{self.tag}: no improvement for {step - self.best_step} steps (best {self.best} at step "
            f"{self.best_step}, now {value} at step {step})",
            self.rule.level,
        )


class Stalled(Rule):
    """Fires when the metric's trend has stalled: the least-squares line through its last
    `window` values changes by less than `min_change` (in the metric's units) across them."""

    def __init__(self, metric: str, window: int, min_change: float, stop: bool = False) -> None:
        super().__init__(metric, stop)
        if not isinstance(window, int) or window < 3:
            raise ValueError(f"window must be a whole number of values, 3 or more, got {window!r}")
        self.window = window
        self.min_change = abs(float(min_change))

    def _arguments(self) -> str:
        return f"window={self.window}, min_change={self.min_change}"

    def watch(self, tag: str, run_id: int, bands: Bands | None) -> Watch:
        return _StalledWatch(self, tag)


class _StalledWatch:
    def __init__(self, rule: Stalled, tag: str) -> None:
        self.rule = rule
        self.tag = tag
        self.points: deque[tuple[int, float]] = deque(maxlen=rule.window)
        self.fine = True

    def observe(self, step: int, value: float) -> Finding | None:
        if not math.isfinite(value):
            return None
        self.points.append((step, value))
        if len(self.points) < self.rule.window:
            return None
        change = _fitted_change(self.points)
        stalled = abs(change) < self.rule.min_change
        fired = self.fine and stalled
        self.fine = not stalled
        if fired:
            first = self.points[0][0]
            return Finding(
                f"{self.tag} stalled",
                f"{self.tag}: its trend changed by {change:.4g} from step {first} to {step} "
                f"(less than {self.rule.min_change})",
                self.rule.level,
            )
        return None


def _fitted_change(points: deque[tuple[int, float]]) -> float:
    """Slope of the least-squares line through `points`, times their span of steps."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    return slope * (points[-1][0] - points[0][0])

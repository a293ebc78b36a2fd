"""Alerts of a run being written: `add_rule`, `alert`, `should_stop`, and the background
evaluator that runs the rules (tallyboard/alerts/) on what the run logs.

The training thread's cost is the point of this module's shape. `add_scalar` of a tag no rule
watches pays one attribute test (`series.watch is None`, writer.py); of a watched tag, one more
`list.append` (the one call CPython specialises best) of the row it queues for the sink anyway
(rep, step, epoch, walltime, value) to the tag's pending list here. That needs no lock: the
evaluator takes `rows[:n]` and then `del rows[:n]`, each atomic, as the sink does (run/sink.py),
so a row appended meanwhile waits for the next pass (bench/alerts_cost.py). Everything else --
the rules' state, the leader's band, rate limiting, writing the alert, the handlers -- runs in
the evaluator thread (one per process, shared by its runs, waking every `EVALUATE_EVERY`
seconds), or in the caller of `flush()`/the run's end, which evaluate what is pending first, so
that a flushed run's alerts are written and `should_stop()` is up to date.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tallyboard.alerts.delivery import deliver
from tallyboard.alerts.rate_limit import RateLimiter
from tallyboard.alerts.rules import Finding, Rule, Watch
from tallyboard.run.logging_calls import RecordLogging
from tallyboard.run.view import RunView
from tallyboard.store.alert_content import KIND, Alert, check_level, encode
from tallyboard.store.records import QueuedText, ScalarRow
from tallyboard.values import check_key, check_text, to_int

if TYPE_CHECKING:
    from tallyboard.store import Store

log = logging.getLogger(__name__)

EVALUATE_EVERY = 0.05  # seconds between two passes of the evaluator thread


class ViewBands:
    """Reads other runs' points for `BehindLeader` through the public read API
    (`RunView.get_scalar_arrays`), so it reads whatever the store's layout of scalars is;
    `finished` lists the finished runs (the candidates for a leader the rule does not name)."""

    def __init__(self, load: Callable[[int], RunView], finished: Callable[[], list[int]]) -> None:
        self._load = load
        self.finished = finished

    def points(self, run_ids: Sequence[int], metric: str) -> Iterable[tuple[object, int, float]]:
        for run_id in run_ids:
            arrays = self._load(run_id).get_scalar_arrays(metric, columns=("rep", "step", "value"))
            for rep, step, value in zip(arrays["rep"], arrays["step"], arrays["value"], strict=True):
                yield (run_id, int(rep)), int(step), float(value)


class RunAlerts:
    """The rules of one run, the state of each watched series, and the queue between them."""

    def __init__(self, run_id: int, store: Store, emit: Callable[[Finding, int, int, Rule], None]) -> None:
        self.run_id = run_id
        self.rules: list[Rule] = []
        self.pending: dict[str, list[ScalarRow]] = {}  # tag -> rows not evaluated yet
        self.limiter = RateLimiter()
        self.stop_alert: Alert | None = None
        self._watches: dict[tuple[str, int], list[tuple[Rule, Watch]]] = {}
        self._bands = ViewBands(
            lambda run: RunView(store, run),
            lambda: [row.run_id for row in store.runs() if row.status == "finished"],
        )
        self._emit = emit
        self._lock = threading.Lock()

    def add(self, rule: Rule) -> None:
        """Watch with `rule` too, from the next value on (series already watched included)."""
        with self._lock:
            self.rules.append(rule)
            for (tag, _rep), watches in self._watches.items():
                if rule.watches(tag):
                    watches.append((rule, rule.watch(tag, self.run_id, self._bands)))

    def queue_for(self, tag: str) -> list[ScalarRow] | None:
        """The list the rows of `tag` are appended to, or None when no rule watches it (asked
        once per tag, and for every tag when a rule is added)."""
        if not any(rule.watches(tag) for rule in self.rules):
            return None
        return self.pending.setdefault(tag, [])

    def waiting(self) -> bool:
        return any(list(self.pending.values()))  # a copy: the training thread may add a tag meanwhile

    def evaluate(self) -> None:
        """Run the rules on every row pending so far (the evaluator thread, or a flush)."""
        with self._lock:
            for tag, rows in list(self.pending.items()):
                count = len(rows)
                taken = rows[:count]
                del rows[:count]
                for rep, step, _epoch, _walltime, value in taken:
                    for rule, watch in self._watching(tag, rep):
                        finding = watch.observe(step, math.nan if value is None else value)
                        if finding is not None:
                            self._emit(finding, rep, step, rule)

    def _watching(self, tag: str, rep: int) -> list[tuple[Rule, Watch]]:
        """The watches of series (tag, rep), made on its first value: each repetition starts afresh."""
        found = self._watches.get((tag, rep))
        if found is None:
            found = self._watches[(tag, rep)] = [
                (rule, rule.watch(tag, self.run_id, self._bands)) for rule in self.rules if rule.watches(tag)
            ]
        return found


class _Evaluator:
    """The process's one evaluator thread: every `EVALUATE_EVERY` seconds, each run's queue."""

    def __init__(self) -> None:
        self._runs: set[RunAlerts] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def follow(self, alerts: RunAlerts) -> None:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: no thread, and the parent's runs are not its own
                self._runs, self._thread, self._pid = set(), None, os.getpid()
            self._runs.add(alerts)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tallyboard-rules", daemon=True)
                self._thread.start()

    def forget(self, alerts: RunAlerts) -> None:
        with self._lock:
            self._runs.discard(alerts)

    def _run(self) -> None:
        while True:
            time.sleep(EVALUATE_EVERY)
            with self._lock:
                runs = list(self._runs)
            for alerts in runs:
                if alerts.waiting():
                    try:
                        alerts.evaluate()
                    except Exception:  # a rule's bug must not end the evaluation of every run
                        log.warning("tallyboard: the rules of run %s failed", alerts.run_id, exc_info=True)


_evaluator = _Evaluator()


def _seconds(wait: float | timedelta | None) -> float | None:
    return wait.total_seconds() if isinstance(wait, timedelta) else None if wait is None else float(wait)


class AlertCalls(RecordLogging):
    """The alert calls of `LogWriter` (mixed into it)."""

    _alerting: RunAlerts | None = None

    if TYPE_CHECKING:  # what `LogWriter` sets
        _series: dict[str, Any]
        _rep: int

    def add_rule(self, rule: Rule) -> None:
        """Evaluate `rule` on what this run logs from now on (tallyboard.alerts: `NonFinite`,
        `Threshold`, `NoImprovement`, `Stalled`, `BehindLeader`)."""
        if self._read_only:
            return self._refuse()
        if not isinstance(rule, Rule):
            raise TypeError(f"add_rule takes a rule of tallyboard.alerts, got {type(rule).__name__}")
        alerting = self._alerts()
        alerting.add(rule)
        for tag, series in self._series.items():
            series.watch = alerting.queue_for(tag)
        return None

    def alert(
        self,
        title: str,
        text: str = "",
        level: str = "info",
        step: int | None = None,
        wait: float | timedelta | None = None,
    ) -> None:
        """Record an alert in the run and hand it to the alert handlers; a second alert of the same
        title within `wait` seconds (default: a minute) is held back, and the next one let
        through says how many were."""
        if self._read_only:
            return self._refuse()
        finding = Finding(check_key("alert title", title), check_text("alert text", text), check_level(level))
        step = self._furthest_step() if step is None else to_int("alert step", step)
        self._record(finding, self._rep, step, None, _seconds(wait))
        return None

    def should_stop(self) -> bool:
        """Whether a rule with `stop=True` has fired (`stop_reason` says which): a training loop's
        cue to stop early. Up to date at every call: it first runs the rules on what the evaluator
        thread has not taken yet (about a microsecond per value logged since its last pass)."""
        if self._alerting is None:
            return False
        if self._alerting.waiting():
            self._alerting.evaluate()
        return self._alerting.stop_alert is not None

    @property
    def stop_reason(self) -> Alert | None:
        """The alert of the rule that asked the run to stop (recorded in the run with stop=True)."""
        return None if self._alerting is None else self._alerting.stop_alert

    def _alerts(self) -> RunAlerts:
        if self._alerting is None:
            self._alerting = RunAlerts(self._run_id, self._store, self._fired)
            _evaluator.follow(self._alerting)
        return self._alerting

    def _watch_of(self, tag: str) -> list[ScalarRow] | None:
        """The queue of a new series' values (writer.py `_new_series`)."""
        return None if self._alerting is None else self._alerting.queue_for(tag)

    def _fired(self, finding: Finding, rep: int, step: int, rule: Rule) -> None:
        self._record(finding, rep, step, rule, None)

    def _record(self, finding: Finding, rep: int, step: int, rule: Rule | None, wait: float | None) -> None:
        if self._read_only:  # the evaluator thread caught the run's end
            return
        alerting = self._alerts()
        stop = rule is not None and rule.stop
        alert = Alert(self._run_id, finding.title, finding.text, finding.level, step, time.time(),
                      None if rule is None else repr(rule), stop, rep)  # fmt: skip
        if stop and alerting.stop_alert is None:
            alerting.stop_alert = alert
        held = alerting.limiter.admit(finding.title, wait)
        if held is None:
            return
        if held:
            alert = alert._replace(text=f"{alert.text} ({held} more held back since the last one)".lstrip())
        walltime = time.perf_counter() - self._rep_start
        self._sink.put(
            "texts", QueuedText(self._run_id, finding.title, rep, step, None, walltime, KIND, encode(alert))
        )
        deliver(alert)

    def _evaluate_alerts(self, last: bool = False) -> None:
        """Evaluate what is pending (flush, the run's end); at the end, leave the evaluator."""
        if self._alerting is not None:
            self._alerting.evaluate()
            if last:
                _evaluator.forget(self._alerting)

"""`tallyboard watch`: rules evaluated on a table that other processes log into (a training job
on another machine, a skin's script, runs shipped to `serve --accept-writes`).

Each poll lists the running runs (and, once more, those that ended since the last poll), reads
each watched series through the public read API (`RunView.get_scalar_arrays`, whatever the
store's layout of scalars), and feeds the rules the points after the last step it saw. An alert
is printed as one line, recorded in its run (`ResultTable.record_alert`, so the dashboard shows
it) and handed to the alert handlers (`--webhook`); alerts are rate-limited per run and title.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from tallyboard.alerts.delivery import deliver
from tallyboard.alerts.rate_limit import RateLimiter
from tallyboard.alerts.rules import Rule, Watch
from tallyboard.run.alerting import ViewBands
from tallyboard.store.alert_content import Alert
from tallyboard.table import ResultTable

SeriesId = tuple[int, str, int]  # (run, tag, rep)


class Watcher:
    """The rules' state for every series of the watched runs, kept from one poll to the next."""

    def __init__(
        self, table: ResultTable, rules: Sequence[Rule], every_run: bool = False, record: bool = True
    ) -> None:
        self.table = table
        self.rules = list(rules)
        self.every_run = every_run
        self.record = record
        self.limiter = RateLimiter()
        finished = 'status == "finished"'
        self._bands = ViewBands(
            table.load_run, lambda: [row["run_id"] for row in table.runs_table(finished).rows]
        )
        self._last_step: dict[SeriesId, int] = {}
        self._watches: dict[SeriesId, list[tuple[Rule, Watch]]] = {}
        self._running: set[int] = set()

    def _runs(self) -> list[int]:
        """The runs to read now: running ones, plus those that ended since the last poll."""
        rows = self.table.runs_table(None if self.every_run else 'status == "running"').rows
        running = {row["run_id"] for row in rows}
        ended, self._running = self._running - running, running
        return sorted(running | (set() if self.every_run else ended))

    def poll(self) -> list[Alert]:
        """Evaluate what was logged since the last poll; the alerts let through."""
        alerts = []
        for run_id in self._runs():
            view = self.table.load_run(run_id)
            for tag in view.scalars:
                if any(rule.watches(tag) for rule in self.rules):
                    alerts += self._series(
                        run_id, tag, view.get_scalar_arrays(tag, columns=("rep", "step", "value"))
                    )
        return alerts

    def _series(self, run_id: int, tag: str, arrays: dict[str, object]) -> list[Alert]:
        alerts = []
        for rep, step, value in zip(arrays["rep"], arrays["step"], arrays["value"], strict=True):  # type: ignore[call-overload]
            key = (run_id, tag, int(rep))
            if step <= self._last_step.get(key, -(2**63)):
                continue
            self._last_step[key] = int(step)
            watches = self._watches.get(key)
            if watches is None:
                watches = self._watches[key] = [
                    (rule, rule.watch(tag, run_id, self._bands)) for rule in self.rules if rule.watches(tag)
                ]
            for rule, watch in watches:
                finding = watch.observe(int(step), float(value))
                if finding is None or self.limiter.admit((run_id, finding.title)) is None:
                    continue
                alert = Alert(run_id, finding.title, finding.text, finding.level, int(step), time.time(),
                              repr(rule), rule.stop, int(rep))  # fmt: skip
                if self.record:
                    self.table.record_alert(alert)
                deliver(alert)
                alerts.append(alert)
        return alerts

"""`tallyboard.alerts`: tell the user when a run goes wrong, or cannot catch up (docs/alerts.md).

Rules are attached to a run (`run.add_rule(rule)`) or to every run of a table (`ResultTable(...,
rules=[...])`), and evaluated on what is logged, off the training thread (run/alerting.py); the
`tallyboard watch` command evaluates them on a table that other processes log into. An alert is
recorded in its run (`run.alert` records one by hand), listed by `ResultTable.alerts`, shown by
the dashboard, and handed to the registered handlers (`register_alert_handler`; `webhook` posts
to a URL). A rule with `stop=True` makes `run.should_stop()` answer True once it fired.
"""

from tallyboard.alerts.behind_leader import BehindLeader
from tallyboard.alerts.delivery import register_alert_handler, unregister_alert_handler, wait_for_delivery
from tallyboard.alerts.rate_limit import RateLimiter
from tallyboard.alerts.rules import Finding, NoImprovement, NonFinite, Rule, Stalled, Threshold
from tallyboard.alerts.spec import parse_rule
from tallyboard.alerts.webhook import webhook
from tallyboard.store.alert_content import Alert

__all__ = [
    "Alert",
    "BehindLeader",
    "Finding",
    "NoImprovement",
    "NonFinite",
    "RateLimiter",
    "Rule",
    "Stalled",
    "Threshold",
    "parse_rule",
    "register_alert_handler",
    "unregister_alert_handler",
    "wait_for_delivery",
    "webhook",
]

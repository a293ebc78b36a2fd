"""An alert (`LogWriter.alert`, a rule that fired) as the text the store keeps: one `texts` row of
kind 'alert', tagged with the alert's title, whose content is standard JSON.

Why a text and not a table of its own: alerts are few (rate-limited per run and title), written
once and read whole, and as texts they travel with every copy, export and import that carries
texts, and reach open dashboards through the stream's new-texts poll, with no schema change. The
layout:
    {"title": str, "text": str, "level": "info"|"warn"|"error", "step": int, "time": float,
     "rule": str (the rule that fired, absent for `run.alert`), "stop": true (absent: false)}
`time` is seconds since the Unix epoch; `stop` says the alert asked the run to stop
(`run.should_stop()`), which is how a run records why it stopped early.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from tallyboard.json_numbers import dumps
from tallyboard.store.engine import Engine
from tallyboard.values import check_key, check_text

KIND = "alert"
LEVELS = ("info", "warn", "error")


class Alert(NamedTuple):
    """One alert of one run: what handlers receive and `ResultTable.alerts` lists."""

    run_id: int
    title: str
    text: str
    level: str
    step: int
    time: float
    rule: str | None = None
    stop: bool = False
    rep: int = 0


def check_level(level: object) -> str:
    """'info', 'warn' or 'error' (W&B's `AlertLevel` members and upper case taken too)."""
    word = str(getattr(level, "value", level)).lower()
    word = {"warning": "warn"}.get(word, word)
    if word not in LEVELS:
        raise ValueError(f"alert level must be one of {', '.join(LEVELS)}, got {level!r}")
    return word


def encode(alert: Alert) -> str:
    """The stored text of an alert; title and text checked first (a bad one raises, nothing kept)."""
    check_key("alert title", alert.title)
    check_text("alert text", alert.text)
    document: dict[str, object] = {
        "title": alert.title,
        "text": alert.text,
        "level": check_level(alert.level),
        "step": alert.step,
        "time": alert.time,
    }
    if alert.rule is not None:
        document["rule"] = alert.rule
    if alert.stop:
        document["stop"] = True
    return dumps(document)


def decode(run_id: int, rep: int, content: str) -> Alert:
    document = json.loads(content)
    return Alert(
        run_id, document["title"], document.get("text", ""), document.get("level", "info"),
        int(document.get("step", 0)), float(document.get("time", 0.0)), document.get("rule"),
        bool(document.get("stop", False)), rep,
    )  # fmt: skip


def query(run_id: int | None = None, after: int = 0, upto: int | None = None) -> tuple[str, list[object]]:
    """The statement of the alerts (text_id, run_id, rep, content) of one run or of all, with a
    text id above `after` (and at most `upto`), oldest first: the store's and the dashboard's."""
    sql = "SELECT text_id, run_id, rep, content FROM texts WHERE kind = ? AND text_id > ?"
    params: list[object] = [KIND, after]
    if upto is not None:
        sql += " AND text_id <= ?"
        params.append(upto)
    if run_id is not None:
        sql += " AND run_id = ?"
        params.append(run_id)
    return sql + " ORDER BY text_id", params


def read(engine: Engine, run_id: int | None = None) -> list[Alert]:
    """The alerts of one run (or of every run), oldest first."""
    return [decode(rid, rep, content) for _, rid, rep, content in engine.execute(*query(run_id))]

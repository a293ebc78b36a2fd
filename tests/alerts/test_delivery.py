"""Alert handlers, the webhook recipe against a real local HTTP server, the rate limiter on an
injected clock, and rules written as text."""

import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import tallyboard as tb
from tallyboard.alerts import (
    BehindLeader,
    NoImprovement,
    NonFinite,
    RateLimiter,
    Stalled,
    Threshold,
    parse_rule,
    register_alert_handler,
    unregister_alert_handler,
    wait_for_delivery,
    webhook,
)
from tallyboard.run.exit_paths import end_runs


@pytest.fixture
def table(tmp_path):
    with tb.ResultTable(str(tmp_path / "results.db"), nocommit_action=tb.NoCommitAction.NOP) as table:
        yield table
        end_runs("failed")


@pytest.fixture
def received():
    """Bodies posted to a local HTTP server, and its URL."""
    bodies = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            bodies.append((self.headers["Content-Type"], self.headers.get("X-Token"),
                           json.loads(self.rfile.read(int(self.headers["Content-Length"])))))  # fmt: skip
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield bodies, f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()
    server.server_close()


def test_handlers_get_every_alert_in_a_thread_of_their_own(table):
    seen = []
    blocker = threading.Event()

    def slow(alert):
        blocker.wait(10)  # a slow handler holds up nobody but the delivery thread
        seen.append((alert.title, alert.level, threading.current_thread().name))

    def broken(alert):
        raise RuntimeError("handler bug")

    register_alert_handler(broken)
    register_alert_handler(slow)
    try:
        with table.new_run("exp", auto_log_plt=False) as run:
            run.add_rule(NonFinite("loss"))
            run.add_scalar("loss", math.nan)
            run.flush()  # the rules evaluated; returns although `slow` has not run yet
            run.alert("by hand", level="warn")
            assert seen == []
            blocker.set()
            assert wait_for_delivery(10)
    finally:
        unregister_alert_handler(slow)
        unregister_alert_handler(broken)
    assert seen == [
        ("loss is not finite", "error", "tallyboard-alerts"),
        ("by hand", "warn", "tallyboard-alerts"),
    ]
    with pytest.raises(TypeError):
        register_alert_handler("not callable")


def test_the_webhook_recipe_posts_each_alert_as_json(table, received):
    bodies, url = received
    hook = register_alert_handler(webhook(url, headers={"X-Token": "s3cret"}))
    plain = register_alert_handler(webhook(url, body=lambda alert: {"text": alert.title}))
    try:
        with table.new_run("exp", auto_log_plt=False) as run:
            run.add_rule(NonFinite("train/loss"))
            run.add_scalar("train/loss", math.inf, step=3)
            run.flush()
            assert wait_for_delivery(10)
    finally:
        unregister_alert_handler(hook)
        unregister_alert_handler(plain)
    (kind, token, body), (_, none, slack) = bodies
    assert kind == "application/json" and token == "s3cret" and none is None
    assert body["title"] == "train/loss is not finite" and body["step"] == 3 and body["run_id"] == run.run_id
    assert (
        body["message"] == f"[error] run {run.run_id}: train/loss is not finite: train/loss = inf at step 3"
    )
    assert slack == {"text": "train/loss is not finite"}
    with pytest.raises(ValueError, match="http"):
        webhook("ftp://example")


def test_the_rate_limiter_lets_one_through_per_interval_and_counts_the_rest():
    now = [100.0]
    limiter = RateLimiter(60.0, clock=lambda: now[0])
    assert limiter.admit("a") == 0
    assert limiter.admit("a") is None and limiter.admit("a") is None
    assert limiter.admit("b") == 0  # per key
    now[0] += 59.9
    assert limiter.admit("a") is None
    now[0] += 0.2
    assert limiter.admit("a") == 3  # three held back since the last one let through
    assert limiter.admit("a", interval=0) == 0
    with pytest.raises(ValueError):
        RateLimiter(-1)


def test_held_back_alerts_are_counted_in_the_next_one(table):
    now = [0.0]
    with table.new_run("exp", auto_log_plt=False) as run:
        run.alert("t")  # made the run's limiter
        run._alerting.limiter.clock = lambda: now[0]
        run._alerting.limiter._last.clear()
        for _ in range(3):
            run.alert("spam", "again")
        now[0] += 61
        run.alert("spam", "again")
        run_id = run.run_id
    assert [a.text for a in table.alerts(run_id) if a.title == "spam"] == [
        "again",
        "again (2 more held back since the last one)",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nonfinite:train/loss", "NonFinite('train/loss')"),
        ("threshold:train/loss:above=10:stop", "Threshold('train/loss', above=10.0, stop=True)"),
        ("noimprovement:val/loss:patience=5:mode=max", "NoImprovement('val/loss', patience=5, mode='max')"),
        ("stalled:loss:window=20:min_change=0.01", "Stalled('loss', window=20, min_change=0.01)"),
        (
            "behind:val/acc:leader=3,4:mode=max:alpha=0.05",
            "BehindLeader('val/acc', leader=[3, 4], mode='max', alpha=0.05)",
        ),
    ],
)
def test_rules_written_as_text(text, expected):
    rule = parse_rule(text)
    assert repr(rule) == expected
    assert isinstance(rule, (NonFinite, Threshold, NoImprovement, Stalled, BehindLeader))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nan:loss", "unknown kind 'nan'"),
        ("threshold:", "say which metric"),
        ("threshold:loss", "needs above="),
        ("threshold:loss:over=3", "unknown argument 'over=3'"),
        ("noimprovement:loss:patience=soon", "patience='soon' is not a valid value"),
    ],
)
def test_a_bad_rule_text_says_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        parse_rule(text)


def test_the_handler_written_by_hand_in_the_docs_works_as_written(table, received):
    bodies, url = received
    doc = (Path(__file__).resolve().parents[2] / "docs" / "alerts.md").read_text(encoding="utf-8")
    (recipe,) = [
        block for block in re.findall(r"```python\n(.*?)```", doc, re.DOTALL) if "def post(alert)" in block
    ]
    namespace = {"url": url, "tb": tb}
    exec(recipe, namespace)  # registers `post`
    try:
        with table.new_run("exp", auto_log_plt=False) as run:
            run.alert("checkpoint saved", level="info")
            assert wait_for_delivery(10)
    finally:
        unregister_alert_handler(namespace["post"])
    assert bodies == [("application/json", None, {"text": f"[info] run {run.run_id}: checkpoint saved"})]

"""The webhook recipe: alerts posted as JSON to a URL (a chat's incoming webhook, a pager, your
own service), with the standard library's HTTP client.

    tallyboard.register_alert_handler(tallyboard.alerts.webhook("https://chat.example/hook/T0K3N"))

The body is the alert as a JSON object (run_id, title, text, level, step, time, rule, stop, rep)
plus "message", one line for services that show a single field; `body` replaces that object
with what the service expects (Slack-style services want {"text": ...}).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tallyboard.json_numbers import dumps
from tallyboard.store.alert_content import Alert


def message(alert: Alert) -> str:
    """One line: '[warn] run 7: train/loss is not finite: train/loss = nan at step 120'."""
    tail = f": {alert.text}" if alert.text else ""
    return f"[{alert.level}] run {alert.run_id}: {alert.title}{tail}"


def webhook(
    url: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    body: Callable[[Alert], Any] | None = None,
) -> Callable[[Alert], None]:
    """A handler posting each alert to `url` (raises in the delivery thread on an HTTP error,
    where it is logged)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"a webhook URL starts with http:// or https://, got {url!r}")
    sent_headers = {"Content-Type": "application/json", **(headers or {})}

    def post(alert: Alert) -> None:
        import urllib.request  # here: the logging path never imports an HTTP client

        document = body(alert) if body is not None else {**alert._asdict(), "message": message(alert)}
        data = dumps(document).encode()
        request = urllib.request.Request(url, data=data, headers=sent_headers, method="POST")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()

    return post

"""Shared helpers for browser tests: a real dashboard server in a thread and Debian's Chromium.

Never downloads a browser: Playwright drives /usr/bin/chromium (installed by CI's ensure_services.sh).
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]  # fmt: skip


def chromium_available() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return shutil.which("chromium") is not None


@contextmanager
def running_dashboard(path: str, **options) -> Iterator[str]:
    """Serve the dashboard for `path` on a free loopback port in this process; yields its base URL."""
    import uvicorn

    from tallyboard.dashboard import create_app

    app = create_app(path, **options)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # a response still open after 5 s of the shutdown is cancelled; the lifespan's end still runs
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        # A page still open holds a live stream: end the streams first, as `tallyboard serve` does,
        # so the server stops and its lifespan closes the table's connections (`force_exit` would skip it)
        app.state.hub.close()
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def launched_chromium() -> Iterator[object]:
    """Headless Chromium, launched once for many pages (a launch costs seconds on a loaded machine)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def page_in(browser, width: int = 1440, height: int = 900) -> Iterator[object]:
    """A fresh page in a context of its own (no storage, cookies or cache shared with other pages);
    uncaught script errors are collected on `page.errors`."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    try:
        yield page
    finally:
        page.context.close()


@contextmanager
def browser_page(width: int = 1440, height: int = 900) -> Iterator[object]:
    """A fresh page in a browser of its own, for scripts that need only one."""
    with launched_chromium() as browser, page_in(browser, width, height) as page:
        yield page

"""A page's first screen answered inside the page: the API requests its script makes first (the
run page's run, its alerts and its first chart's series, the runs page's experiments, first rows
and alert markers), with their answers, written into the HTML the server returns.

Why: otherwise the first chart waits for the page, then its script, then a request the script
can only make once it runs, and the server's work on that request starts only then (and a page's
first `fetch` alone costs it ~5-10 ms of Chromium's main thread before the first rows). Inlined, the
server computes the answers while the browser fetches and compiles the script (the page is sent in
two parts: its head, with the script and styles written in, at once, so the script compiles
meanwhile; the answers when ready), and
the script draws without a round trip. Each inlined answer is used once (static/common.js
`firstAnswer`); everything later, and live updates, go through the API as before.

The answers are the API handlers' own responses, made from synthetic GET requests, so an inlined
answer is byte for byte what the page would have fetched. They sit in a
`<script type="application/json">`, which the browser never runs (the page's CSP allows no inline
script but the page's own, by its hash) and the script reads with `JSON.parse`; every `<`, `>`
and `&` is written as a JSON escape, so no stored name can end the element or open a comment.
An answer the API would refuse (no such run, a bad filter, a database that is down) is left out:
the page then asks for it and shows the error as it always did.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlencode, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from tallyboard.dashboard import api
from tallyboard.dashboard.params import BadRequest
from tallyboard.errors import DamagedTableError
from tallyboard.store import DatabaseUnreachable

# The width the run page's first chart is inlined at: wider than a chart of the run page at any
# window up to 1920 px (a chart is 460 px or more, several to a row), so the page can use it for
# its first chart; a wider chart asks the API at its own width.
FIRST_CHART_WIDTH = 800
# The runs page's view in its address, as static/table.js `DEFAULTS` reads it, and how its first
# request (`query()`) asks the API for it.
TABLE_DEFAULTS = {"sort": "run_id", "desc": "0", "filter": "", "q": "", "hidden": "0", "offset": "0",
                  "limit": "100", "experiment": ""}  # fmt: skip
ALL_EXPERIMENTS = "*"
REFUSED = (BadRequest, HTTPException, DatabaseUnreachable, DamagedTableError)
# Written as JSON escapes in the first view: `<`, `>` and `&` (no stored name can end the element
# or open a comment) and the two line separators old JavaScript parsers took for line ends. One
# `str.replace` each: `str.translate` with a table looks up every character, 8 ms for the runs
# page's 60 kB, on the path of every page's first view.
ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def answers(page: str, request: Request) -> dict[str, str]:
    """The first requests of `page` (a name of app.PAGES) for the address of `request`, each URL
    with the API's answer (its JSON text); empty where the page has none to inline."""
    found: dict[str, str] = {}

    def ask(url: str, handler: Callable[[Request], Response], **path: int) -> str | None:
        answer = _answer(request, url, handler, path)
        if answer is not None:
            found[url] = answer
        return answer

    if page == "run":
        run_id = request.path_params["run_id"]
        run = ask(f"/api/runs/{run_id}", api.run_detail, run_id=run_id)
        if run is not None:
            ask(f"/api/runs/{run_id}/alerts", api.run_alerts, run_id=run_id)
        series = run and json.loads(run).get("series")
        if series:
            query = {"runs": str(run_id), "metric": series[0]["metric"], "width": FIRST_CHART_WIDTH}
            ask(f"/api/series?{urlencode(query)}", api.series)
    elif page == "table":
        experiments = ask("/api/experiments", api.experiments)
        if experiments is not None:
            rows = ask(f"/api/runs?{urlencode(_first_rows(request, json.loads(experiments)))}", api.runs)
            if rows is not None:  # the markers are asked for once rows are drawn
                ask("/api/alerts", api.alerts)
    return found


def _first_rows(request: Request, experiments: dict) -> dict[str, str]:
    """The query of the runs page's first request, as static/table.js `query()` makes it (with
    the experiment static/experiments.js `experimentScope` picks)."""
    state = {key: request.query_params.get(key, default) for key, default in TABLE_DEFAULTS.items()}
    query = {key: state[key] for key in ("offset", "limit", "sort")}
    query |= {
        "desc": _flag(state["desc"]),
        "filter": state["filter"],
        "q": state["q"],
        "hidden": _flag(state["hidden"]),
    }
    names = [e["experiment"] for e in experiments["experiments"]]
    if len(names) >= 2 and state["experiment"] != ALL_EXPERIMENTS:
        query["experiment"] = state["experiment"] if state["experiment"] in names else names[0]
    return query


def _flag(value: str) -> str:
    return "true" if value == "1" else "false"


def _answer(request: Request, url: str, handler: Callable[[Request], Response], path: dict) -> str | None:
    """`handler`'s answer to a GET of `url` by the page's client (its JSON text, as sent), None
    unless it is a 200."""
    parts = urlsplit(url)
    scope = {**request.scope, "method": "GET", "path": parts.path, "raw_path": parts.path.encode(),
             "query_string": parts.query.encode(), "path_params": path}  # fmt: skip
    try:
        response = handler(Request(scope))
    except REFUSED:
        return None
    if response.status_code != 200:
        return None
    return bytes(response.body).decode()


def script(found: dict[str, str]) -> str:
    """The answers as the page's `#first-view` element (nothing when there are none): a JSON object
    of URL to answer, each answer's text as the API sent it (not parsed and written again)."""
    if not found:
        return ""
    text = "{" + ",".join(f"{json.dumps(url)}:{answer}" for url, answer in found.items()) + "}"
    for character, escape in ESCAPES:
        text = text.replace(character, escape)
    return f'<script type="application/json" id="first-view">{text}</script>'


class PageParts:
    """A page's HTML around its first view: the head, sent at once, and the tail.

    Gzipped here (the app's compression leaves a response that says its encoding alone), with a
    full flush after the head: the page's CSRF secret is in the head, and after a full flush
    nothing later can be compressed against it, so stored text in the first view cannot be used
    to guess the secret from the response's length (BREACH). The head is the same for every
    request of the server's life, so it is compressed once and the compressor's state after the
    flush kept: a request copies it and compresses only its own first view (the run page's head,
    ~150 kB of script and styles, took ~6 ms a request to compress)."""

    def __init__(self, head: str, tail: str) -> None:
        self.head, self.tail = head.encode(), tail
        self._after_head = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        self.gzipped_head = self._after_head.compress(self.head) + self._after_head.flush(zlib.Z_FULL_FLUSH)

    def rest_compressor(self) -> zlib._Compress:
        """A compressor that goes on from `gzipped_head`, one per response."""
        return self._after_head.copy()


async def page_body(parts: PageParts, page: str, request: Request, gzipped: bool) -> AsyncIterator[bytes]:
    """The page in two parts: its head at once, then the first view and the tail once computed."""
    compressor = parts.rest_compressor() if gzipped else None
    yield parts.gzipped_head if compressor else parts.head
    found = await run_in_threadpool(answers, page, request)
    rest = (script(found) + parts.tail).encode()
    yield compressor.compress(rest) + compressor.flush() if compressor else rest

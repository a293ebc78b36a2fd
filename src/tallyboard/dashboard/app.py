"""The ASGI application: routes for pages, the JSON API, logged HTML fragments and static files.

Pages are HTML from templates/ filled in once, at start (the CSRF secret, the page's script and
style sheet); all data comes from the API, or from the first view written into the page
(first_view.py), and is put into the page with textContent, never as markup.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tallyboard.dashboard import analysis, api, first_view, params, stream
from tallyboard.dashboard.assets import Assets
from tallyboard.dashboard.downsample import Downsampler
from tallyboard.dashboard.ingest import Ingest, IngestGate
from tallyboard.dashboard.openapi import openapi_schema
from tallyboard.dashboard.params import MAX_ID, BadRequest, Json
from tallyboard.dashboard.runs_table import RunsTable
from tallyboard.dashboard.security import (
    FRAGMENT_CSP,
    BodyTooLarge,
    SecurityMiddleware,
    page_csp,
    usable_token,
)
from tallyboard.dashboard.tokens import KINDS, TokenEntry, TokenSet
from tallyboard.errors import DamagedTableError
from tallyboard.store import DatabaseUnreachable, open_for_dashboard
from tallyboard.store.artifacts import location_for
from tallyboard.store.location import Location, LocationLike

HERE = Path(__file__).parent
OUT_OF_RANGE = MAX_ID + 1
DECLARATIVE_SHADOW = re.compile("shadowrootmode", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")  # in templates/page.html
UPLOT = ("vendor/uplot/uPlot.iife.min.js",)  # a classic script: the vendored build defines `uPlot`
# A page's style sheets, in cascade order (ours may override uPlot's): every page has app.css, the
# pages of runs, charts and statistics views.css as well.
VIEWS = ("app.css", "views.css")
CHARTS = ("vendor/uplot/uPlot.min.css", *VIEWS)
# page -> (title, its ES module (which imports the rest), classic scripts it needs first, its style
# sheets); each page holds its scripts as one script and its sheets as one style (assets.py, bundle.py)
PAGES = {
    "table": ("Runs", "table.js", (), ("app.css",)),
    "run": ("Run", "run.js", UPLOT, CHARTS),
    "compare": ("Compare", "compare.js", UPLOT, CHARTS),
    "hparams": ("Hparams", "hparams.js", (), VIEWS),
    "diff": ("Diff", "diff.js", (), VIEWS),
}


class SignedIntConvertor(Convertor):
    """Run ids can be negative (-1 is the debug run); Starlette's `int` is unsigned."""

    regex = "-?[0-9]+"

    def convert(self, value: str) -> int:
        # Past 19 digits any id is out of range (params.path_id answers 400); int() of over 4,300
        # digits would raise, and a raise here is a 500.
        if len(value.lstrip("-")) > 19:
            return -OUT_OF_RANGE if value.startswith("-") else OUT_OF_RANGE
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("sint", SignedIntConvertor())


def create_app(
    url_or_path: LocationLike,
    *,
    token: str | None = None,
    read_only: bool = False,
    live_interval: float = stream.INTERVAL,
    artifacts: str | None = None,
    write_tokens: Sequence[str] = (),
    tokens: Sequence[TokenEntry] = (),
) -> Starlette:
    """The dashboard for the result table at `url_or_path` (a SQLite file or postgresql:// URL);
    with `write_tokens` (or write tokens among `tokens`, a tokens file's: dashboard/tokens.py), it
    also accepts writes of remote clients holding one (dashboard/ingest.py), and creates the table
    if there is none. Any token of `tokens` opens the dashboard too.

    Raises FileNotFoundError for a missing SQLite file, ValueError for a file that is not a
    result table and for an empty or blank token, before anything is served."""
    token = usable_token(token)
    table = Location.of(url_or_path)
    writers = TokenSet.of(list(tokens), ("write",), tuple(usable_token(t) or "" for t in write_tokens))
    readers = TokenSet.of(list(tokens), ("read",), () if token is None else (token,))
    location = location_for(table, artifacts)  # where the files of `log_artifact` are
    ingest = Ingest(table, writers, readers, location) if writers else None
    queries, store = open_for_dashboard(table, read_only)  # creates nothing, migrates nothing
    csrf_secret = secrets.token_urlsafe(32)
    # Names the browser's saved layout; of the shown location, so the page holds no hash of a password.
    table_id = hashlib.sha256(str(table).encode()).hexdigest()[:16]
    files = {name: (module, classic, sheets) for name, (_, module, classic, sheets) in PAGES.items()}
    assets = Assets(HERE / "static", files)
    pages = {name: _page(name, csrf_secret, read_only, table_id, assets) for name in PAGES}
    fragment_frame = (HERE / "templates" / "fragment.html").read_text(encoding="utf-8")
    guard = (HERE / "static" / "fragment-guard.js").read_text(encoding="utf-8")

    def page(name: str):
        parts = first_view.PageParts(*pages[name])
        policy = page_csp(assets.scripts[name].source, assets.styles[name].source)

        async def handler(request: Request) -> Response:
            # the head at once, the first screen's answers once computed (first_view.py)
            gzipped = "gzip" in request.headers.get("accept-encoding", "")
            headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding",
                       "Content-Security-Policy": policy, "X-Frame-Options": "DENY"}  # fmt: skip
            if gzipped:
                headers["Content-Encoding"] = "gzip"
            body = first_view.page_body(parts, name, request, gzipped)
            return StreamingResponse(body, media_type="text/html", headers=headers)

        return handler

    def fragment(request: Request) -> Response:
        text_id = params.path_id(request, "text_id")
        content = queries.fragment(text_id)
        if content is None:
            return HTMLResponse("no such fragment", status_code=404)
        if request.headers.get("sec-fetch-dest") == "document":
            # Opened as a page of its own: a sandboxed document still navigates its own window, so
            # it gets our frame around it (whose navigation it cannot touch).
            frame = fragment_frame.replace("{{id}}", str(text_id))
            return HTMLResponse(frame, headers={"Cache-Control": "no-store"})
        return HTMLResponse(
            guarded(content, guard),
            headers={"Content-Security-Policy": FRAGMENT_CSP, "Cache-Control": "no-store"},
        )

    def openapi(request: Request) -> Response:
        return Json(openapi_schema())

    routes = [
        Route("/", page("table")),
        Route("/runs/{run_id:sint}", page("run")),
        Route("/compare", page("compare")),
        Route("/hparams", page("hparams")),
        Route("/diff", page("diff")),
        Route("/fragments/{text_id:sint}", fragment),
        Route("/api/openapi.json", openapi),
        Route("/api/runs", api.runs),
        Route("/api/runs/count", api.runs_count),
        Route("/api/version", api.version),
        Route("/api/tags", api.run_tags),
        Route("/api/experiments", api.experiments),
        Route("/api/columns", api.columns, methods=["GET"]),
        Route("/api/columns", api.save_columns, methods=["POST"]),
        Route("/api/runs/{run_id:sint}", api.run_detail, methods=["GET"]),
        Route("/api/runs/{run_id:sint}", api.edit_run, methods=["POST"]),
        Route("/api/runs/{run_id:sint}/scalars.csv", api.scalars_csv),
        Route("/api/runs/{run_id:sint}/repeated-steps", api.repeated_steps),
        Route("/api/runs/{run_id:sint}/scalar-events", api.scalar_events),
        Route("/api/runs/{run_id:sint}/media", api.media),
        Route("/api/runs/{run_id:sint}/texts", api.texts),
        Route("/api/runs/{run_id:sint}/alerts", api.run_alerts),
        Route("/api/alerts", api.alerts),
        Route("/api/runs/{run_id:sint}/histograms", api.histograms),
        Route("/api/runs/{run_id:sint}/console", api.console),
        Route("/api/runs/{run_id:sint}/environment", api.environment),
        Route("/api/runs/{run_id:sint}/artifacts", api.artifacts),
        Route("/api/runs/{run_id:sint}/artifacts/{name:path}", api.artifact_file),
        Route("/api/media/{media_id:sint}", api.media_png),
        Route("/api/series", api.series),
        Route("/api/series/names", api.series_names),
        Route("/api/live", api.live),
        Route("/api/compare", analysis.compare),
        Route("/api/summaries", analysis.summaries),
        Route("/api/importance", analysis.importance),
        Route("/api/diff", analysis.diff),
        Route("/api/stream", stream.stream),
        Mount("/static", assets, name="static"),
    ]
    hub = stream.Hub(queries, interval=live_interval)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        hub.close()  # open event streams end, so the server can stop
        # then the connections, so none is left to the garbage collector: the store's (read-only
        # too, where `store` is None) after the pool it lends to `queries`
        queries.store.close()
        if ingest is not None:
            ingest.close()

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            BadRequest: _bad_request,
            HTTPException: _http_error,
            BodyTooLarge: _too_large,
            DatabaseUnreachable: _unreachable,
            DamagedTableError: _damaged,
        },
    )
    app.state.dashboard = api.Dashboard(queries, RunsTable(queries), Downsampler(queries), store, location)
    app.state.hub = hub
    app.add_middleware(Compressed)
    app.state.ingest = ingest
    # a file's tokens, and write tokens, open the dashboard too, when it asks for a token at all
    more = TokenSet.of(list(tokens), KINDS, tuple(write_tokens) if token or tokens else ())
    app.add_middleware(
        SecurityMiddleware, csrf_secret=csrf_secret, token=token, read_only=read_only, more_tokens=more
    )
    if ingest is not None:  # outside the dashboard's middleware: its own rules (dashboard/ingest.py)
        app.add_middleware(IngestGate, ingest=ingest)
    return app


def guarded(content: str, guard: str) -> str:
    """The fragment with the guard script first (after a doctype, which must stay first), and
    without declarative shadow roots (a closed one would hide a frame from the guard)."""
    content = DECLARATIVE_SHADOW.sub("data-blocked-shadowrootmode", content)
    head = ""
    if content.lstrip()[:9].lower() == "<!doctype":
        head, _, content = content.partition(">")
        head += ">"
    return f"{head}<script>{guard}</script>{content}"


class Compressed:
    """Responses gzipped (JSON, pages, CSV, fragments: a chart's series is a quarter of its size),
    but for the event stream, whose events must leave as they happen (a Starlette before 0.38
    would hold them back to compress), and files that are sent as they are stored (images,
    artefacts). The built assets come compressed already (assets.py); Starlette leaves those alone.
    No page echoes what a request sent next to the CSRF secret, so compressing pages leaks nothing
    (BREACH)."""

    UNCOMPRESSED = re.compile(r"^/api/(?:stream$|media/|runs/-?[0-9]+/artifacts/)")

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=500, compresslevel=6)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        plain = scope["type"] != "http" or self.UNCOMPRESSED.match(scope["path"])
        await (self.app if plain else self.gzip)(scope, receive, send)


def _page(name: str, csrf_secret: str, read_only: bool, table_id: str, assets: Assets) -> tuple[str, str]:
    """The page template filled in for a page, split where its first view goes (first_view.py).
    No user data: that arrives through the API or in the first view. Each placeholder is filled
    once, so a script that happens to hold a placeholder's text keeps it."""
    values = {"csrf": csrf_secret, "read_only": "true" if read_only else "false", "title": PAGES[name][0],
              "page": name, "table": table_id, "script": assets.scripts[name].text,
              "styles": assets.styles[name].text, "favicon": assets.urls["favicon.svg"]}  # fmt: skip
    template = (HERE / "templates" / "page.html").read_text(encoding="utf-8")
    head, _, tail = template.partition("{{first_view}}")
    head, tail = (_PLACEHOLDER.sub(lambda m: values[m[1]], part) for part in (head, tail))
    return head, tail


async def _bad_request(request: Request, error: Exception) -> Response:
    return Json({"error": str(error)}, status_code=400)


async def _too_large(request: Request, error: Exception) -> Response:
    return Json({"error": str(error)}, status_code=413)


async def _unreachable(request: Request, error: Exception) -> Response:
    """The database is down or restarting: a 503 that says so, not a 500; the next request
    connects anew, so the page works again as soon as the database does."""
    return Json({"error": str(error)}, status_code=503, headers={"Retry-After": "5"})


async def _damaged(request: Request, error: Exception) -> Response:
    """A read met a damaged page of the file (store/sqlite_damage.py): a 503 that says so and how to
    recover, not a 500; asking again will not help, so no Retry-After."""
    return Json({"error": str(error)}, status_code=503)


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    return Json({"error": error.detail}, status_code=error.status_code, headers=error.headers)

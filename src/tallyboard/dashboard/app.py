"""The ASGI application: routes for pages, the JSON API, logged HTML fragments and static files.

Pages are static HTML from templates/ with one substitution (the CSRF secret); all data comes
from the API and is put into the page with textContent, never as markup.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tallyboard.dashboard import api, params
from tallyboard.dashboard.downsample import Downsampler
from tallyboard.dashboard.openapi import openapi_schema
from tallyboard.dashboard.params import BadRequest, Json
from tallyboard.dashboard.runs_table import RunsTable
from tallyboard.dashboard.security import FRAGMENT_CSP, SecurityMiddleware
from tallyboard.store import open_store
from tallyboard.store.queries import DashboardQueries

HERE = Path(__file__).parent
CHARTS = ("vendor/uplot/uPlot.iife.min.js", "charts.js")
PAGES = {  # page -> (title, its scripts after common.js)
    "table": ("Runs", ("table.js",)),
    "run": ("Run", (*CHARTS, "run.js")),
    "compare": ("Compare", (*CHARTS, "compare.js")),
}


class SignedIntConvertor(Convertor):
    """Run ids can be negative (-1 is the debug run); Starlette's `int` is unsigned."""

    regex = "-?[0-9]+"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("sint", SignedIntConvertor())


def create_app(url_or_path: str, *, token: str | None = None, read_only: bool = False) -> Starlette:
    """The dashboard for the result table at `url_or_path` (a SQLite file or postgresql:// URL).

    Raises FileNotFoundError for a missing SQLite file and ValueError for a file that is not a
    result table, before anything is served."""
    queries = DashboardQueries(url_or_path)
    store = None if read_only else open_store(url_or_path)  # migrates an older table forward
    csrf_secret = secrets.token_urlsafe(32)
    pages = {name: _page(name, csrf_secret, read_only) for name in PAGES}

    def page(name: str):
        def handler(request: Request) -> Response:
            return HTMLResponse(pages[name], headers={"Cache-Control": "no-store"})

        return handler

    def fragment(request: Request) -> Response:
        content = queries.fragment(params.path_id(request, "text_id"))
        if content is None:
            return HTMLResponse("no such fragment", status_code=404)
        return HTMLResponse(
            content, headers={"Content-Security-Policy": FRAGMENT_CSP, "Cache-Control": "no-store"}
        )

    def openapi(request: Request) -> Response:
        return Json(openapi_schema())

    routes = [
        Route("/", page("table")),
        Route("/runs/{run_id:sint}", page("run")),
        Route("/compare", page("compare")),
        Route("/fragments/{text_id:sint}", fragment),
        Route("/api/openapi.json", openapi),
        Route("/api/runs", api.runs),
        Route("/api/version", api.version),
        Route("/api/tags", api.run_tags),
        Route("/api/columns", api.columns, methods=["GET"]),
        Route("/api/columns", api.save_columns, methods=["POST"]),
        Route("/api/runs/{run_id:sint}", api.run_detail, methods=["GET"]),
        Route("/api/runs/{run_id:sint}", api.edit_run, methods=["POST"]),
        Route("/api/runs/{run_id:sint}/scalars.csv", api.scalars_csv),
        Route("/api/runs/{run_id:sint}/repeated-steps", api.repeated_steps),
        Route("/api/runs/{run_id:sint}/scalar-events", api.scalar_events),
        Route("/api/runs/{run_id:sint}/media", api.media),
        Route("/api/runs/{run_id:sint}/texts", api.texts),
        Route("/api/media/{media_id:sint}", api.media_png),
        Route("/api/series", api.series),
        Route("/api/live", api.live),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={BadRequest: _bad_request, HTTPException: _http_error},
    )
    app.state.dashboard = api.Dashboard(queries, RunsTable(queries), Downsampler(queries), store)
    app.add_middleware(SecurityMiddleware, csrf_secret=csrf_secret, token=token, read_only=read_only)
    return app


def _page(name: str, csrf_secret: str, read_only: bool) -> str:
    """The one page template filled in for a page (no user data: that arrives through the API)."""
    title, scripts = PAGES[name]
    html = (HERE / "templates" / "page.html").read_text(encoding="utf-8")
    tags = "\n".join(f'<script src="/static/{script}" defer></script>' for script in scripts)
    values = {"csrf": csrf_secret, "read_only": "true" if read_only else "false", "title": title,
              "page": name, "scripts": tags}  # fmt: skip
    for key, value in values.items():
        html = html.replace("{{" + key + "}}", value)
    return html


async def _bad_request(request: Request, error: Exception) -> Response:
    return Json({"error": str(error)}, status_code=400)


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    return Json({"error": error.detail}, status_code=error.status_code, headers=error.headers)

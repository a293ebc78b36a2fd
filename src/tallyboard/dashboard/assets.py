"""The dashboard's static files: served with the media types the browser insists on, and the
built assets of the pages at content-hashed URLs.

The pages' scripts are ES modules, and a browser runs a module only when it arrives with a
JavaScript media type (under `X-Content-Type-Options: nosniff`, which we send, a classic script
too). Starlette guesses from the `mimetypes` table, which the machine's own files and registry
can change (Windows often maps .js to text/plain), so the types of what we ship are fixed here.

What a page loads is built once, when the app is created: its script (bundle.py: its module graph,
uPlot first where it draws charts), the style sheet (uPlot's and ours) and the icon. Each is named
by a hash of its content (`bundle/run.3f1c9a0b2d4e.js`), kept in memory with its gzip form, and
sent with `Cache-Control: immutable` for a year: a browser asks once per version, and a new
version is a new name. Every file of static/ is also served under its own name (revalidated each
time: `no-cache`), for scripts and tests that fetch one.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from tallyboard.dashboard.bundle import bundle

MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
IMMUTABLE = "public, max-age=31536000, immutable"
STYLES = ("vendor/uplot/uPlot.min.css", "app.css")  # in cascade order: ours may override uPlot's


@dataclass(frozen=True)
class Built:
    """One built asset: its bytes, their gzip form and its media type."""

    body: bytes
    gzipped: bytes
    media_type: str


class Assets(StaticFiles):
    """static/ with fixed media types, plus the pages' built assets at hashed names.

    `pages` maps a page to (its entry module, the classic scripts it needs first)."""

    def __init__(self, directory: Path, pages: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
        super().__init__(directory=directory)
        self.built: dict[str, Built] = {}  # hashed name under /static/ -> asset
        self.urls: dict[str, str] = {}  # what it is ("run.js", "styles.css", "favicon.svg") -> URL
        for page, (entry, classic) in pages.items():
            self._add(f"{page}.js", "bundle/", bundle(directory, entry, classic).encode())
        styles = "\n".join((directory / name).read_text(encoding="utf-8") for name in STYLES)
        self._add("styles.css", "bundle/", styles.encode())
        self._add("favicon.svg", "", (directory / "favicon.svg").read_bytes())

    def _add(self, what: str, folder: str, body: bytes) -> None:
        stem, suffix = os.path.splitext(what)
        name = f"{folder}{stem}.{hashlib.sha256(body).hexdigest()[:12]}{suffix}"
        self.built[name] = Built(body, gzip.compress(body, 9, mtime=0), MEDIA_TYPES[suffix])
        self.urls[what] = f"/static/{name}"

    async def get_response(self, path: str, scope: Scope) -> Response:
        built = self.built.get(path.replace(os.sep, "/"))
        if built is None:
            response = await super().get_response(path, scope)
            response.headers.setdefault("cache-control", "no-cache")
            return response
        if scope["method"] not in ("GET", "HEAD"):
            raise HTTPException(status_code=405)
        headers = {"Cache-Control": IMMUTABLE, "Vary": "Accept-Encoding"}
        if "gzip" in Headers(scope=scope).get("accept-encoding", ""):
            return Response(
                built.gzipped, media_type=built.media_type, headers={**headers, "Content-Encoding": "gzip"}
            )
        return Response(built.body, media_type=built.media_type, headers=headers)

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        media_type = MEDIA_TYPES.get(os.path.splitext(str(full_path))[1].lower())
        if media_type is not None and response.status_code == 200:
            response.headers["content-type"] = media_type
        return response

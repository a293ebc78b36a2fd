"""The dashboard's static files, served with the media types the browser insists on, and what
each page is built from: its script and style sheet, written into the page's HTML.

The static modules are ES modules, and a browser runs a module only when it arrives with a
JavaScript media type (under `X-Content-Type-Options: nosniff`, which we send, a classic script
too). Starlette guesses from the `mimetypes` table, which the machine's own files and registry
can change (Windows often maps .js to text/plain), so the types of what we ship are fixed here.

What a page needs is built once, when the app is created: its script (bundle.py: its module graph,
uPlot first where it draws charts) and its style sheets (app.py `PAGES`: uPlot's where it draws
charts, app.css on every page, views.css on all but the runs page, whose first rows waited for the
parse of those rules). Both are written into the page itself rather than linked. Why: on a first
visit a linked file is a second round trip that starts only once the browser has parsed the page's
head. On a loaded machine that came to 60-100 ms of a 200-400 ms first chart, idle in the middle of
it. Inline, the script compiles while the server is still computing the page's first view
(first_view.py). The page's CSP allows exactly these texts, by their SHA-256 (`Inline.source`): no
other inline script or style runs.
The icon is served at a content-hashed name (`favicon.3f1c9a0b2d4e.svg`) with `Cache-Control:
immutable` for a year. Every file of static/ is also served under its own name (revalidated each
time: `no-cache`), for scripts and tests that fetch one.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import re
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
# What would end an inline element early, or (`<!--`) put the HTML parser in a script's escaped
# state, where a `<script` would then hide the element's end.
_ENDS = {
    "script": re.compile(r"</script|<!--", re.IGNORECASE),
    "style": re.compile(r"</style", re.IGNORECASE),
}


# A page's entry module, the classic scripts it needs first and its style sheets in cascade order.
PageFiles = tuple[str, tuple[str, ...], tuple[str, ...]]


@dataclass(frozen=True)
class Inline:
    """A script or style sheet written into a page: its text and the CSP source that allows it."""

    text: str
    source: str  # "'sha256-<base64>'"

    @classmethod
    def of(cls, element: str, text: str, name: str) -> Inline:
        """`text` as the content of a `<script>` or `<style>` (`element`); a ValueError at start if
        it holds what would end the element (only our own files are ever inlined)."""
        found = _ENDS[element].search(text)
        if found is not None:
            raise ValueError(f"{name} holds {found[0]!r}: it cannot be inlined in a <{element}>")
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        return cls(text, f"'sha256-{digest}'")


def joined_styles(directory: Path, sheets: tuple[str, ...]) -> str:
    """The style sheets `sheets` of `directory`, as one page holds them."""
    return "\n".join((directory / name).read_text(encoding="utf-8") for name in sheets)


@dataclass(frozen=True)
class Built:
    """One built asset: its bytes, their gzip form and its media type."""

    body: bytes
    gzipped: bytes
    media_type: str


class Assets(StaticFiles):
    """static/ with fixed media types and the icon at a hashed name, plus each page's script and
    style sheets, to be written into the pages.

    `pages` maps a page to its files (`PageFiles`)."""

    def __init__(self, directory: Path, pages: Mapping[str, PageFiles]) -> None:
        super().__init__(directory=directory)
        self.built: dict[str, Built] = {}  # hashed name under /static/ -> asset
        self.urls: dict[str, str] = {}  # what it is ("favicon.svg") -> URL
        self.scripts = {
            page: Inline.of("script", bundle(directory, entry, classic), f"{page}'s script")
            for page, (entry, classic, _) in pages.items()
        }
        self.styles = {
            page: Inline.of("style", joined_styles(directory, sheets), f"{page}'s style sheets")
            for page, (_, _, sheets) in pages.items()
        }
        self._add("favicon.svg", (directory / "favicon.svg").read_bytes())

    def _add(self, what: str, body: bytes) -> None:
        stem, suffix = os.path.splitext(what)
        name = f"{stem}.{hashlib.sha256(body).hexdigest()[:12]}{suffix}"
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

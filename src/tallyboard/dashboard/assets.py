"""The dashboard's static files: served with the media types the browser insists on, and the
module graph each page preloads.

The pages' scripts are ES modules, and a browser runs a module only when it arrives with a
JavaScript media type (under `X-Content-Type-Options: nosniff`, which we send, a classic script
too). Starlette guesses from the `mimetypes` table, which the machine's own files and registry
can change (Windows often maps .js to text/plain), so the types of what we ship are fixed here.

Without a bundler, a browser learns a module's imports only once it has it, one level of the graph
per round trip; the page names the whole graph up front (`<link rel="modulepreload">`) instead.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

# `import ... from "./x.js"` and `export ... from "./x.js"`: our modules import one another only so
IMPORT = re.compile(r"""^\s*(?:import|export)\b[^;'"]*?\bfrom\s+["'](\./[^"']+)["']""", re.MULTILINE)

MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


class Assets(StaticFiles):
    """StaticFiles whose scripts, styles and icons carry a fixed media type."""

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


def module_graph(static: Path, entry: str) -> list[str]:
    """The modules `entry` imports, directly or through others (names relative to `static`), in
    the order they are first met."""
    found: list[str] = []
    todo = [entry]
    while todo:
        for target in IMPORT.findall((static / todo.pop(0)).read_text(encoding="utf-8")):
            name = target.removeprefix("./")
            if name != entry and name not in found:
                found.append(name)
                todo.append(name)
    return found

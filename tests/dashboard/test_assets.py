"""The dashboard's scripts as the browser gets them: each page loads one ES module from the package,
whose imports are files of the package too (no bundler, no CDN); scripts arrive with a JavaScript
media type (module scripts, and under nosniff all scripts, run only then) and under a CSP that
allows this server's scripts and nothing inline or evaluated."""

from __future__ import annotations

import re
from pathlib import Path

from tallyboard.dashboard.app import PAGES
from tallyboard.dashboard.assets import module_graph

STATIC = Path(__file__).resolve().parents[2] / "src" / "tallyboard" / "dashboard" / "static"
SPECIFIER = re.compile(r"""\bfrom\s+["']([^"']+)["']""")
PAGE_URLS = {
    "table": "/", "run": "/runs/1", "compare": "/compare?runs=1,2", "hparams": "/hparams", "diff": "/diff",
}  # fmt: skip


def test_every_module_is_a_package_file_that_some_page_loads():
    assert set(PAGE_URLS) == set(PAGES)
    for script in STATIC.glob("*.js"):
        for target in SPECIFIER.findall(script.read_text(encoding="utf-8")):
            assert target.startswith("./"), f"{script.name} imports {target}: only files of the package"
            assert (STATIC / target).is_file(), f"{script.name} imports a missing {target}"
    loaded = {name for _, module, _ in PAGES.values() for name in (module, *module_graph(STATIC, module))}
    # fragment-guard.js is no module: it is inlined into logged HTML fragments
    unused = {p.name for p in STATIC.glob("*.js")} - loaded - {"fragment-guard.js"}
    assert not unused, f"modules no page loads: {sorted(unused)}"


def test_pages_load_scripts_as_modules_with_a_javascript_type_under_the_csp(client):
    for name, url in PAGE_URLS.items():
        _, module, classic = PAGES[name]
        page = client.get(url)
        assert f'<script src="/static/{module}" type="module"></script>' in page.text
        assert page.text.count("<script") == 1 + len(classic)  # nothing inline
        # the whole module graph is asked for at once, not one level of imports per round trip
        preloaded = re.findall(r'<link rel="modulepreload" href="/static/([^"]+)">', page.text)
        assert preloaded == module_graph(STATIC, module) and (name == "diff" or preloaded)
        csp = page.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    for script in ("compare.js", "series-math.js", "common.js", "vendor/uplot/uPlot.iife.min.js"):
        answer = client.get(f"/static/{script}")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/javascript; charset=utf-8"
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert client.get("/static/app.css").headers["content-type"] == "text/css; charset=utf-8"
    assert client.get("/static/missing.js").status_code == 404

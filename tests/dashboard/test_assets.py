"""The dashboard's scripts as the browser gets them: each page loads one ES module from the package,
whose imports are files of the package too (no bundler, no CDN); scripts arrive with a JavaScript
media type (module scripts, and under nosniff all scripts, run only then) and under a CSP that
allows this server's scripts and nothing inline or evaluated."""

from __future__ import annotations

import re
from pathlib import Path

from tallyboard.dashboard.app import PAGES

STATIC = Path(__file__).resolve().parents[2] / "src" / "tallyboard" / "dashboard" / "static"
IMPORT = re.compile(r"""^\s*(?:import|export)\b[^;'"]*?\bfrom\s+["']([^"']+)["']""", re.MULTILINE)
PAGE_URLS = {
    "table": "/", "run": "/runs/1", "compare": "/compare?runs=1,2", "hparams": "/hparams", "diff": "/diff",
}  # fmt: skip


def imports_of(script: Path) -> list[str]:
    return IMPORT.findall(script.read_text(encoding="utf-8"))


def test_every_page_loads_its_module_and_the_modules_import_only_package_files():
    assert set(PAGE_URLS) == set(PAGES)
    seen: set[Path] = set()
    todo = [STATIC / module for _, module, _ in PAGES.values()]
    while todo:
        script = todo.pop()
        if script in seen:
            continue
        seen.add(script)
        for target in imports_of(script):
            assert target.startswith("./"), f"{script.name} imports {target}: only files of the package"
            path = (script.parent / target).resolve()
            assert path.is_file() and STATIC in path.parents, f"{script.name} imports a missing {target}"
            todo.append(path)
    # fragment-guard.js is no module: it is inlined into logged HTML fragments
    scripts = {p for p in STATIC.glob("*.js") if p.name != "fragment-guard.js"}
    assert scripts == seen, f"not reachable from any page: {sorted(p.name for p in scripts - seen)}"


def test_pages_load_scripts_as_modules_with_a_javascript_type_under_the_csp(client):
    for name, url in PAGE_URLS.items():
        _, module, classic = PAGES[name]
        page = client.get(url)
        assert f'<script src="/static/{module}" type="module"></script>' in page.text
        assert page.text.count("<script") == 1 + len(classic)  # nothing inline
        csp = page.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    for script in ("compare.js", "series-math.js", "common.js", "vendor/uplot/uPlot.iife.min.js"):
        answer = client.get(f"/static/{script}")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/javascript; charset=utf-8"
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert client.get("/static/app.css").headers["content-type"] == "text/css; charset=utf-8"
    assert client.get("/static/missing.js").status_code == 404

"""The dashboard's scripts as the browser gets them: each page holds one script, built at start from
the package's ES modules (bundle.py; no CDN, no committed build output), and the style sheet,
both written into the page (assets.py) under a CSP that allows exactly those two texts by their
hashes and nothing else inline or evaluated; static files arrive with a JavaScript media type
(module scripts, and under nosniff all scripts, run only then); responses are compressed."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from support import require
from tallyboard.dashboard.app import PAGES
from tallyboard.dashboard.assets import Inline, joined_styles
from tallyboard.dashboard.bundle import bundle, evaluation_order

STATIC = Path(__file__).resolve().parents[2] / "src" / "tallyboard" / "dashboard" / "static"
SPECIFIER = re.compile(r"""\bfrom\s+["']([^"']+)["']""")
PAGE_URLS = {
    "table": "/", "run": "/runs/1", "compare": "/compare?runs=1,2", "hparams": "/hparams", "diff": "/diff",
}  # fmt: skip
SCRIPT = re.compile(r'<script type="module">(.*?)</script>', re.S)
STYLE = re.compile(r"<style>(.*?)</style>", re.S)


def test_every_module_is_a_package_file_that_some_page_loads():
    assert set(PAGE_URLS) == set(PAGES)
    for script in STATIC.glob("*.js"):
        for target in SPECIFIER.findall(script.read_text(encoding="utf-8")):
            assert target.startswith("./"), f"{script.name} imports {target}: only files of the package"
            assert (STATIC / target).is_file(), f"{script.name} imports a missing {target}"
    loaded = {name for _, module, _, _ in PAGES.values() for name in evaluation_order(STATIC, module)}
    # fragment-guard.js is no module: it is inlined into logged HTML fragments
    unused = {p.name for p in STATIC.glob("*.js")} - loaded - {"fragment-guard.js"}
    assert not unused, f"modules no page loads: {sorted(unused)}"
    sheets = {sheet for *_, styles in PAGES.values() for sheet in styles}
    assert {p.name for p in STATIC.glob("*.css")} <= sheets, "a style sheet no page holds"


def test_a_module_comes_after_the_modules_it_imports():
    order = evaluation_order(STATIC, "compare.js")
    assert order[-1] == "compare.js" and order[0] == "values.js"
    assert order.index("common.js") < order.index("board.js") < order.index("compare.js")
    assert order.index("series-math.js") < order.index("charts.js")


def test_the_bundler_binds_every_import_form_and_refuses_what_it_does_not_know(tmp_path: Path):
    (tmp_path / "a.js").write_text("export const A = 1;\nexport function twice(x) { return 2 * x; }\n")
    (tmp_path / "b.js").write_text('export { A as B, twice } from "./a.js";\nconst c = 3;\nexport { c };\n')
    (tmp_path / "main.js").write_text(
        'import { B, twice as double } from "./b.js";\nimport * as M from "./b.js";\n'
        "globalThis.out = [B, double(M.c), M.twice(5)];\n"
    )
    text = bundle(tmp_path, "main.js")
    assert "import" not in text.replace("imports", "") and "export" not in text
    node = _node()  # run it: the bindings are right, not only rewritten
    (tmp_path / "bundle.mjs").write_text(text + "console.log(JSON.stringify(globalThis.out));\n")
    ran = subprocess.run([node, str(tmp_path / "bundle.mjs")], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[1,6,10]"
    (tmp_path / "main.js").write_text('import D from "./a.js";\n')
    with pytest.raises(ValueError, match="import form"):
        bundle(tmp_path, "main.js")
    (tmp_path / "main.js").write_text("export default 1;\n")
    with pytest.raises(ValueError, match="does not know"):
        bundle(tmp_path, "main.js")
    (tmp_path / "a.js").write_text('import { x } from "./main.js";\n')
    (tmp_path / "main.js").write_text('import { A } from "./a.js";\n')
    with pytest.raises(ValueError, match="import cycle"):
        bundle(tmp_path, "main.js")


def test_every_page_bundle_is_valid_javascript(tmp_path: Path):
    node = _node()
    for name, (_, module, classic, _) in PAGES.items():
        target = tmp_path / f"{name}.mjs"
        target.write_text(bundle(STATIC, module, classic))
        subprocess.run([node, "--check", str(target)], check=True)


def _node() -> str:
    node = shutil.which("node") or shutil.which("nodejs")
    require(node is not None, "node (Debian's nodejs) to run the bundles")
    assert node is not None
    return node


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _directive(csp: str, name: str) -> list[str]:
    [found] = [part.split()[1:] for part in csp.split(";") if part.split()[:1] == [name]]
    return found


def test_pages_hold_their_one_script_and_their_style_sheets_allowed_by_their_hashes_only(client):
    for name, url in PAGE_URLS.items():
        _, module, classic, sheets = PAGES[name]
        styles = joined_styles(STATIC, sheets)
        page = client.get(url)
        [script] = SCRIPT.findall(page.text)
        assert script == bundle(STATIC, module, classic)
        assert ("globalThis.uPlot" in script) == bool(classic)
        # one script to run (the first view is data: first_view.py), nothing to fetch before it draws
        assert page.text.count("<script") - page.text.count('<script type="application/json"') == 1
        assert "<script src" not in page.text and '<link rel="stylesheet"' not in page.text
        assert STYLE.findall(page.text) == [styles] and (".uplot" in styles) == bool(classic)
        assert (".chart-card" in styles) == (name != "table")  # the views' rules but on the runs page
        csp = page.headers["content-security-policy"]
        assert _directive(csp, "script-src") == [_hash(script)]  # no 'self', no other inline script
        assert _directive(csp, "style-src") == [_hash(styles)]
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "frame-ancestors 'none'" in csp
        assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
    icon = re.search(r'<link rel="icon" href="(/static/favicon\.[0-9a-f]{12}\.svg)"', page.text)
    assert icon is not None
    answer = client.get(icon[1])
    assert answer.headers["content-type"] == "image/svg+xml"
    assert answer.headers["cache-control"].endswith("immutable")


def test_a_text_that_would_end_its_element_is_refused_at_start():
    assert Inline.of("script", "const a = '<scrip' + 't>';", "a").source.startswith("'sha256-")
    for text in ("x = '</script>'", "x = '</SCRIPT '", "<!-- x"):
        with pytest.raises(ValueError, match="cannot be inlined"):
            Inline.of("script", text, "a")
    with pytest.raises(ValueError, match="cannot be inlined"):
        Inline.of("style", "a { } </style><script>", "the style sheet")


def first_view(html: str) -> dict:
    """The answers a page holds inline (first_view.py), {} for none."""
    found = re.findall(r'<script type="application/json" id="first-view">(.*?)</script>', html, re.S)
    return json.loads(found[0]) if found else {}


def test_the_run_and_runs_pages_hold_their_first_answers_as_the_api_gives_them(client):
    run = first_view(client.get("/runs/2").text)
    assert run["/api/runs/2"]["run_id"] == 2
    [series] = [url for url in run if url.startswith("/api/series?")]
    assert series == "/api/series?runs=2&metric=" + run["/api/runs/2"]["series"][0]["metric"] + "&width=800"
    assert run[series] == client.get(series).json()  # what the page would have fetched
    assert run["/api/runs/2/alerts"] == client.get("/api/runs/2/alerts").json()
    table = first_view(client.get("/").text)
    rows = "/api/runs?offset=0&limit=100&sort=run_id&desc=false&filter=&q=&hidden=false"
    first_screen = ("/api/experiments", rows, "/api/alerts")
    assert table == {url: client.get(url).json() for url in first_screen}
    assert list(first_view(client.get("/?sort=lr&desc=1").text))[1].endswith(
        "sort=lr&desc=true&filter=&q=&hidden=false"
    )
    assert first_view(client.get("/runs/999").text) == {}  # no such run: the page asks, and says so
    assert first_view(client.get("/?filter=lr <").text) == {
        "/api/experiments": client.get("/api/experiments").json()
    }
    assert first_view(client.get("/diff").text) == {}


def test_a_page_sends_its_head_before_its_first_view_compressed_apart_from_it(client):
    """The head (script, styles, CSRF secret) leaves at once, so the script compiles while the first
    view is computed; after a full flush, the first view cannot be compressed against the secret
    (BREACH)."""
    with client.stream("GET", "/runs/2", headers={"Accept-Encoding": "gzip"}) as answer:
        assert answer.headers["content-encoding"] == "gzip"
        chunks = list(answer.iter_raw())
    head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(chunks[0])
    assert b'<script type="module">' in head and b'name="csrf-token"' in head
    assert b'id="first-view"' not in head
    whole = zlib.decompressobj(16 + zlib.MAX_WBITS)
    text = (whole.decompress(b"".join(chunks)) + whole.flush()).decode()
    assert text.startswith(head.decode()) and 'id="first-view"' in text
    plain = client.get("/runs/2", headers={"Accept-Encoding": "identity"})
    assert (
        "content-encoding" not in plain.headers
        and plain.text.split('id="first-view"')[0] == text.split('id="first-view"')[0]
    )


def test_every_static_file_is_still_served_under_its_own_name_and_revalidated(client):
    for script in ("compare.js", "series-math.js", "common.js", "vendor/uplot/uPlot.iife.min.js"):
        answer = client.get(f"/static/{script}")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/javascript; charset=utf-8"
        assert answer.headers["cache-control"] == "no-cache"
    assert client.get("/static/app.css").headers["content-type"] == "text/css; charset=utf-8"
    assert client.get("/static/missing.js").status_code == 404
    assert client.get("/static/bundle/run.000000000000.js").status_code == 404


def test_json_is_compressed_when_the_client_takes_gzip(client):
    answer = client.get("/api/openapi.json")
    assert answer.headers["content-encoding"] == "gzip" and answer.json()["openapi"]
    assert "content-encoding" not in client.get("/api/openapi.json", headers={"Accept-Encoding": ""}).headers

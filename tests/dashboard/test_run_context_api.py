"""Markdown texts and notes, console lines and the environment through the dashboard's API, on
both engines: Markdown is rendered and sanitised on the server, everything else stays text."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from starlette.testclient import TestClient

import tallyboard as tb
from tallyboard.dashboard import create_app
from tallyboard.dashboard.markdown import render

HOSTILE = (
    "# Results\n\n**bold** and [docs](https://example.org)\n\n"
    "<script>alert('md')</script>\n\n[click](javascript:alert(1)) "
    '[also](JaVaScRiPt:alert(2)) <a href="javascript:alert(3)">raw</a> <img src=x onerror=alert(4)>\n\n'
    "| a | b |\n|---|---|\n| 1 | 2 |\n"
)


class Elements(HTMLParser):
    """The elements and attributes a browser would build from some HTML."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def assert_inert(html: str) -> None:
    """No element that runs code or fetches: no script/img/iframe, no on* handler, no link but http(s)."""
    for tag, attrs in Elements(html).found:
        assert tag not in ("script", "img", "iframe", "object", "embed", "style"), html
        assert not any(name.startswith("on") for name in attrs), html
        if "href" in attrs:
            assert (attrs["href"] or "").startswith(("https://", "http://", "mailto:")), html


def test_render_keeps_markdown_and_strips_what_runs() -> None:
    html = render(HOSTILE)
    assert "<h1>Results</h1>" in html and "<strong>bold</strong>" in html and "<table>" in html
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">docs</a>' in html
    assert_inert(html)
    assert "&lt;script&gt;" in html  # raw HTML in Markdown is shown as text, not run


@pytest.fixture
def client(db_url: str):
    table = tb.ResultTable(db_url, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("md", auto_log_plt=False) as run:
        run.add_text(HOSTILE, tag="report", markdown=True)
        run.add_text("# not markdown <b>", tag="plain")
        run.set_note("**note** <script>x()</script>")
        for number in range(5):
            run.add_console_line(f"line {number}", stream="stderr" if number == 3 else "stdout")
    with TestClient(create_app(db_url), base_url="http://127.0.0.1") as test_client:
        yield test_client
    table.close()


def test_markdown_texts_come_rendered_and_sanitised(client: TestClient) -> None:
    texts = {t["tag"]: t for t in client.get("/api/runs/1/texts?kind=text").json()["texts"]}
    assert texts["report"]["markdown"] is True and texts["report"]["content"] == HOSTILE
    assert "<h1>Results</h1>" in texts["report"]["html"]
    assert_inert(texts["report"]["html"])
    assert texts["plain"]["markdown"] is False and texts["plain"]["html"] is None
    run = client.get("/api/runs/1").json()
    assert run["note_html"].startswith("<p><strong>note</strong>")
    assert_inert(run["note_html"])


def test_console_pages_after_an_id_and_searches(client: TestClient) -> None:
    answer = client.get("/api/runs/1/console").json()
    assert [line["line"] for line in answer["lines"]] == [f"line {n}" for n in range(5)]
    assert answer["lines"][3]["stream"] == "stderr" and answer["last"] == answer["lines"][-1]["console_id"]
    after = answer["lines"][1]["console_id"]
    tail = client.get(f"/api/runs/1/console?after={after}").json()
    assert [line["line"] for line in tail["lines"]] == ["line 2", "line 3", "line 4"]
    caught_up = client.get(f"/api/runs/1/console?after={answer['last']}").json()
    assert caught_up == {"lines": [], "last": answer["last"]}
    found = client.get("/api/runs/1/console", params={"search": "LINE 4"}).json()["lines"]
    assert [line["line"] for line in found] == ["line 4"]
    assert client.get("/api/runs/1/console?after=-1").status_code == 400
    assert client.get("/api/runs/1/console", params={"search": "x" * 201}).status_code == 400


def test_environment_route(client: TestClient) -> None:
    env = client.get("/api/runs/1/environment").json()["environment"]
    assert env["python"] and "packages" in env
    assert client.get("/api/runs/99/environment").json() == {"environment": None}

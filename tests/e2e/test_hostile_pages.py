"""Every page of the dashboard opened in Chromium against a table with a payload in every field:
no script of ours runs the payloads, nothing navigates away or leaves the server, no answer is a
5xx, and the console holds no errors but the fragment sandbox's own refusals."""

from __future__ import annotations

import html
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

import tallyboard as tb
from dashboard.hostile_table import PAYLOAD, SHORT, hostile_snapshot  # noqa: F401 (fixture)
from e2e.browser import running_dashboard

TIMEOUT = 15_000
TABS = ("scalars", "image", "figure", "text", "fragment", "hparams", "config", "reproduce", "logs",
        "environment")  # fmt: skip
PAGES = [
    "/", f"/?q={quote(PAYLOAD)}", f"/?filter={quote(PAYLOAD)}", f"/?sort={quote(SHORT)}&desc=1",
    *(f"/runs/1?tab={tab}" for tab in TABS), "/runs/2", "/compare?runs=1,2",
    "/compare?runs=1,2&group=constructor", f"/compare?runs=1,2&group={quote(SHORT)}&band=none",
    "/runs/" + "9" * 40, "/compare?runs=" + quote(PAYLOAD),
]  # fmt: skip
UNTOUCHED = "[window.pwned === undefined, document.title.includes('pwned'), location.origin]"


@pytest.fixture
def hostile_url(hostile_snapshot: Path) -> Iterator[str]:  # noqa: F811 (the imported fixture)
    with running_dashboard(str(hostile_snapshot)) as url:
        yield url


def watch(page, base_url: str) -> dict[str, list[str]]:
    """Collect what a page must not do: 5xx answers, requests off the server, dialogs, errors."""
    seen: dict[str, list[str]] = {"5xx": [], "offsite": [], "dialogs": [], "console": []}
    page.on("response", lambda r: r.status >= 500 and seen["5xx"].append(f"{r.status} {r.url}"))
    page.on(
        "request",
        lambda r: r.url.startswith((base_url, "data:", "blob:", "about:")) or seen["offsite"].append(r.url),
    )
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))

    def console(message) -> None:
        where = message.location.get("url", "")
        if message.type == "error" and "/fragments/" not in where and "status of 400" not in message.text:
            seen["console"].append(f"{message.text} at {where}")

    page.on("console", console)
    return seen


def test_every_page_against_the_hostile_table(page, hostile_url):
    seen = watch(page, hostile_url)
    for path in PAGES:
        page.goto(hostile_url + path)
        page.wait_for_load_state("networkidle", timeout=TIMEOUT)
        page.wait_for_timeout(300)  # scripts of the fragments, if any, have run
        assert page.evaluate(UNTOUCHED) == [True, False, hostile_url], path
        assert page.url.startswith(hostile_url), path
    assert page.errors == []
    assert seen == {"5xx": [], "offsite": [], "dialogs": [], "console": []}


def test_payloads_are_shown_as_text(page, hostile_url):
    page.goto(hostile_url + "/")
    page.wait_for_selector("#runs tbody tr[data-run]", timeout=TIMEOUT)
    assert PAYLOAD.split("\u202e")[0] in page.inner_text('#runs tr[data-run="1"]').replace("\u202e", "")
    assert page.query_selector("#runs img, #runs svg, #runs b") is None
    page.goto(hostile_url + "/runs/1?tab=hparams")
    page.wait_for_selector(".kv", timeout=TIMEOUT)
    keys = page.eval_on_selector_all(".kv .k", "ks => ks.map(k => k.textContent)")
    assert "constructor" in keys and f"{SHORT}0" in keys


def test_a_fragment_opened_as_its_own_page_stays_put(page, hostile_url):
    seen = watch(page, hostile_url)
    page.goto(hostile_url + "/runs/1?tab=fragment")
    frame_id = page.wait_for_selector("iframe.fragment", timeout=TIMEOUT).get_attribute("src")
    page.goto(hostile_url + frame_id)
    page.wait_for_selector("iframe.fragment", timeout=TIMEOUT)
    page.wait_for_timeout(1500)  # the meta refresh (0 s) and the script had their chance
    assert page.url == hostile_url + frame_id
    assert seen["offsite"] == [] and seen["5xx"] == []


OFFER = (
    "const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:127.0.0.1:PORT'}]});"
    " pc.createDataChannel('d'); pc.createOffer().then((o) => pc.setLocalDescription(o));"
)  # one line: it goes into JavaScript strings below
FRAMED = html.escape(f"<script>{OFFER}</script>")  # a frame whose fresh window has WebRTC
WEBRTC = f"""<p id='frag'>rtc</p>
<div><template shadowrootmode='closed'><iframe srcdoc="{FRAMED}"></iframe></template></div>
<script>
try {{ {OFFER} }} catch (e) {{ document.title = 'no RTCPeerConnection'; }}
try {{ new webkitRTCPeerConnection() }} catch (e) {{}}
const frame = document.createElement('iframe');
frame.srcdoc = '<scr' + 'ipt>' + `{OFFER}` + '</scr' + 'ipt>';
document.body.append(frame);
const hidden = '<template shadowroot' + 'mode=closed><iframe srcdoc="{FRAMED}"></iframe></template>';
const host = document.body.appendChild(document.createElement('div'));
try {{ host.setHTMLUnsafe(hidden); }} catch (e) {{}}
try {{ document.write(hidden); }} catch (e) {{}}
</script>"""


def test_fragments_send_no_webrtc_packets(page, sample_db, base_url):
    """Chromium ignores CSP's `webrtc 'block'`: the guard put in front of every fragment must
    stop STUN packets both from the fragment and from a frame it makes for a fresh window."""
    stun = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stun.bind(("127.0.0.1", 0))
    stun.settimeout(3)
    table = tb.ResultTable(sample_db, nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("rtc", cli={}, auto_log_plt=False) as run:
        run.add_fragment(WEBRTC.replace("PORT", str(stun.getsockname()[1])), tag="rtc", step=0)
    table.close()
    page.goto(f"{base_url}/runs/{run.run_id}?tab=fragment")
    frame = page.wait_for_selector("iframe.fragment", timeout=TIMEOUT).content_frame()
    frame.wait_for_load_state(timeout=TIMEOUT)
    with pytest.raises(TimeoutError):
        stun.recvfrom(2048)
    stun.close()
    assert frame.evaluate("[document.title, document.querySelectorAll('iframe').length]") == [
        "no RTCPeerConnection",
        0,
    ]

"""Request guards and response headers: token, CSRF, read-only mode, host check, CSP.

Why each one:
- token: a dashboard bound beyond loopback is reachable by anyone on the network. The token
  arrives once as `?token=` (then lives in an HttpOnly, SameSite=Strict cookie) or as a bearer
  header for scripts.
- CSRF: every state change is a POST that must carry the page's secret in `X-CSRF-Token`.
  Another site can make a browser send a form, never a custom header, and it cannot read the
  secret out of our pages.
- host check: without a token, only loopback host names are served, so a DNS-rebinding page
  cannot read our pages (and the CSRF secret in them) under its own name.
- CSP: a page runs only its own script and style sheet, allowed by their hashes (they are
  written into it: assets.py), and loads images only from this server; logged HTML gets a
  sandboxing policy of its own (see `FRAGMENT_CSP`).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Container
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, unquote, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_COOKIE = "tallyboard_token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
MAX_BODY = 1_000_000  # bytes: the largest edit (a column layout of 10,000 columns) is far below


def page_csp(script: str = "'self'", style: str = "'self'") -> str:
    """The policy of our pages and answers: scripts and styles only from the CSP sources `script`
    and `style`. A page passes the hashes of its own inline script and style sheet (assets.py
    `Inline`), so nothing else inline runs; every other answer gets 'self'."""
    return (
        f"default-src 'self'; script-src {script}; style-src {style}; img-src 'self' data: blob:; "
        "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )


PAGE_CSP = page_csp()
# Logged HTML runs its own scripts (plots made with plotly, say) in an opaque origin: it cannot
# read our pages, cookies or API, cannot fetch anything (no connect-src), and cannot navigate the
# dashboard. It is only ever shown in our own frame (see app.fragment), whose page's frame-src
# 'self' refuses to let it navigate itself off the server. Chromium ignores CSP's `webrtc`
# directive, so WebRTC is taken away by static/fragment-guard.js instead.
FRAGMENT_CSP = (
    "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; img-src data:; font-src data:; frame-ancestors 'self'; "
    "form-action 'none'; base-uri 'none'"
)
# Cross-Origin-Resource-Policy: another site cannot even load our images or JSON through <img>
# or <script> to probe which ids exist.
COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def usable_token(token: str | None) -> str | None:
    """The token to require, or None for none. An empty or blank token is refused: it is what
    `--token "$UNSET"` gives, and accepting it would serve everyone (and turn off the host check)."""
    if token is None:
        return None
    if not token.strip():
        raise ValueError("the token is empty: give a real one (--token), or none to have one generated")
    if token != token.strip():
        raise ValueError("the token starts or ends with whitespace: give it without")
    return token


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


class SecurityMiddleware:
    """Pure ASGI middleware: refuses what is not allowed, adds security headers to the rest."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        csrf_secret: str,
        token: str | None = None,
        read_only: bool = False,
        more_tokens: Container[str] = (),
    ) -> None:
        self.app = app
        self.csrf_secret = csrf_secret
        self.token = usable_token(token)
        self.read_only = read_only
        self.more_tokens = more_tokens  # those of a tokens file (dashboard/tokens.py), if any

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers) or _too_large(headers)
        if refusal is not None:
            status, message = refusal
            await _send_json(send, status, {"error": message})
            return
        receive = _capped(receive)
        if self._needs_token() and _query_token(scope) is not None:
            await self._redirect_with_cookie(scope, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [h for h in COMMON_HEADERS if h[0] not in present]
                if b"content-security-policy" not in present:
                    extra.append((b"content-security-policy", PAGE_CSP.encode()))
                    extra.append((b"x-frame-options", b"DENY"))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _needs_token(self) -> bool:
        return self.token is not None or bool(self.more_tokens)

    def _is_token(self, given: str | None) -> bool:
        return given is not None and (
            (self.token is not None and _same(given, self.token)) or given in self.more_tokens
        )

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        if not self._needs_token():
            if _hostname(headers.get("host", "")) not in LOOPBACK_HOSTS:
                return 421, "this dashboard answers on loopback host names only"
        elif not self._authorised(scope, headers):
            return 401, "a token is required: open the URL printed by `tallyboard serve`"
        if scope["method"] in SAFE_METHODS:
            return None
        if self.read_only:
            return 403, "the dashboard runs with --read-only"
        if not _same(headers.get(CSRF_HEADER), self.csrf_secret):
            return 403, "missing or wrong CSRF token: reload the page"
        origin = headers.get("origin")
        if origin and origin.split("://", 1)[-1] != headers.get("host"):
            return 403, "cross-origin request refused"
        return None

    def _authorised(self, scope: Scope, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        if auth.startswith("Bearer ") and self._is_token(auth[7:]):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            return False
        morsel = cookie.get(TOKEN_COOKIE)
        from_cookie = unquote(morsel.value) if morsel else None
        return self._is_token(from_cookie) or self._is_token(_query_token(scope))

    async def _redirect_with_cookie(self, scope: Scope, send: Send) -> None:
        """`?token=` worked: keep it in a cookie and drop it from the address bar."""
        query = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode()) if k != "token"]
        # One leading slash: '//evil.example/x' would be a scheme-relative redirect off this server.
        location = "/" + scope["path"].lstrip("/\\") + ("?" + urlencode(query) if query else "")
        given = _query_token(scope)  # kept when it is a token (else the request's cookie stays)
        # Percent-encoded: a token with spaces, quotes or ';' would otherwise break the cookie.
        cookie = f"{TOKEN_COOKIE}={quote(given or '', safe='')}; HttpOnly; SameSite=Strict; Path=/"
        kept = [(b"set-cookie", cookie.encode())] if self._is_token(given) else []
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode()),
                    *kept,
                    *COMMON_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _too_large(headers: dict[str, str]) -> tuple[int, str] | None:
    length = headers.get("content-length", "0")
    if not length.isdigit() or int(length) > MAX_BODY:
        return 413, f"the request body is limited to {MAX_BODY:,} bytes"
    return None


class BodyTooLarge(Exception):
    """A body without a (truthful) Content-Length grew past MAX_BODY; the app answers 413."""


def _capped(receive: Receive) -> Receive:
    """`receive` that stops a chunked body at MAX_BODY bytes."""
    seen = 0

    async def capped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY:
                raise BodyTooLarge(f"the request body is limited to {MAX_BODY:,} bytes")
        return message

    return capped


def _hostname(host: str) -> str:
    """'127.0.0.1:8765' -> '127.0.0.1'; '[::1]:8765' -> '[::1]'."""
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.split(":", 1)[0]


def _query_token(scope: Scope) -> str | None:
    for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1")):
        if key == "token":
            return value
    return None


async def _send_json(send: Send, status: int, body: dict) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"content-security-policy", PAGE_CSP.encode()),
                *COMMON_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})

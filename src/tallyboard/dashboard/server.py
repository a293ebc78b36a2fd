"""`serve`: run the dashboard with uvicorn, safely by default.

Loopback unless told otherwise; a non-loopback bind without a token gets a generated one, printed
with the URL (the only way in). A busy default port falls back to the next free one, so two
dashboards can run side by side without flags.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from collections.abc import Sequence
from types import FrameType
from urllib.parse import quote

from tallyboard.dashboard.app import create_app
from tallyboard.dashboard.security import usable_token
from tallyboard.dashboard.tokens import read as read_tokens
from tallyboard.store.location import Location, LocationLike

DEFAULT_PORT = 8765
PORT_TRIES = 20


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on `port`, or on the next free port when `port` is the busy default."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    candidates = range(port, port + PORT_TRIES) if port == DEFAULT_PORT else [port]
    last_error: OSError | None = None
    for candidate in candidates:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]"), candidate))
        except OSError as error:
            sock.close()
            last_error = error
            continue
        sock.listen(128)
        return sock
    raise OSError(f"cannot listen on {host}:{port}: {last_error}")


def serve(
    url_or_path: LocationLike,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    read_only: bool = False,
    artifacts: str | None = None,
    accept_writes: bool = False,
    write_tokens: Sequence[str] = (),
    certfile: str | None = None,
    keyfile: str | None = None,
    tokens_file: str | None = None,
) -> None:
    """Serve the dashboard for a result table until interrupted; prints the URL to open.

    `accept_writes`: remote clients holding one of `write_tokens` or a write token of `tokens_file`
    (`tallyboard tokens`) log into the table (one is generated and printed when there is none;
    docs/server.md); the file's tokens open the dashboard. `certfile`/`keyfile`: serve HTTPS.

    Raises FileNotFoundError when a SQLite file does not exist (nothing is created unless writes
    are accepted) and ValueError for an empty or blank token."""
    import uvicorn

    token = usable_token(token)  # "" (from `--token "$UNSET"`) is an error, never "no token"
    tokens = read_tokens(tokens_file) if tokens_file is not None else []
    if not is_loopback(host) and token is None and not tokens:
        token = secrets.token_urlsafe(24)
    if accept_writes and read_only:
        raise ValueError("--accept-writes and --read-only contradict each other: choose one")
    if (certfile is None) != (keyfile is None):
        raise ValueError("HTTPS needs both --certfile and --keyfile")
    generated = accept_writes and not write_tokens and not any(entry.kind == "write" for entry in tokens)
    if generated:
        write_tokens = [secrets.token_urlsafe(24)]
    table = Location.of(url_or_path)
    app = create_app(
        table, token=token, read_only=read_only, artifacts=artifacts,
        write_tokens=write_tokens if accept_writes else (), tokens=tokens,
    )  # fmt: skip
    sock = _bind(host, port)
    shown_host = f"[{host.strip('[]')}]" if ":" in host else host
    base = f"{'https' if certfile else 'http'}://{shown_host}:{sock.getsockname()[1]}/"
    url = base + (f"?token={quote(token, safe='')}" if token else "")
    mode = " (read-only)" if read_only else ""
    print(f"tallyboard dashboard for {table}{mode}: {url}", flush=True)
    if accept_writes:
        print(f"accepting writes: ResultTable({base.rstrip('/')!r}, token=WRITE_TOKEN)", flush=True)
        if generated:
            print(f"write token: {write_tokens[0]}", flush=True)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, ssl_certfile=certfile, ssl_keyfile=keyfile
    )
    server = uvicorn.Server(config)
    stop = server.handle_exit

    def handle_exit(sig: int, frame: FrameType | None) -> None:
        # uvicorn waits for open responses before its lifespan shutdown: end the event streams first.
        app.state.hub.close()
        stop(sig, frame)

    server.handle_exit = handle_exit  # type: ignore[method-assign]
    server.run(sockets=[sock])

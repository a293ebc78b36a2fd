"""GET answers kept while the table is unchanged: a chart of a 1M-point series, a page of 100,000
runs or their experiments are worked out once, then sent again at no cost until something commits.

Why: a dashboard is left open all day and its pages reloaded, opened in new tabs and by several
people, mostly over runs that have ended; each of those answers costs tens of milliseconds of the
server's CPU (decoding the blocks a chart cuts, grouping every run), which on a loaded machine is
what the first screen waits for. An answer is kept with the table's `data_version` read before it
was made, so a commit made while it was being made only costs it: the next request sees another
version and makes it again. Only answers that depend on nothing but the table and the request are
kept (not a run's details, which carry the server's clock). The answers' bytes are kept, never a
response object: middleware (compression) writes into the headers of what it sends.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response

MAX_BYTES = 32 << 20  # all kept answers together; the least recently used go first
MAX_ANSWER = 4 << 20  # a larger answer is sent, not kept


class AnswerCache:
    """Answers by request (path and query), each with the table's version it was made at."""

    def __init__(self, version: Callable[[], str], max_bytes: int = MAX_BYTES) -> None:
        self._version = version
        self._max_bytes = max_bytes
        self._kept: OrderedDict[str, tuple[str, bytes, list[tuple[bytes, bytes]]]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def answer(self, request: Request, make: Callable[[Request], Response]) -> Response:
        """The kept answer to `request` when the table has not changed since it was made, else
        `make(request)` (kept when it is a 200 of at most MAX_ANSWER bytes)."""
        key = f"{request.url.path}?{request.url.query}"
        version = self._version()
        with self._lock:
            found = self._kept.get(key)
            if found is not None and found[0] == version:
                self._kept.move_to_end(key)
                return _sent_again(*found[1:])
        made = make(request)
        body = bytes(made.body)
        if made.status_code == 200 and len(body) <= min(MAX_ANSWER, self._max_bytes):
            self._keep(key, (version, body, list(made.raw_headers)))
        return made

    def _keep(self, key: str, entry: tuple[str, bytes, list[tuple[bytes, bytes]]]) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._bytes -= len(old[1])
            self._kept[key] = entry
            self._bytes += len(entry[1])
            while self._bytes > self._max_bytes:
                _, dropped = self._kept.popitem(last=False)
                self._bytes -= len(dropped[1])


def _sent_again(body: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
    """A response of the kept bytes with the headers the answer was made with (a fresh list: the
    middleware adds to the one it sends)."""
    response = Response(body)
    response.raw_headers = list(headers)
    return response

"""Ports for the servers a test starts and may restart (PostgreSQL, PgBouncer, `tallyboard serve`,
the S3 server): probed free here, bound later by another process.

A port the kernel hands out for `bind(0)` lies in its ephemeral range, where any outgoing
connection (a client of another test) may take it between the probe and the server's bind, and
where another xdist worker may pick the same number while this test has its server stopped for a
restart; the server then fails to listen, or a test talks to another test's server. So each
worker counts through a block of its own below the ephemeral range.
"""

from __future__ import annotations

import itertools
import os
import socket

BLOCK = 400  # ports per xdist worker


def _first_ephemeral() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as span:
            return int(span.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_block() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    blocks = max(1, (_first_ephemeral() - 10000) // BLOCK)  # 10000 and up: clear of known services
    start = 10000 + (int(worker) if worker.isdigit() else 0) % blocks * BLOCK
    return range(start, start + BLOCK)


_candidates = itertools.cycle(_worker_block())


def free_port() -> int:
    """A port of this worker's block that nothing listens on or holds now."""
    for _ in range(BLOCK):
        port = next(_candidates)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"every port of {_worker_block()} is taken")

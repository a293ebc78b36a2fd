"""`serve`: clear errors, loopback by default, a generated token beyond loopback, port fallback."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tallyboard.dashboard import create_app, serve
from tallyboard.dashboard.server import DEFAULT_PORT, _bind, is_loopback


def test_a_missing_file_is_a_clear_error_and_creates_nothing(tmp_path):
    missing = tmp_path / "nope.db"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        serve(str(missing))
    assert not missing.exists()


def test_a_file_that_is_not_a_result_table_is_refused(tmp_path):
    other = tmp_path / "other.db"
    other.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ValueError, match="not a tallyboard result table"):
        create_app(str(other))


def test_loopback_names():
    assert all(map(is_loopback, ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.4", "example.com", "::"]))


def test_a_busy_default_port_falls_back_to_the_next_free_one():
    try:
        taken = _bind("127.0.0.1", DEFAULT_PORT)
    except OSError:
        taken = None  # someone else holds it already: the fallback is exercised all the same
    try:
        sock = _bind("127.0.0.1", DEFAULT_PORT)
        assert DEFAULT_PORT < sock.getsockname()[1] < DEFAULT_PORT + 20
        sock.close()
    finally:
        if taken is not None:
            taken.close()


def test_an_explicit_busy_port_is_an_error():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    with pytest.raises(OSError, match="cannot listen"):
        _bind("127.0.0.1", holder.getsockname()[1])
    holder.close()


def test_a_non_loopback_bind_generates_and_prints_a_token(sample_db):
    code = f"from tallyboard.dashboard import serve; serve({str(sample_db)!r}, host='0.0.0.0', port=0)"
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as server:
        try:
            line = server.stdout.readline()
            match = re.search(r"http://0\.0\.0\.0:(\d+)/\?token=([\w-]{20,})", line)
            assert match, line
            base = f"http://127.0.0.1:{match.group(1)}/api/version"
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(base, timeout=10)
            refused.value.close()  # the error holds the response and its connection
            assert refused.value.code == 401
            request = urllib.request.Request(base, headers={"Authorization": f"Bearer {match.group(2)}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200
        finally:
            server.terminate()
            server.wait(10)

"""A `tallyboard serve --accept-writes` process of the test's own, and a TCP proxy the test controls.

The server runs as a real process on a fixed port, so a test can stop it (SIGTERM), kill it
(SIGKILL) and start it again where its clients expect it. The proxy sits between clients and the
server and can cut the network: refuse and drop every connection, or pass requests on but swallow
the answers (the server commits, the client never hears: the case idempotency keys are for).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import IO

from ports import free_port

WRITE_TOKEN = "write-token-of-the-test"
READ_TOKEN = "read-token-of-the-test"


class ServerProcess:
    """`tallyboard serve TABLE --accept-writes --write-token WRITE_TOKEN` on 127.0.0.1:`port`."""

    def __init__(self, table: str, *options: str) -> None:
        self.table = table
        self.options = options
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        command = [
            sys.executable, "-m", "tallyboard", "serve", self.table, "--port", str(self.port),
            "--accept-writes", "--write-token", WRITE_TOKEN, *self.options,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        output = self.process.stdout
        assert output is not None
        seen = []
        for line in output:  # the start lines, printed once it listens
            seen.append(line)
            if line.startswith("accepting writes"):
                self._drain = threading.Thread(target=self._read_rest, args=(output,), daemon=True)
                self._drain.start()
                return
        output.close()
        self.process.wait(timeout=30)
        raise RuntimeError(f"the server did not start: {''.join(seen)}")

    @staticmethod
    def _read_rest(output: IO[str]) -> None:
        output.read()
        output.close()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        assert self.process is not None
        os.kill(self.process.pid, sig)
        self.process.wait(timeout=30)
        self._drain.join(timeout=30)
        self.process = None

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


@contextlib.contextmanager
def own_server(table: str, *options: str) -> Iterator[ServerProcess]:
    server = ServerProcess(table, *options)
    server.start()
    try:
        yield server
    finally:
        if server.process is not None:
            server.kill()


class Proxy:
    """127.0.0.1:`port` forwarded to `upstream_port`, unless cut."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        self.mode = "open"  # "open", "cut" (no connection gets through) or "swallow" (no answer does)
        self.swallowed = 0  # answers swallowed so far
        self.max_puts: int | None = None  # PUT requests (artefact chunks) let through, then refused
        self.puts = 0
        self.put_refused = threading.Event()  # set when a PUT was refused for `max_puts`
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self, mode: str = "cut") -> None:
        """Stop the traffic: every open connection is dropped, and so is every new one."""
        self.mode = mode
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def restore(self) -> None:
        self.mode = "open"

    def close(self) -> None:
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.mode == "cut" or self._refuse_put(client):
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _refuse_put(self, client: socket.socket) -> bool:
        """Whether `client`'s request is a PUT beyond `max_puts` (its first bytes peeked, not taken)."""
        if self.max_puts is None:
            return False
        client.settimeout(5)
        try:
            method = client.recv(4, socket.MSG_PEEK)
        except OSError:
            return True
        client.settimeout(None)
        if method != b"PUT ":
            return False
        if self.puts >= self.max_puts:
            self.put_refused.set()
            return True
        self.puts += 1
        return False

    def _pump(self, source: socket.socket, target: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers and self.mode == "swallow":  # the server answered; the client never hears
                    self.swallowed += 1
                    break
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        with self._lock:
            self._open -= {source, target}

"""A PostgreSQL server of the test's own, to stop and start at will (never the shared one).

`initdb` in a temporary folder, a free port, run as the `postgres` user (the server refuses root;
tests run as root in CI), `fsync=off` since nothing here tests the server's durability.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

from ports import free_port
from support import require

BIN = "/usr/lib/postgresql/15/bin"
USER = "postgres"


class OwnServer:
    """One PostgreSQL cluster in `folder`, listening on 127.0.0.1:`port` while started."""

    def __init__(self, folder: str, settings: dict[str, object]) -> None:
        self.folder = folder
        self.settings = settings  # server settings (`-c name=value`), e.g. max_connections
        self.data = os.path.join(folder, "data")
        self.port = free_port()
        self.url = f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"
        self._as_postgres(os.path.join(BIN, "initdb"), "-D", self.data, "-A", "trust", "-U", USER)

    def _as_postgres(self, *command: str) -> None:
        if os.geteuid() == 0:
            command = ("runuser", "-u", USER, "--", *command)
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        options += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        self._as_postgres(
            os.path.join(BIN, "pg_ctl"), "-D", self.data, "-o", options, "-l",
            os.path.join(self.folder, "server.log"), "-w", "start",
        )  # fmt: skip

    def stop(self) -> None:
        self._as_postgres(os.path.join(BIN, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop")

    def running(self) -> bool:
        return os.path.exists(os.path.join(self.data, "postmaster.pid"))


@contextlib.contextmanager
def own_server(**settings: object) -> Iterator[OwnServer]:
    """A started server of our own with these settings, stopped and deleted afterwards."""
    require(os.path.exists(os.path.join(BIN, "initdb")), f"PostgreSQL server binaries in {BIN}")
    folder = tempfile.mkdtemp(prefix="tallyboard-pg-")
    try:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(USER)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        server = OwnServer(folder, settings)
        server.start()
        try:
            yield server
        finally:
            if server.running():
                server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

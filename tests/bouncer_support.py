"""A PgBouncer of the test's own, in transaction pooling mode, in front of a PostgreSQL server.

Debian's `pgbouncer` binary (scripts/ensure_services.sh installs it), started on a free port with a
config and auth file in a temporary folder. PgBouncer refuses the `options` startup parameter the
test URLs use to pick a schema (tests/pg_support.py), so each schema gets a database alias of its
own whose `connect_query` sets the search_path on every server connection of that alias's pool:
the same isolation, through the pooler. `pool_size` is the number of server connections per alias.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import psycopg

from ports import free_port
from support import require

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
USER = "postgres"  # PgBouncer refuses to run as root; it drops to this user


class Bouncer:
    """One pgbouncer process listening on 127.0.0.1:`port` in front of `host`:`server_port`."""

    def __init__(self, folder: str, host: str, server_port: int, pool_size: int) -> None:
        self.folder = folder
        self.host, self.server_port, self.pool_size = host, server_port, pool_size
        self.port = free_port()
        self.aliases: dict[str, str] = {}  # alias -> its [databases] line
        self.ini = os.path.join(folder, "pgbouncer.ini")
        with open(os.path.join(folder, "userlist.txt"), "w") as users:
            users.write(f'"{USER}" ""\n')
        self._write_config()
        self.process: subprocess.Popen | None = None

    def _write_config(self) -> None:
        databases = "\n".join(self.aliases.values())
        with open(self.ini, "w") as ini:
            ini.write(
                f"[databases]\n{databases}\n[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
                f"auth_type = trust\nauth_file = {self.folder}/userlist.txt\n"
                "pool_mode = transaction\nmax_client_conn = 2000\n"
                f"default_pool_size = {self.pool_size}\nreserve_pool_size = 0\n"
                "server_reset_query =\nignore_startup_parameters = extra_float_digits\n"
                # a client left waiting for a server connection gets PgBouncer's error, not a hang
                f"query_wait_timeout = 30\nadmin_users = {USER}\n"
                # every test schema is a pool of its own: close idle server connections soon, or a
                # session's worth of pools would hold the shared server's connections for minutes
                "server_idle_timeout = 2\n"
                f"logfile = {self.folder}/pgbouncer.log\npidfile = {self.folder}/pgbouncer.pid\n"
            )

    def start(self) -> None:
        command = [BINARY, "-u", USER, self.ini] if os.geteuid() == 0 else [BINARY, self.ini]
        # pgbouncer logs to stderr as well as to its logfile: a pipe nobody reads would fill up
        # (64 kB of connection lines) and stop it mid-write, with every client waiting on it
        stderr = Path(self.folder) / "stderr.log"
        listening = f"listening on 127.0.0.1:{self.port}"
        started_before = self._log().count(listening)  # a restart appends to the same log
        with open(stderr, "ab") as sink:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sink)
        # its own log line, not a connection to the port: another process may be listening there
        deadline = time.monotonic() + 10
        while self._log().count(listening) == started_before:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"pgbouncer did not start: {stderr.read_text(errors='replace')}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Shut down once the transactions in flight have ended (SIGINT, PgBouncer's safe shutdown:
        a restart the clients should ride out); a bouncer still running after 10 s (a test that
        failed inside a transaction) is killed rather than left to hang the test."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def _log(self) -> str:
        with contextlib.suppress(OSError):
            return Path(self.folder, "pgbouncer.log").read_text(errors="replace")
        return ""

    def log_tail(self, lines: int = 40) -> str:
        """The end of PgBouncer's log: why it closed a client is written there, not sent to it."""
        return "\n".join(self._log().splitlines()[-lines:]) or "(no pgbouncer log)"

    def server_states(self) -> list[str]:
        """The state of each server connection (SHOW SERVERS on the admin console): `active` while
        linked to a client, `idle` once taken back into the pool."""
        admin = f"postgresql://{USER}@127.0.0.1:{self.port}/pgbouncer"
        with psycopg.connect(admin, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
            cursor = conn.execute("SHOW SERVERS")
            column = [c.name for c in cursor.description or ()].index("state")
            return [row[column] for row in cursor.fetchall()]

    def restart(self) -> None:
        self.stop()
        self.start()

    def url_for(self, direct_url: str) -> str:
        """The URL through this bouncer of `direct_url`'s database and schema (`options=-csearch_path`)."""
        parts = urlsplit(direct_url)
        database = parts.path.lstrip("/")
        schema = unquote(parts.query).partition("-csearch_path=")[2].partition("&")[0]
        alias = f"{database}__{schema}" if schema else database
        if alias not in self.aliases:
            line = f"{alias} = host={self.host} port={self.server_port} dbname={database}"
            if schema:
                line += f" connect_query='SET search_path TO {schema}'"
            self.aliases[alias] = line
            self._write_config()
            if self.process is not None:
                self.process.send_signal(signal.SIGHUP)  # reload: the new alias takes effect
                time.sleep(0.05)
        return f"postgresql://{parts.username or USER}@127.0.0.1:{self.port}/{alias}"


@contextlib.contextmanager
def bouncer(server_url: str, pool_size: int = 5) -> Iterator[Bouncer]:
    """A started PgBouncer in front of the server of `server_url`, stopped and deleted afterwards."""
    require(os.path.exists(BINARY), f"pgbouncer at {BINARY} (scripts/ensure_services.sh installs it)")
    parts = urlsplit(server_url)
    folder = tempfile.mkdtemp(prefix="tallyboard-bouncer-")
    try:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(USER)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        running = Bouncer(folder, parts.hostname or "127.0.0.1", parts.port or 5432, pool_size)
        running.start()
        try:
            yield running
        except BaseException as error:
            error.add_note(f"pgbouncer's log ends:\n{running.log_tail()}")
            raise
        finally:
            running.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

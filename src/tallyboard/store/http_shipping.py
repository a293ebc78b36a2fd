"""Shipping a spool (store/spool.py) to a tallyboard server over HTTP: the client of docs/server.md.

`ResultTable("https://tracker:8765")` logs into a node-local spool exactly as a spool in front of
PostgreSQL does, and the spool's shipper thread (store/spool_shipper.py) hands its journal entries
to `HttpDestination` instead of a database connection. The server (`tallyboard serve DB
--accept-writes`, dashboard/ingest.py) applies them with the same code the PostgreSQL shipper
uses, so the guarantees are the same ones, with the server in the database's place:

- Exactly once, in order: an entry's idempotency key is (spool id, seq). The server keeps each
  spool's watermark in its own table in the same transaction as the rows; a request cut off
  anywhere (server killed, network cut, answer lost) is wholly applied or not at all, and the
  next request from this process, a restarted one or `tallyboard sync` skips what the server has.
- Run ids and uniqueness are the server's, decided atomically when a run's start arrives; the
  answer maps the spool's run ids to the server's, and opening a destination asks for the whole
  map again (an answer lost after the commit must not lose it).
- The wire is the journal itself: each entry's arguments travel as the journal wrote them (the
  batch format of `spool.batch_to_json`, derived from store/tables.py), so the wire follows the
  tables whenever they change. One request is a gzip-compressed JSON document.

- Artefact bytes go before their listing: a shipment holding an `add_artifact` entry first
  uploads that file from the client's artefact store (the spool's `.artifacts` folder unless one
  is configured) in chunks of `UPLOAD_CHUNK` bytes, going on from what the server holds
  (store/received_blobs.py), so the listing never names bytes the server lacks for want of
  sending them. A server without an artefact store (501), or a file gone from the client's store,
  gets the listing alone, with a warning.

Only the standard library (`urllib`, `gzip`, `json`): the logging path imports nothing else.
TLS is `https://` with the system's certificates (`SSL_CERT_FILE` names another bundle).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import Any

from tallyboard.errors import NotFoundError, StoreError
from tallyboard.store.artifacts import Blobs, open_blobs
from tallyboard.store.location import Location
from tallyboard.store.spool import ShippedRun

API = "/api/ingest/v1"  # the protocol's version is in its paths (docs/server.md)
REQUEST_TIMEOUT = 30.0  # seconds one request may take before the shipper backs off and retries
COMPRESS_LEVEL = 1  # the shipper shares the training process's CPUs: fast over small
UPLOAD_CHUNK = 4 * 2**20  # bytes of artefact sent a request (the server takes up to 8 MiB)


def default_spool(server: Location) -> str:
    """The spool of a server when none is given: one file per server and user on this node,
    `$XDG_CACHE_HOME/tallyboard/spools/` (else `~/.cache/...`), named by the server's address.
    Shared by the processes that log to that server, so a restarted job ships what a killed one
    left; its folder is created here."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(cache, "tallyboard", "spools")
    os.makedirs(folder, exist_ok=True)
    address = urllib.parse.urlsplit(server.secret())
    name = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{address.hostname}-{address.port or address.scheme}")
    digest = hashlib.sha256(str(server).rstrip("/").encode()).hexdigest()[:12]
    return os.path.join(folder, f"{name}-{digest}.db")


class ShippingRefused(StoreError):
    """The server answered with an error (its status and message); the shipper retries later."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"the server answered {status}: {message}")
        self.status = status


def entries_document(entries: list[tuple[int, float, str, str]]) -> bytes:
    """The body of one shipment: {"entries": [[seq, logged_at, op, args], ...]}, args inlined as the
    journal holds them (JSON text already: no second encoding)."""
    items = ",".join(
        f"[{seq},{float(logged_at)!r},{json.dumps(op)},{args}]" for seq, logged_at, op, args in entries
    )
    return ('{"entries":[' + items + "]}").encode("utf-8")


def shipped_runs(rows: Any) -> list[ShippedRun]:
    """The server's [[spool_run, run_id, duplicate_of], ...] as records (anything else: an error)."""
    if not isinstance(rows, list):
        raise StoreError(f"the server answered runs as {type(rows).__name__}, not a list")
    try:
        return [
            ShippedRun(int(spool_run), int(run_id), None if dup is None else int(dup))
            for spool_run, run_id, dup in rows
        ]
    except (TypeError, ValueError) as error:
        raise StoreError(
            f"the server answered runs that are not [spool_run, run_id, duplicate_of]: {error}"
        ) from None


class HttpDestination:
    """A tallyboard server as the destination of one spool (`spool_shipper.Shipping`)."""

    def __init__(
        self, server: Location, spool_id: str, token: str | None, artifacts: str | None = None
    ) -> None:
        self.server = server
        self.api = server.secret().rstrip("/") + API
        self.base = f"{self.api}/spools/{spool_id}"
        self.token = token
        self.artifacts: Blobs | None = None if artifacts is None else open_blobs(artifacts)
        self._uploaded: set[str] = set()  # hashes the server holds (this destination saw it)
        # Runs the server created for this spool before (an answer may have been lost after its
        # commit): noted by the spool with the next shipment, as `Destination` does.
        answer = self._request("GET", self.base)
        self._unnoted = shipped_runs(answer.get("runs"))

    def close(self) -> None:
        """Nothing held open: each request is its own connection."""

    def ship(self, entries: list[tuple[int, float, str, str]]) -> tuple[int, list[ShippedRun]]:
        """Post `entries` (seq order) and return the server's watermark and the runs it created;
        the bytes of the artefacts they list are uploaded first."""
        for _, _, op, args in entries:
            if op == "add_artifact":
                run, name, _, size, sha256, *_ = json.loads(args)
                self._upload(sha256, size, f"artefact {name!r} of run {run}")
        body = gzip.compress(entries_document(entries), COMPRESS_LEVEL)
        answer = self._request("POST", self.base + "/entries", body)
        watermark = answer.get("shipped")
        if not isinstance(watermark, int):
            raise StoreError(f"the server answered no watermark: {answer!r:.200}")
        created, self._unnoted = self._unnoted + shipped_runs(answer.get("runs")), []
        return watermark, created

    def reopen(self, run_id: int, check: bool = True) -> dict[str, Any]:
        """Ask the server to reopen its run `run_id` for this spool (store/run_claims.py); within
        `REQUEST_TIMEOUT`, or an error that says why not."""
        body = json.dumps({"run": run_id, "check": check}).encode()
        try:
            answer = self._request("POST", self.base + "/reopen", body, "application/json")
        except ShippingRefused as refused:
            if refused.status == 404:
                raise NotFoundError(str(refused)) from None
            raise
        if not {"run", "rep", "rep_start", "next_steps", "fields"} <= set(answer):
            raise StoreError(
                f"the server answered a reopening without where the run stopped: {answer!r:.200}"
            )
        return answer

    def _upload(self, sha256: str, size: int, what: str) -> None:
        """Send the bytes of `sha256` the server lacks, from where its upload stands."""
        if sha256 in self._uploaded:
            return
        url = f"{self.api}/blobs/{sha256}"
        try:
            held = self._request("GET", url)
        except ShippingRefused as refused:
            if refused.status != 501:
                raise
            warnings.warn(f"{what}: {refused}; only its listing is shipped", RuntimeWarning, stacklevel=1)
            self._uploaded.add(sha256)
            return
        if not held.get("complete"):
            if self.artifacts is None or not self.artifacts.exists(sha256):
                warnings.warn(
                    f"{what}: its bytes are not in this client's artefact store, so the server gets"
                    " its listing alone",
                    RuntimeWarning,
                    stacklevel=1,
                )
            else:
                self._send(url, sha256, size, int(held.get("size") or 0))
        self._uploaded.add(sha256)

    def _send(self, url: str, sha256: str, size: int, offset: int) -> None:
        assert self.artifacts is not None
        with self.artifacts.open(sha256) as source:
            source.seek(offset)
            while True:
                chunk = source.read(UPLOAD_CHUNK)
                answer = self._request(
                    "PUT", f"{url}?offset={offset}&total={size}", chunk, "application/octet-stream"
                )
                if answer.get("complete"):
                    return
                if not chunk:
                    raise StoreError(f"the server holds {answer.get('size')} bytes of {sha256}, not {size}")
                offset += len(chunk)

    def _request(
        self, method: str, url: str, body: bytes | None = None, content_type: str | None = None
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if body is not None and content_type is not None:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers |= {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise ShippingRefused(error.code, _message(error)) from None
        except (OSError, ValueError) as error:  # unreachable, cut off, timed out, not JSON
            raise StoreError(f"cannot reach the tallyboard server {self.server}: {error}") from None
        if not isinstance(answer, dict):
            raise StoreError(f"the server {self.server} answered {type(answer).__name__}, not an object")
        return answer


def _message(error: urllib.error.HTTPError) -> str:
    """The server's {"error": ...} of a refusal, or its reason."""
    try:
        return str(json.loads(error.read(4096))["error"])
    except Exception:
        return str(error.reason)

"""The write endpoints of `tallyboard serve DB --accept-writes`: remote clients ship their spools here.

A client (`ResultTable("https://tracker:8765")`, store/http_shipping.py; or any other client of
docs/server.md) logs into a node-local spool and posts the spool's journal entries. This module
applies them to the served table with the PostgreSQL shipper's own `Destination`
(store/spool_shipper.py): the transaction that holds a request's rows holds the spool's new
watermark, so each entry, keyed (spool id, seq), is applied exactly once, in order, whoever sends
it how often. Requests that wait while another is applied are applied together, in one
transaction (group commit: one commit for many clients). Run starts are decided here, atomically,
with the table's uniqueness check.

Why it is an ASGI gate in front of the dashboard rather than routes of it: its rules differ from
the pages' (a bearer write token instead of the page's token and CSRF secret, bodies up to
`MAX_COMPRESSED` instead of 1 MB), and a request for it never reaches the dashboard's middleware.

What a client holding a write token can do, and no more:
- Writes need a write token (`--write-token`, or a write token of `tallyboard tokens`); none or
  an unknown one is a 401, a read token (`--token`, or a read token of the file) a 403.
- A request is bounded in bytes (compressed and decompressed) and in entries, and a spool in
  requests per second (429 with Retry-After); at most `MAX_IN_FLIGHT` requests are handled at
  once (503). Every field is checked as strictly as the client's calls check it
  (store/entry_checks.py) before a transaction starts: a 400 names the field.
- A run id in an entry is the spool's own; the destination maps it through the runs this spool
  started (or reopened: store/run_claims.py) on the server, so a client reaches no other run. A
  spool id is a random capability (a uuid4 the client drew): the server never shows one.
- One writer: one transaction at a time, on the ingest's own connection (the dashboard's readers
  and edits keep theirs); decoding and checking run on threads of the ingest's own, off the event
  loop, so pages keep their threads while shipments wait.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
import time
import zlib
from typing import Any

from anyio import CapacityLimiter, to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tallyboard.dashboard.tokens import TokenSet
from tallyboard.errors import DatabaseUnreachable, DuplicateRunError, NotFoundError
from tallyboard.store import Access, Location, Store, open_store
from tallyboard.store.artifacts import LocalBlobs, open_blobs
from tallyboard.store.entry_checks import BadEntry, check_entry
from tallyboard.store.received_blobs import MAX_BLOB, MAX_CHUNK, ReceivedBlobs, UploadRefused
from tallyboard.store.run_claims import RunInUse
from tallyboard.store.spool import ShippedRun, decode
from tallyboard.store.spool_shipper import Destination

PREFIX = "/api/ingest/v1"
MAX_COMPRESSED = 64 * 2**20  # bytes of a request body as sent (gzip)
MAX_DECOMPRESSED = 256 * 2**20  # bytes once decompressed: a client's shipment is at most 32 MB plus one entry
MAX_ENTRIES = 10_000  # a client ships 64 a request
MAX_IN_FLIGHT = 64  # requests read or applied at once (a client has one at a time); beyond: 503
RATE, BURST = 50.0, 200.0  # requests a second of one spool, sustained and in a burst
# ... and of one client address, whatever spool ids it makes up (a reverse proxy is one address
# for all its clients: room for hundreds of them)
ADDRESS_RATE, ADDRESS_BURST = 1000.0, 2000.0
MAX_DESTINATIONS = 4096  # spools whose run maps are kept in memory (then the cache starts over)
DB_RETRY_FOR = 1.0  # seconds a lost PostgreSQL is waited for before a request is a 503
SPOOL_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
ROUTE = re.compile(
    rf"{re.escape(PREFIX)}(?:/spools/(?P<spool>[^/]+)(?P<entries>/entries|/reopen)?|/blobs/(?P<blob>[^/]+))?/?"
)


class Refused(Exception):
    """A request answered with an error: its status, message and extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers or {}


class RateLimit:
    """A token bucket per spool: `rate` requests a second, `burst` at once."""

    def __init__(self, rate: float = RATE, burst: float = BURST) -> None:
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, now: float) -> float:
        """0 when a request of `key` may go now, else the seconds until one may."""
        with self._lock:
            if len(self._buckets) > MAX_DESTINATIONS:
                self._buckets.clear()
            tokens, since = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - since) * self.rate)
            if tokens < 1:
                self._buckets[key] = (tokens, now)
                return (1 - tokens) / self.rate
            self._buckets[key] = (tokens - 1, now)
            return 0.0


class Shipment:
    """One request's entries of a spool, and its answer once applied (or the error refusing it)."""

    def __init__(self, spool_id: str, entries: list[tuple[int, float, str, Any]]) -> None:
        self.spool_id, self.entries = spool_id, entries
        self.answer: dict[str, Any] | BaseException | None = None


def _shipped(spool_id: str, watermark: int, created: list[ShippedRun]) -> dict[str, Any]:
    return {"spool": spool_id, "shipped": watermark, "runs": [list(run) for run in created]}


class Ingest:
    """The served table's writer for remote spools: its own store, one transaction at a time."""

    def __init__(
        self, table: Location, writers: TokenSet, readers: TokenSet, artifacts: str | None = None
    ) -> None:
        if not writers:
            raise ValueError("accepting writes needs at least one write token")
        self.writers, self.readers = writers, readers
        self.store: Store = open_store(table, access=Access.WRITE)  # creates the table if missing
        self.store.retry_for = DB_RETRY_FOR  # PostgreSQL: a lost server is a 503 soon, not in 60 s
        self.limit = RateLimit()
        self.address_limit = RateLimit(ADDRESS_RATE, ADDRESS_BURST)
        self._destinations: dict[str, Destination] = {}
        self._writing = threading.Lock()  # held by the one thread applying shipments
        self._queued = threading.Lock()  # guards `_queue`, the shipments waiting for the writer
        self._queue: list[Shipment] = []
        self.in_flight = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        # Threads of the ingest's own: a shipment waiting for the writer never holds one the
        # dashboard's pages need (they share Starlette's default pool).
        self.threads = CapacityLimiter(MAX_IN_FLIGHT)
        # Where uploaded artefact bytes go (the table's artefact store); None: the server keeps
        # listings only (a 501 tells a client so).
        self.blobs = None if artifacts is None else received_blobs(artifacts)

    def close(self) -> None:
        self.store.close()

    # ---- authentication --------------------------------------------------------------------
    def authorise(self, headers: dict[str, str]) -> None:
        auth = headers.get("authorization", "")
        given = auth[7:] if auth.startswith("Bearer ") else None
        if given is None:
            raise Refused(401, "writes need a write token: Authorization: Bearer TOKEN")
        if given in self.writers:
            return
        if given in self.readers:
            raise Refused(403, "this token may read, not write: use a write token")
        raise Refused(401, "unknown token: writes need a write token")

    # ---- what a request does ------------------------------------------------------------------
    def state(self, spool_id: str) -> dict[str, Any]:
        """What the table holds of a spool: its watermark and its runs (all of them)."""
        with self._writing:
            destination = self._destination(spool_id)
            return {
                "spool": spool_id,
                "shipped": destination.watermark(),
                "runs": [list(run) for run in destination.known_runs()],
            }

    def reopen(self, spool_id: str, run_id: int, check: bool) -> dict[str, Any]:
        """Reopen run `run_id` of the table for a spool (store/run_claims.py): 404 for no such run,
        409 while another spool writes it or when its configuration ran again since it failed."""
        with self._writing:
            try:
                return self._destination(spool_id).reopen(run_id, check)
            except NotFoundError as error:
                raise Refused(404, str(error)) from None
            except RunInUse as busy:
                raise Refused(409, str(busy), {"Retry-After": str(max(1, round(busy.retry_after)))}) from None
            except DuplicateRunError as duplicate:
                raise Refused(409, str(duplicate)) from None

    def apply(self, spool_id: str, entries: list[tuple[int, float, str, Any]]) -> dict[str, Any]:
        """Apply checked entries of a spool exactly once; the watermark and the runs created.

        Group commit: requests that arrive while another is being applied wait, and the next of
        them to get the writer applies all that wait in one transaction (one commit, one fsync, for
        many clients; each spool's watermark in it with its rows). Should the group fail, each
        request is applied on its own, so one client's refused entries never refuse another's."""
        request = Shipment(spool_id, entries)
        with self._queued:
            self._queue.append(request)
        with self._writing:
            if request.answer is None:
                with self._queued:
                    group, self._queue = self._queue, []
                try:
                    self._apply_group(group)
                finally:  # whatever went wrong, every request of the group gets its answer
                    for waiting in group:
                        if waiting.answer is None:
                            waiting.answer = Refused(503, "not applied: try again", {"Retry-After": "1"})
        if isinstance(request.answer, BaseException):
            raise request.answer
        assert request.answer is not None
        return request.answer

    def _apply_group(self, group: list[Shipment]) -> None:
        if len(group) > 1:
            spool_ids = {request.spool_id for request in group}
            maps: dict[str, dict[int, int]] = {}

            def ship_all() -> list[tuple[int, list[ShippedRun]]]:
                destinations = {spool_id: self._destination(spool_id) for spool_id in spool_ids}
                for spool_id, destination in destinations.items():  # as before, when an attempt is retried
                    destination.runs = dict(maps.setdefault(spool_id, destination.runs))
                return [destinations[request.spool_id].ship(request.entries) for request in group]

            try:
                shipped = self.store.atomic(ship_all)
            except DatabaseUnreachable as error:  # each alone would wait for it in turn
                for request in group:
                    request.answer = error
                return
            except Exception:
                for spool_id in spool_ids:  # their maps may hold ids of what was rolled back
                    self._destinations.pop(spool_id, None)
            else:
                for request, (watermark, created) in zip(group, shipped, strict=True):
                    request.answer = _shipped(request.spool_id, watermark, created)
                return
        for request in group:
            try:
                watermark, created = self._destination(request.spool_id).ship(request.entries)
                request.answer = _shipped(request.spool_id, watermark, created)
            except RuntimeError as error:  # an entry of a run this spool never started
                request.answer = Refused(409, str(error))
            except DatabaseUnreachable as error:
                request.answer = error
            except Exception as error:  # refused by the database: the client keeps it and says so
                self._destinations.pop(request.spool_id, None)
                request.answer = Refused(422, f"the table refused the entries: {error}")

    def _destination(self, spool_id: str) -> Destination:
        destination = self._destinations.get(spool_id)
        if destination is None:
            if len(self._destinations) >= MAX_DESTINATIONS:
                self._destinations.clear()
            destination = self._destinations[spool_id] = Destination(self.store, spool_id)
        return destination


def reopening(body: bytes) -> tuple[int, bool]:
    """{"run": RUN_ID, "check": true}: the run to reopen, and whether its uniqueness is checked."""
    try:
        document = json.loads(body)
    except ValueError:
        raise Refused(400, 'the body must be {"run": RUN_ID, "check": true}') from None
    if not isinstance(document, dict) or set(document) - {"run", "check"}:
        raise Refused(400, 'the body must be {"run": RUN_ID, "check": true}')
    run_id, check = document.get("run"), document.get("check", True)
    if type(run_id) is not int or not 0 < run_id < 2**63 or not isinstance(check, bool):
        raise Refused(400, "run must be a run id and check true or false")
    return run_id, check


def received_blobs(artifacts: str) -> ReceivedBlobs:
    """The artefact store at `artifacts` with its staging folder: `uploads/` inside a local one
    (the final rename stays on one file system), a folder of the server's temporary directory for
    object storage (which cannot append)."""
    blobs = open_blobs(artifacts)
    if isinstance(blobs, LocalBlobs):
        return ReceivedBlobs(blobs, blobs.root / "uploads")
    digest = hashlib.sha256(blobs.location.encode()).hexdigest()[:16]
    return ReceivedBlobs(blobs, os.path.join(tempfile.gettempdir(), f"tallyboard-uploads-{digest}"))


async def blob_answer(ingest: Ingest, request: Request, sha256: str) -> dict[str, Any]:
    """GET: where the upload of `sha256` stands; PUT ?offset=O&total=T with a raw chunk: take it."""
    if ingest.blobs is None:
        raise Refused(501, "this server keeps no artefact bytes (no artefact store): listings only")
    blobs = ingest.blobs
    try:
        if request.method == "GET":
            return await to_thread.run_sync(blobs.state, sha256, limiter=ingest.threads)
        if request.method != "PUT":
            raise Refused(405, "GET or PUT only")
        offset, total = (_query_int(request, name) for name in ("offset", "total"))
        chunk = await read_body(request, MAX_CHUNK)
        return await to_thread.run_sync(blobs.receive, sha256, offset, total, chunk, limiter=ingest.threads)
    except UploadRefused as refused:
        raise Refused(refused.status, str(refused)) from None


def _query_int(request: Request, name: str) -> int:
    text = request.query_params.get(name, "")
    if not text.isdigit() or len(text) > 19:
        raise Refused(400, f"?{name}= must be a number of bytes")
    return int(text)


def parse_entries(document: Any) -> list[tuple[int, float, str, Any]]:
    """{"entries": [[seq, logged_at, op, args], ...]}: seqs positive and increasing, each entry's
    arguments checked (store/entry_checks.py)."""
    if not isinstance(document, dict) or not isinstance(document.get("entries"), list):
        raise BadEntry('the body must be {"entries": [[seq, logged_at, op, args], ...]}')
    items = document["entries"]
    if not 0 < len(items) <= MAX_ENTRIES:
        raise BadEntry(f"a request holds 1 to {MAX_ENTRIES} entries, not {len(items)}")
    entries, last = [], 0
    for index, item in enumerate(items):
        if not isinstance(item, list) or len(item) != 4:
            raise BadEntry(f"entries[{index}] must be [seq, logged_at, op, args]")
        seq, logged_at, op, args = item
        if type(seq) is not int or not last < seq < 2**63:
            raise BadEntry(f"entries[{index}]: seq must be an integer above the previous one ({last})")
        if type(logged_at) not in (int, float) or not 0 <= logged_at < 1e12:
            raise BadEntry(f"entries[{index}]: logged_at must be seconds since the epoch")
        if not isinstance(op, str):
            raise BadEntry(f"entries[{index}]: op must be a string")
        try:
            entries.append((seq, float(logged_at), op, check_entry(op, args)))
        except BadEntry as error:
            raise BadEntry(f"entries[{index}] (seq {seq}): {error}") from None
        last = seq
    return entries


async def read_body(request: Request, limit: int = MAX_COMPRESSED) -> bytes:
    """The body as sent, refused past `limit` bytes (413) without reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise Refused(413, f"a request body is limited to {limit:,} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"a request body is limited to {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def entries_of(body: bytes, encoding: str) -> list[tuple[int, float, str, Any]]:
    """The checked entries of a body (gzip or plain), or the refusal that says what is wrong."""
    try:
        return parse_entries(_decoded(_decompressed(body, encoding)))
    except BadEntry as error:
        raise Refused(400, str(error)) from None


def _decompressed(body: bytes, encoding: str) -> bytes:
    if encoding == "identity":  # at most MAX_COMPRESSED already
        return body
    if encoding != "gzip":
        raise Refused(415, "Content-Encoding must be gzip or none")
    inflate = zlib.decompressobj(wbits=31)
    try:
        plain = inflate.decompress(body, MAX_DECOMPRESSED)
        if inflate.unconsumed_tail:
            raise Refused(413, f"a request is limited to {MAX_DECOMPRESSED:,} bytes decompressed")
        if not inflate.eof:
            raise Refused(400, "the gzip body is cut short")
    except zlib.error as error:
        raise Refused(400, f"the body is not gzip: {error}") from None
    return plain


def _decoded(body: bytes) -> Any:
    try:
        return decode(body.decode("utf-8"))
    except (ValueError, TypeError, RecursionError) as error:  # not JSON, bad base64, nested too deep
        raise Refused(400, f"the body is not a JSON document of entries: {str(error)[:200]}") from None


class IngestGate:
    """Pure ASGI: requests under `PREFIX` are the ingest's; all others go on to the dashboard."""

    def __init__(self, app: ASGIApp, *, ingest: Ingest) -> None:
        self.app = app
        self.ingest = ingest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not (scope["path"] + "/").startswith(PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            answer = await self._answer(request)
            response = JSONResponse(answer, headers={"Cache-Control": "no-store"})
        except Refused as refused:
            response = JSONResponse({"error": str(refused)}, refused.status, headers=refused.headers)
        except DatabaseUnreachable as error:
            response = JSONResponse({"error": str(error)}, 503, headers={"Retry-After": "2"})
        await response(scope, receive, send)

    async def _answer(self, request: Request) -> dict[str, Any]:
        ingest = self.ingest
        ingest.authorise({k.lower(): v for k, v in request.headers.items()})
        route = ROUTE.fullmatch(request.url.path)
        if route is None:
            raise Refused(404, f"no such endpoint; see GET {PREFIX}")
        spool_id = route["spool"]
        if route["blob"] is not None:
            spool_id = route["blob"]  # rate-limited as a spool of its own
        elif spool_id is None:
            if request.method != "GET":
                raise Refused(405, "GET only")
            return {"version": 1, "limits": LIMITS}
        if route["blob"] is None and SPOOL_ID.fullmatch(spool_id) is None:
            raise Refused(400, "a spool id is 8 to 64 letters, digits, '-' or '_'")
        address = request.client.host if request.client else ""
        now = time.monotonic()
        wait = ingest.address_limit.take(address, now) or ingest.limit.take(spool_id, now)
        if wait:
            raise Refused(429, "too many requests for this spool", {"Retry-After": str(max(1, round(wait)))})
        if not ingest.in_flight.acquire(blocking=False):
            raise Refused(503, "the server is busy: try again", {"Retry-After": "1"})
        try:
            if route["blob"] is not None:
                return await blob_answer(ingest, request, route["blob"])
            if route["entries"] == "/reopen":
                if request.method != "POST":
                    raise Refused(405, "POST only")
                run_id, check = reopening(await read_body(request, 4096))
                return await to_thread.run_sync(
                    ingest.reopen, spool_id, run_id, check, limiter=ingest.threads
                )
            if route["entries"] is None:
                if request.method != "GET":
                    raise Refused(405, "GET only")
                return await to_thread.run_sync(ingest.state, spool_id, limiter=ingest.threads)
            if request.method != "POST":
                raise Refused(405, "POST only")
            body = await read_body(request)
            encoding = request.headers.get("content-encoding", "identity").lower()
            # Off the event loop: decoding and checking a shipment is work, and pages wait on the loop.
            entries = await to_thread.run_sync(entries_of, body, encoding, limiter=ingest.threads)
            return await to_thread.run_sync(ingest.apply, spool_id, entries, limiter=ingest.threads)
        finally:
            ingest.in_flight.release()


LIMITS = {
    "max_request_bytes": MAX_COMPRESSED,
    "max_decompressed_bytes": MAX_DECOMPRESSED,
    "max_entries": MAX_ENTRIES,
    "requests_per_second_per_spool": RATE,
    "burst_per_spool": BURST,
    "requests_per_second_per_address": ADDRESS_RATE,
    "burst_per_address": ADDRESS_BURST,
    "max_chunk_bytes": MAX_CHUNK,
    "max_artifact_bytes": MAX_BLOB,
}

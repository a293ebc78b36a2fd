"""Shipping a spool (store/spool.py) to its PostgreSQL database: exactly once, in order, later.

(A spool bound to a tallyboard server ships there instead, over HTTP: store/http_shipping.py; the
server applies what it receives with `Destination`, on its own store of either engine.)

Exactly once: the database keeps, for each spool (named by a uuid the spool records), the seq of
the last journal entry it holds: `tallyboard_spools.shipped`, the watermark. One shipment is one
PostgreSQL transaction that locks the spool's watermark row (SELECT ... FOR UPDATE), skips entries
at or below it, applies the others in seq order and sets the watermark to the last one: the
watermark commits together with the rows it covers, or neither does. A shipment cut off anywhere
(the server gone, the process killed, the answer to COMMIT lost) is wholly there or wholly absent,
and the next one -- from this process, a restarted one, another process on the same spool, or
`tallyboard sync SPOOL` -- starts from the database's watermark. The spool's own copy of it only
spares re-reading entries the database has.

Run ids: a run created in the spool is created in the database when its entry ships; the
database's uniqueness check runs then. A duplicate is not lost: it is created hidden, with a note
naming the run it duplicates. The map (spool, spool's run id) -> database run id is written in the
same transaction (`tallyboard_spool_runs`), so later entries of the run find it, whoever ships them.

While the database is out of reach the shipper backs off (up to `MAX_BACKOFF`), the spool grows on
disk, and a warning every `REPORT_EVERY` seconds says how many entries wait and how old the oldest
is. Training never waits for any of it: the shipper is a thread of its own with its own connection.
"""

from __future__ import annotations

import atexit
import copy
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol, cast

from tallyboard.errors import DuplicateRunError
from tallyboard.store import run_claims
from tallyboard.store.base import Store
from tallyboard.store.location import LocationLike
from tallyboard.store.records import ArtifactRow, Batch, QueuedRecord, QueuedValue, ResumePoint, ScalarRow
from tallyboard.store.spool import ShippedRun, SpoolStore, batch_from_json, decode

log = logging.getLogger(__name__)

ENTRIES_PER_SHIPMENT = 64  # journal entries (sink batches, mostly) per PostgreSQL transaction...
SHIPMENT_BYTES = 32 * 2**20  # ... and bytes of them, so that shipping images stays small in memory
IDLE_WAIT = 0.25  # seconds between two looks at an empty journal
FIRST_BACKOFF, MAX_BACKOFF = 0.5, 30.0
REPORT_EVERY = 10.0  # seconds between two warnings while shipping fails
FINAL_WAIT = 10.0  # how long the end of the process waits for the last entries to ship
RETRY_FOR = 1.0  # how long one database call waits for a lost server before the shipper backs off
DDL = (
    "CREATE TABLE IF NOT EXISTS tallyboard_spools (spool_id TEXT PRIMARY KEY, shipped BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tallyboard_spool_runs (spool_id TEXT NOT NULL, spool_run BIGINT NOT NULL,"
    " run_id BIGINT NOT NULL, duplicate_of BIGINT, PRIMARY KEY (spool_id, spool_run))",
)


class Shipping(Protocol):
    """Where a shipper ships a spool: its database (`Destination`), or a tallyboard server that
    applies the entries to its own (store/http_shipping.py)."""

    def ship(self, entries: list[tuple[int, float, str, str]]) -> tuple[int, list[ShippedRun]]:
        """Apply `entries` exactly once; (the watermark after them, runs the spool has yet to note)."""

    def reopen(self, run_id: int, check: bool = True) -> dict[str, Any]:
        """Reopen the database's run `run_id` for this spool, at once (store/run_claims.py)."""

    def close(self) -> None:
        """Let go of what the destination holds open."""


def destination_for(spool: SpoolStore) -> Shipping:
    """Where the spool ships: a server for an http(s) location, else its PostgreSQL database."""
    target, spool_id = spool.bound_to()
    if target.is_http:
        from tallyboard.store.http_shipping import HttpDestination

        return HttpDestination(target, spool_id, spool.state("token"), spool.state("artifacts"))
    return postgres_destination(target, spool_id)


def postgres_destination(database: LocationLike, spool_id: str) -> Destination:
    from tallyboard.store.postgres import PostgresStore

    db = PostgresStore(database, retry_for=RETRY_FOR)
    try:
        return Destination(db, spool_id)
    except BaseException:  # the shipper retries with a new one: this one's connection is closed
        db.close()
        raise


class Destination:
    """The spool's database: one connection (a store of either engine: a tallyboard server applies
    the entries it receives with one, dashboard/ingest.py), and the map of the spool's run ids to
    the database's."""

    def __init__(self, db: Store, spool_id: str) -> None:
        self.db = db
        self.spool_id = spool_id
        self.db.atomic(self._create_tables)
        # Runs shipped before (by a process that may have died before noting them in the spool)
        known = self.known_runs()
        self.runs: dict[int, int] = {spool_run: run_id for spool_run, run_id, _ in known}
        self._unnoted = known  # for the spool's copy, with the next shipment
        self._touched: set[int] = set()  # runs a shipment wrote to: this spool's for `run_claims.LEASE`

    def known_runs(self) -> list[ShippedRun]:
        """Every run of the spool the database holds."""
        rows = self.db.execute(
            "SELECT spool_run, run_id, duplicate_of FROM tallyboard_spool_runs WHERE spool_id = ?"
            " ORDER BY spool_run",
            (self.spool_id,),
        )
        return [ShippedRun(*row) for row in rows]

    def watermark(self) -> int:
        """The seq of the last entry of the spool the database holds (0: none)."""
        rows = self.db.execute("SELECT shipped FROM tallyboard_spools WHERE spool_id = ?", (self.spool_id,))
        return int(rows[0][0]) if rows else 0

    def _create_tables(self) -> None:
        """Under the schema lock: two shippers racing to CREATE TABLE IF NOT EXISTS both create it
        (SQLite's write transaction is that lock already)."""
        if self.db.url.is_postgres:
            from tallyboard.store.postgres import SCHEMA_LOCK, PostgresStore

            cast(PostgresStore, self.db)._advisory_lock(SCHEMA_LOCK)
        for statement in DDL + run_claims.DDL:
            self.db.execute(statement)

    def close(self) -> None:
        self.db.close()

    def reopen(self, run_id: int, check: bool = True) -> dict[str, Any]:
        """Reopen the database's run `run_id` for this spool (store/run_claims.py)."""
        return run_claims.reopen(self.db, self.spool_id, run_id, check, time.time())

    def ship(self, entries: Sequence[tuple[int, float, str, Any]]) -> tuple[int, list[ShippedRun]]:
        """Apply `entries` (seq order) in one transaction, skipping those the database has; return
        the watermark after it and the runs the spool has yet to note: those it created, and the
        first time those shipped before. An entry's arguments are the journal's JSON text, or that
        JSON decoded (and checked: store/entry_checks.py) by a server."""
        db, spool_id = self.db, self.spool_id

        def work() -> tuple[int, list[ShippedRun]]:
            db._tag_ids.clear()  # an attempt rolled back must not leave ids of tags it inserted
            db.execute(
                "INSERT INTO tallyboard_spools (spool_id, shipped) VALUES (?, 0)"
                " ON CONFLICT (spool_id) DO NOTHING",
                (spool_id,),
            )
            lock = " FOR UPDATE" if db.url.is_postgres else ""  # SQLite's transaction locks the file
            shipped = db.execute(
                f"SELECT shipped FROM tallyboard_spools WHERE spool_id = ?{lock}", (spool_id,)
            )[0][0]
            created: list[ShippedRun] = []
            runs = dict(self.runs)
            self._touched = set()
            batches: list[Batch] = []  # consecutive sink batches, written as one
            for seq, _, op, args in entries:
                if seq <= shipped:
                    continue
                # a server's are decoded; copied, as `batch_from_json` takes from it and a retried
                # attempt (a busy database, a group that failed) decodes again
                fields = decode(args) if isinstance(args, str) else copy.copy(args)
                if op == "batch":
                    batches.append(batch_from_json(fields))
                    continue
                self._write(batches, runs)
                self._apply(op, fields, runs, created)
            self._write(batches, runs)
            run_claims.note_writes(db, spool_id, self._touched, time.time())
            watermark = max(shipped, entries[-1][0])
            db.execute("UPDATE tallyboard_spools SET shipped = ? WHERE spool_id = ?", (watermark, spool_id))
            return watermark, created

        watermark, created = db.atomic(work)
        self.runs.update((spool_run, run_id) for spool_run, run_id, _ in created)
        created, self._unnoted = self._unnoted + created, []
        return watermark, created

    def _run_id(self, spool_run: int, runs: dict[int, int]) -> int:
        if spool_run not in runs:  # created by a shipment of another process on this spool
            found = self.db.execute(
                "SELECT run_id FROM tallyboard_spool_runs WHERE spool_id = ? AND spool_run = ?",
                (self.spool_id, spool_run),
            )
            if not found:
                raise RuntimeError(f"spool {self.spool_id}: run {spool_run} was never shipped")
            runs[spool_run] = found[0][0]
        self._touched.add(runs[spool_run])
        return runs[spool_run]

    def _apply(self, op: str, args: Any, runs: dict[int, int], created: list[ShippedRun]) -> None:
        """Apply one journal entry other than a batch; `args` is its JSON: an object, or for an artefact
        the list of its `ArtifactRow` fields."""
        db = self.db
        if op == "create_run":
            run_id, duplicate_of = self._create_run(args["fields"], args["debug"], args.get("rerun", False))
            self._map(args["run"], run_id, duplicate_of, runs, created)
        elif op == "attach_run":  # a run of the database this spool reopened (`reopen`)
            if not run_claims.granted(db, self.spool_id, args["run_id"]):
                raise RuntimeError(f"spool {self.spool_id}: run {args['run_id']} was never reopened by it")
            self._map(args["run"], args["run_id"], None, runs, created)
        elif op == "update_run":
            db.update_run(self._run_id(args["run"], runs), **args["values"])
        elif op == "change_run_tags":
            db.change_run_tags(self._run_id(args["run"], runs), args["add"], args["remove"])
        elif op == "put_values":
            rows = [QueuedValue(self._run_id(run, runs), name, value) for run, name, value in args["rows"]]
            db.put_values(args["kind"], rows)
        elif op == "add_artifact":  # the file itself is in the artefact store already
            db.add_artifact(ArtifactRow(self._run_id(args[0], runs), *args[1:]))
        else:
            raise ValueError(f"unknown spool entry {op!r}: a newer tallyboard wrote this spool")

    def _map(
        self,
        spool_run: int,
        run_id: int,
        duplicate_of: int | None,
        runs: dict[int, int],
        created: list[ShippedRun],
    ) -> None:
        """The spool's run `spool_run` is the database's `run_id` from now on."""
        runs[spool_run] = run_id
        self._touched.add(run_id)
        created.append(ShippedRun(spool_run, run_id, duplicate_of))
        self.db.execute(
            "INSERT INTO tallyboard_spool_runs (spool_id, spool_run, run_id, duplicate_of)"
            " VALUES (?, ?, ?, ?)"
            " ON CONFLICT (spool_id, spool_run) DO UPDATE SET run_id = excluded.run_id,"
            " duplicate_of = excluded.duplicate_of",
            (self.spool_id, spool_run, run_id, duplicate_of),
        )

    def _write(self, batches: list[Batch], runs: dict[int, int]) -> None:
        """Write consecutive sink batches as one, with the database's run ids, and empty the list:
        one COPY per series instead of one per batch. A step logged in two of them makes the COPY
        fail over to the engine's upsert, which keeps the last value, as separate batches would."""
        if not batches:
            return
        merged = Batch()
        series: dict[tuple[int, str], list[ScalarRow]] = {}
        for batch in batches:
            for name, kept in vars(batch).items():
                if name != "scalars":
                    records: list[QueuedRecord] = kept
                    getattr(merged, name).extend(
                        record._replace(run_id=self._run_id(record.run_id, runs)) for record in records
                    )
            for run, tag, rows in batch.scalars:
                series.setdefault((self._run_id(run, runs), tag), []).extend(rows)
        merged.scalars = [(run_id, tag, rows) for (run_id, tag), rows in series.items()]
        batches.clear()
        self.db.write_batch(merged)

    def _create_run(self, fields: dict[str, Any], debug: bool, rerun: bool) -> tuple[int, int | None]:
        """The run in the database: (its id, the run it duplicates or None)."""
        try:
            return self.db.create_run(fields, debug, rerun=rerun), None
        except DuplicateRunError as duplicate:
            note = f"duplicate of run {duplicate.run_id}, started while the database was out of reach"
            if fields.get("note"):
                note = f"{fields['note']} ({note})"
            run_id = self.db.create_run({**fields, "unique_key": None, "note": note})  # checks nothing
            self.db.execute(  # hidden, so that it is no run's duplicate; its key kept for the record
                "UPDATE runs SET hidden = 1, unique_key = ? WHERE run_id = ?",
                (fields.get("unique_key"), run_id),
            )
            return run_id, duplicate.run_id


def reopen_run(spool: SpoolStore, run_id: int, check: bool = True) -> tuple[int, ResumePoint]:
    """`ResultTable.resume_run` through a spool: the database's (or server's) run `run_id` reopened
    for this spool, synchronously (a bounded wait: `RETRY_FOR` for PostgreSQL, the request timeout
    for a server), and continued in the spool as a run of its own mapped to it. (its spool id,
    where it stopped)."""
    destination = destination_for(spool)
    try:
        answer = destination.reopen(run_id, check)
    finally:
        destination.close()
    return spool.continue_run(answer)


def ship_once(spool: SpoolStore, destination: Shipping, limit: int = ENTRIES_PER_SHIPMENT) -> int:
    """Ship up to `limit` pending entries; return how many were pending (0: the spool is shipped)."""
    entries = spool.pending(int(spool.state("shipped") or 0), limit, SHIPMENT_BYTES)
    if entries:
        watermark, created = destination.ship(entries)
        spool.shipped(watermark, created)
    return len(entries)


def ship_all(spool_path: str) -> int:
    """Ship everything the spool at `spool_path` holds (`tallyboard sync`); return the entries shipped."""
    spool = SpoolStore(spool_path)
    try:
        destination = destination_for(spool)
        try:
            total = 0
            while moved := ship_once(spool, destination):
                total += moved
            return total
        finally:
            destination.close()
    finally:
        spool.close()


class Shipper:
    """The thread that ships one spool while its process lives (one per spool file per process)."""

    def __init__(self, spool_path: str) -> None:
        self.path = spool_path
        self.failing = False  # the last pass could not ship
        self._changed = threading.Condition()
        self._asked = self._served = 0  # wait() calls, and the last one a pass found nothing left for
        self._stopping = False
        name = f"tallyboard-shipper {spool_path}"
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Wait until everything committed to the spool before the call is shipped; False on timeout."""
        with self._changed:
            self._asked += 1
            ticket = self._asked
            self._changed.notify_all()
            return self._changed.wait_for(lambda: self._served >= ticket, timeout)

    def stop(self, timeout: float = FINAL_WAIT) -> None:
        """Ship what is left (for up to `timeout` s, unless the database is out of reach: the spool
        keeps it for the next process or `tallyboard sync`), then end the thread."""
        if not self.failing:
            self.wait(timeout)
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._thread.join(timeout=1.0)

    def _pause(self, seconds: float, until_asked_after: int | None = None) -> None:
        with self._changed:
            self._changed.wait_for(
                lambda: self._stopping or (until_asked_after is not None and self._asked > until_asked_after),
                seconds,
            )

    def _loop(self) -> None:
        spool = SpoolStore(self.path)
        destination: Shipping | None = None
        backoff, failing_since, reported = FIRST_BACKOFF, None, 0.0
        while not self._stopping:
            serving = self._asked
            try:
                if destination is None:
                    destination = destination_for(spool)
                moved = ship_once(spool, destination)
            except Exception as error:  # the database out of reach (or refusing): keep the spool, retry
                if destination is not None:
                    destination.close()
                    destination = None
                self.failing = True
                now = time.monotonic()
                failing_since = failing_since or now
                if now - reported >= REPORT_EVERY:
                    reported = now
                    self._report(spool, now - failing_since, error)
                self._pause(backoff, until_asked_after=serving)  # wait() asks for a try now
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            if failing_since is not None:
                log.warning("tallyboard: spool %s ships to %s again", self.path, spool.bound_to()[0])
            self.failing, backoff, failing_since = False, FIRST_BACKOFF, None
            if not moved:
                with self._changed:
                    self._served = max(self._served, serving)
                    self._changed.notify_all()
                self._pause(IDLE_WAIT, until_asked_after=serving)
        if destination is not None:
            destination.close()
        spool.close()

    def _report(self, spool: SpoolStore, failing_for: float, error: Exception) -> None:
        count, oldest = spool.backlog()
        behind = f", the oldest logged {time.time() - oldest:.0f} s ago" if oldest is not None else ""
        log.warning(
            "tallyboard: spool %s could not ship to %s for %.0f s (%s); %d entries wait in the spool%s."
            " They are safe on disk; shipping resumes on its own, or run `tallyboard sync %s`",
            self.path, spool.bound_to()[0], failing_for,
            str(error).strip().splitlines()[0] if str(error) else type(error).__name__,
            count, behind, self.path,
        )  # fmt: skip


_shippers: dict[tuple[int, str], Shipper] = {}
_shippers_lock = threading.Lock()


def shipper_for(spool_path: str) -> Shipper:
    """This process's shipper of the spool at `spool_path`, started at the first call; it ships
    what is left when the process exits (after the sinks drained into the spool: registered first,
    its exit hook runs after theirs)."""
    key = (os.getpid(), os.path.abspath(spool_path))
    with _shippers_lock:
        shipper = _shippers.get(key)
        if shipper is None:
            shipper = _shippers[key] = Shipper(key[1])
            atexit.register(shipper.stop)
        return shipper


def stop_shippers(timeout: float = FINAL_WAIT) -> None:
    """Stop this process's shippers, each after shipping what it can within `timeout` s; the next
    `shipper_for` starts a new one (tests end theirs with this)."""
    with _shippers_lock:
        stopping = [shipper for (pid, _), shipper in _shippers.items() if pid == os.getpid()]
        for shipper in stopping:
            del _shippers[(os.getpid(), shipper.path)]
    for shipper in stopping:
        atexit.unregister(shipper.stop)
        shipper.stop(timeout)

"""Server-sent events: running runs push new points, images, texts and status to open pages.

Why one shared poll: a page per chart each asking the store every 2 s costs the server per page.
Here one `Hub.poll` per interval asks the store, for every watched run at once, the last step of
each series (one statement), the newest media and text ids (two seeks) and the runs' status; only
what grew is read, once for all pages, and kept for a while as a numbered `Update`. Each page's
stream sends the part of each update that concerns its runs.

Event ids are `BOOT.TICK`: the last update a page has seen. A reconnect (the browser sends
Last-Event-ID) replays the kept updates after it, so nothing is missed and nothing sent twice; an id
the hub cannot answer (older than what it keeps, or from before a restart) gets a `reset` event and
the page reloads what it shows.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tallyboard.dashboard import api, params
from tallyboard.dashboard.downsample import raw_after
from tallyboard.dashboard.params import BadRequest
from tallyboard.json_numbers import dumps
from tallyboard.store import DatabaseUnreachable
from tallyboard.store.dashboard_reads import DashboardQueries, RunsVersion, SeriesKey, SeriesOfRun

INTERVAL = 1.0  # seconds between polls of the store
KEEP = 300  # updates kept for reconnects (5 minutes at the default interval)
HEARTBEAT = 15.0  # seconds without an event before a ping (keeps proxies from closing the stream)
MAX_RUNS = 50
LIVE_LIMIT = api.LIVE_LIMIT  # points of one series in one event; past it the page reloads the chart
log = logging.getLogger(__name__)


@dataclass
class Update:
    """What grew between two polls: new points per series (or a flag when there are too many or the
    series is new), runs whose status or row changed, and new media and texts (index rows only)."""

    tick: int
    series: dict[SeriesKey, dict[str, Any]] = field(default_factory=dict)
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    media: list[dict[str, Any]] = field(default_factory=list)
    texts: list[dict[str, Any]] = field(default_factory=list)
    version: dict[str, Any] | None = None  # the runs table's version, when any run row changed
    alerts: list[dict[str, Any]] = field(default_factory=list)  # new alerts of any run, for runs tables

    def for_page(self, run_ids: set[int], metric: str | None, table: bool = False) -> dict[str, Any] | None:
        """The part of this update a page showing these runs (and metric, or the runs table) needs;
        None if nothing."""
        series = [
            entry
            for key, entry in self.series.items()
            if key.run_id in run_ids and (metric is None or entry["metric"] == metric)
        ]
        runs = [state for run_id, state in self.runs.items() if run_id in run_ids]
        media = [item for item in self.media if item["run_id"] in run_ids]
        texts = [item for item in self.texts if item["run_id"] in run_ids]
        version = self.version if table else None
        alerts = self.alerts if table else []
        if not (series or runs or media or texts or version or alerts):
            return None
        return {"series": series, "runs": runs, "media": media, "texts": texts, "version": version,
                "alerts": alerts}  # fmt: skip


@dataclass
class Watch:
    """A watched run: how many pages follow it, and since which tick the hub has followed it
    (a reconnect can replay updates only from then on)."""

    pages: int
    since: int
    idle_since: int | None = None


@dataclass
class Subscription:
    """A page's start: the tick it starts after, the updates to replay (None: none can be) and the
    last steps of its runs' series at that tick (for a first catch-up)."""

    tick: int
    replay: list[Update] | None
    marks: dict[SeriesKey, int]


class Hub:
    """The one poller of the store that all streams of an app share."""

    def __init__(self, queries: DashboardQueries, interval: float = INTERVAL, keep: int = KEEP) -> None:
        self.queries = queries
        self.interval = interval
        self.boot = secrets.token_hex(4)  # ids of an earlier server mean nothing to this one
        self.tick = 0
        self.closed = False
        self._lock = threading.Lock()  # poll (a worker thread) against subscribe/unsubscribe
        self._marks: dict[SeriesKey, int] = {}
        self._names: dict[SeriesKey, SeriesOfRun] = {}
        self._states: dict[int, dict[str, Any]] = {}
        self._items: tuple[int, int] | None = None
        self._alerts_after: int | None = None  # the largest text id runs tables were told of
        self._version: RunsVersion | None = None
        self._table_pages = 0  # runs tables open: only then is the table's version asked
        self._watched: dict[int, Watch] = {}
        self._updates: deque[Update] = deque(maxlen=keep)
        self._task: asyncio.Task | None = None
        self._polled: asyncio.Event | None = None  # set after each poll, then replaced by a fresh one
        self._unreachable = False  # the last poll found the database down

    def event_id(self, tick: int) -> str:
        return f"{self.boot}.{tick}"

    # -- pages coming and going -----------------------------------------------------------------
    def subscribe(
        self, run_ids: Sequence[int], last_event_id: str | None, table: bool = False
    ) -> Subscription:
        with self._lock:
            if table:
                self._table_pages += 1
                if self._version is None:
                    self._version = self.queries.runs_version()
            replay = self._replay(run_ids, last_event_id) if last_event_id else None
            fresh = [run_id for run_id in run_ids if run_id not in self._watched]
            if fresh:  # followed from now on: what they hold now is the start, not news
                self._marks.update(self.queries.last_steps(fresh))
                self._states.update({s["run_id"]: s for s in self.queries.run_states(fresh)})
            if self._items is None:
                self._items = self.queries.last_item_ids()
            if table and self._alerts_after is None:
                self._alerts_after = self._items[1]
            for run_id in run_ids:
                watch = self._watched.setdefault(run_id, Watch(pages=0, since=self.tick))
                watch.pages += 1
                watch.idle_since = None
            wanted = set(run_ids)
            marks = {key: step for key, step in self._marks.items() if key.run_id in wanted}
            return Subscription(self.tick, replay, marks)

    def _replay(self, run_ids: Sequence[int], last_event_id: str) -> list[Update] | None:
        boot, _, tick_text = last_event_id.partition(".")
        if boot != self.boot or not tick_text.isdigit() or len(tick_text) > 18:
            return None
        tick = int(tick_text)
        if tick > self.tick or any(r not in self._watched or self._watched[r].since > tick for r in run_ids):
            return None
        if tick < self.tick and (not self._updates or self._updates[0].tick > tick + 1):
            return None  # some updates after it are no longer kept
        return [update for update in self._updates if update.tick > tick]

    def unsubscribe(self, run_ids: Sequence[int], table: bool = False) -> None:
        """A page left; its runs stay watched for as long as updates are kept, so that a reconnect
        in that time can still be answered."""
        with self._lock:
            self._table_pages -= int(table)
            for run_id in run_ids:
                watch = self._watched.get(run_id)
                if watch is not None:
                    watch.pages -= 1
                    if watch.pages <= 0:
                        watch.idle_since = self.tick

    # -- the poll -------------------------------------------------------------------------------
    def poll(self) -> Update:
        """Ask the store what grew since the last poll; keep it as the next update."""
        with self._lock:
            self._forget_idle()
            run_ids = sorted(self._watched)
            update = Update(self.tick + 1)
            if run_ids:
                self._poll_series(run_ids, update)
                self._poll_runs(run_ids, update)
                self._poll_items(run_ids, update)
            if self._table_pages > 0:
                version = self.queries.runs_version()
                if version != self._version:
                    update.version = api.version_json(version)
                    self._version = version
                self._poll_alerts(update)
            self.tick = update.tick
            self._updates.append(update)
            return update

    def _forget_idle(self) -> None:
        keep = self._updates.maxlen or 0
        for run_id, watch in list(self._watched.items()):
            if watch.idle_since is not None and self.tick - watch.idle_since >= keep:
                del self._watched[run_id]
                self._states.pop(run_id, None)
                for key in [key for key in self._marks if key.run_id == run_id]:
                    del self._marks[key]
                    self._names.pop(key, None)

    def _poll_series(self, run_ids: list[int], update: Update) -> None:
        marks = self.queries.last_steps(run_ids)
        grown = {key: last for key, last in marks.items() if last > self._marks.get(key, -(2**63))}
        if any(key not in self._names for key in grown):
            self._names.update(series_names(self.queries, grown))
        for key, last in grown.items():
            series = self._names.get(key) or unnamed(key)
            if key not in self._marks:  # a new series: the page loads it as a whole
                update.series[key] = {**api.series_json(series, last, {}), "new": True}
            else:
                update.series[key] = grown_series(self.queries, series, self._marks[key], last)
            self._marks[key] = last

    def _poll_runs(self, run_ids: list[int], update: Update) -> None:
        for state in self.queries.run_states(run_ids):
            if self._states.get(state["run_id"]) != state:
                update.runs[state["run_id"]] = state
                self._states[state["run_id"]] = state

    def _poll_items(self, run_ids: list[int], update: Update) -> None:
        media, texts = self.queries.last_item_ids()
        old_media, old_texts = self._items or (media, texts)
        if media > old_media:
            update.media = self.queries.new_items("media", old_media, media, run_ids)
        if texts > old_texts:
            update.texts = self.queries.new_items("texts", old_texts, texts, run_ids)
        self._items = (media, texts)

    def _poll_alerts(self, update: Update) -> None:
        """New alerts of any run (texts of kind 'alert'), for the runs tables' markers."""
        _, texts = self.queries.last_item_ids()
        after = texts if self._alerts_after is None else self._alerts_after
        if texts > after:
            update.alerts = self.queries.alerts(after=after, upto=texts)
        self._alerts_after = texts

    # -- the loop that runs the poll -----------------------------------------------------------
    def start(self) -> None:
        """Start polling in the running event loop (the first stream does this)."""
        if self._task is None and not self.closed:
            self._polled = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while not self.closed:
            try:
                await asyncio.to_thread(self.poll)
            except DatabaseUnreachable as error:  # said once per outage, not once a second
                if not self._unreachable:
                    log.warning("live updates wait for the database: %s", error)
                self._unreachable = True
            except Exception:  # a busy database: try again next interval
                log.warning("live poll of the store failed", exc_info=True)
            else:
                if self._unreachable:
                    log.warning("live updates go on: the database answers again")
                self._unreachable = False
            polled, self._polled = self._polled, asyncio.Event()
            assert polled is not None
            polled.set()
            await asyncio.sleep(self.interval)

    async def updates_after(self, tick: int, timeout: float) -> list[Update] | None:
        """Updates after `tick`, waiting up to `timeout` for one; None when the ones after `tick`
        are no longer kept (a page that fell that far behind reloads)."""
        assert self._polled is not None
        if self.tick <= tick and not self.closed:
            try:
                await asyncio.wait_for(self._polled.wait(), timeout)
            except TimeoutError:
                return []
        updates = list(self._updates)
        if updates and updates[0].tick > tick + 1:
            return None
        return [update for update in updates if update.tick > tick]

    def close(self) -> None:
        """End every stream (server shutdown): each sees `closed` within one interval."""
        self.closed = True
        if self._task is not None:
            self._task.cancel()
        if self._polled is not None:
            self._polled.set()


def series_names(queries: DashboardQueries, keys: Iterable[SeriesKey]) -> dict[SeriesKey, SeriesOfRun]:
    """Series with their tag names and repetition starts, read for the runs they belong to."""
    return {series.key: series for series in queries.tags_of_runs(sorted({key.run_id for key in keys}))}


def unnamed(key: SeriesKey) -> SeriesOfRun:
    """A series its runs' listing did not have (deleted meanwhile): no name, no start."""
    return SeriesOfRun(key.run_id, key.tag_id, "", key.rep, 0.0, False)


def grown_series(queries: DashboardQueries, series: SeriesOfRun, after: int, last: int) -> dict[str, Any]:
    """A series' points after step `after` up to `last`, or only `more: true` past LIVE_LIMIT of
    them (the page reloads that chart instead)."""
    data, more = raw_after(queries, series.key, after, LIVE_LIMIT, upto=last)
    return {**api.series_json(series, last, {} if more else data.to_json()), "more": more}


def sse(event: str, data: Any, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {dumps(data, separators=(',', ':'))}\n\n"


def _catch_up(
    queries: DashboardQueries, run_ids: list[int], sub: Subscription, after: dict, metric: str | None
) -> dict[str, Any]:
    """Points between each cursor the page sent and the hub's marks at its start, and the runs' state."""
    series = []
    names = series_names(queries, sub.marks)
    for key, last in sub.marks.items():
        cursor = after.get((key.run_id, key.tag_id, key.rep))
        named = names.get(key) or unnamed(key)
        if cursor is None or cursor >= last or (metric is not None and api.split_tag(named.tag)[1] != metric):
            continue
        series.append(grown_series(queries, named, cursor, last))
    return {
        "series": series,
        "runs": queries.run_states(run_ids) if run_ids else [],
        "media": [],
        "texts": [],
        "version": None,
        "alerts": [],
    }


async def stream(request: Request) -> Response:
    """GET /api/stream?runs=1,2[&metric=loss][&after=RUN:TAG_ID:REP:STEP...][&table=1]: an event
    stream of `update` events (series, runs, media, texts, version, alerts), `ping` and `reset`."""
    hub: Hub = request.app.state.hub
    run_ids = params.id_list(request, "runs", MAX_RUNS) or []
    table = params.boolean(request, "table")
    if not run_ids and not table:
        raise BadRequest("runs (comma-separated run ids) or table=1 is required")
    metric = params.text(request, "metric", "", api.MAX_NAME) or None
    after = api.cursors(request)
    last_event_id = request.headers.get("last-event-id")
    if hub.closed:
        return Response("shutting down", status_code=503)
    hub.start()
    sub = await asyncio.to_thread(hub.subscribe, run_ids, last_event_id, table)
    wanted = set(run_ids)

    async def events() -> AsyncIterator[str]:
        tick = sub.tick
        try:
            yield f"retry: {int(hub.interval * 2000)}\n\n"
            if sub.replay is not None:
                for update in sub.replay:
                    part = update.for_page(wanted, metric, table)
                    if part:
                        yield sse("update", part, hub.event_id(update.tick))
            elif last_event_id:
                yield sse("reset", {}, hub.event_id(tick))
            else:
                first = await asyncio.to_thread(_catch_up, hub.queries, run_ids, sub, after, metric)
                if table:  # what the page loaded may already be older than this
                    first["version"] = api.version_json(await asyncio.to_thread(hub.queries.runs_version))
                yield sse("update", first, hub.event_id(tick))
            tick = max([tick, *(u.tick for u in sub.replay or [])])
            clock = asyncio.get_running_loop().time
            last_sent = clock()
            while not hub.closed:
                updates = await hub.updates_after(tick, hub.interval * 2)
                if updates is None:
                    yield sse("reset", {}, hub.event_id(hub.tick))
                    return
                for update in updates:
                    tick = update.tick
                    part = update.for_page(wanted, metric, table)
                    if part:
                        yield sse("update", part, hub.event_id(tick))
                        last_sent = clock()
                if clock() - last_sent >= HEARTBEAT:  # carries the tick, so a reconnect stays answerable
                    yield sse("ping", {}, hub.event_id(tick))
                    last_sent = clock()
        finally:
            hub.unsubscribe(run_ids, table)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

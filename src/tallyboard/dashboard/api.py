"""The JSON API (described in openapi.py). Pages are static files that call these endpoints.

Every handler is a plain function of the request: it parses its parameters (params.py answers
400 for junk), asks the store through `Dashboard` and returns JSON. Handlers are sync so that
Starlette runs them in its thread pool: a slow query never stalls the event loop.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tallyboard.dashboard import markdown, params
from tallyboard.dashboard.answer_cache import AnswerCache
from tallyboard.dashboard.downsample import DEFAULT_WIDTH, MAX_WIDTH, Downsampler, grid, raw_after
from tallyboard.dashboard.params import BadRequest, Json
from tallyboard.dashboard.runs_table import MAX_CURSOR, BadCursor, RunsTable
from tallyboard.errors import ArtifactError, FilterError
from tallyboard.store import Store
from tallyboard.store.alert_content import LEVELS as ALERT_LEVELS
from tallyboard.store.dashboard_reads import STATUSES, DashboardQueries, RunsVersion, SeriesKey, SeriesOfRun
from tallyboard.store.records import TEXT_KINDS

MAX_COMPARE = 50
MAX_NAME = 4000  # characters of a metric or tag name in a query (the page says so for longer ones)
LIVE_LIMIT = 10_000  # points per series per poll; a client that is further behind reloads the chart
TEXT_LIMITS = {"note": 10_000, "tag": 200, "color": 32, "status": 16}


@dataclass
class Dashboard:
    """What the handlers share: reads, the cached table, the downsampler, and the store for edits
    (None in read-only mode, which never opens the database for writing)."""

    queries: DashboardQueries
    table: RunsTable
    downsampler: Downsampler
    store: Store | None
    artifacts: str | None = None  # the artefact store (folder or fsspec URL); None: none configured
    answers: AnswerCache = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.answers = AnswerCache(self.queries.data_version)

    @property
    def read_only(self) -> bool:
        return self.store is None

    def writable_store(self) -> Store:
        if self.store is None:  # the middleware refuses POSTs first; this guards direct calls
            raise BadRequest("the dashboard runs with --read-only")
        return self.store


def _dash(request: Request) -> Dashboard:
    return request.app.state.dashboard


def kept(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """`handler` answering from the dashboard's AnswerCache: for answers that depend on the table
    and the request only."""

    @functools.wraps(handler)
    def answer(request: Request) -> Response:
        return _dash(request).answers.answer(request, handler)

    return answer


def split_tag(name: str) -> tuple[str, str]:
    """'train/loss' -> ('train', 'loss'); a tag without a slash has no split."""
    split, slash, metric = name.partition("/")
    return (split, metric) if slash else ("", name)


# -- runs table ---------------------------------------------------------------------------------
@kept
def runs(request: Request) -> Response:
    dash = _dash(request)
    try:
        page = dash.table.page(
            offset=params.integer(request, "offset", 0, 0, 10**9),
            after=params.text(request, "after", "", MAX_CURSOR) or None,
            limit=params.integer(request, "limit", 100, 1, 1000),
            sort=params.text(request, "sort", "", 200) or None,
            descending=params.boolean(request, "desc"),
            **_view(request),
        )
    except FilterError as error:
        raise BadRequest(f"filter: {error}") from None
    except BadCursor as error:
        raise BadRequest(f"after: {error}") from None
    return Json(
        {
            "total": page.total,
            "total_exact": page.total_exact,
            "next": page.next,
            "rows": page.rows,
            "columns": [dataclasses.asdict(c) for c in page.columns],
            "version": version_json(page.version),
            "read_only": dash.read_only,
        }
    )


def runs_count(request: Request) -> Response:
    try:
        return Json({"total": _dash(request).table.count(**_view(request))})
    except FilterError as error:
        raise BadRequest(f"filter: {error}") from None


def _view(request: Request) -> dict[str, Any]:
    """What selects the runs of a view (shared by a page and its count)."""
    return {
        "filter_text": params.text(request, "filter"),
        "search": params.text(request, "q", "", 200),
        "show_hidden": params.boolean(request, "hidden"),
        "run_ids": params.id_list(request, "ids", 10_000),
        "experiment": params.text(request, "experiment", "", 1000) or None,
    }


def version(request: Request) -> Response:
    return Json(version_json(_dash(request).queries.runs_version()))


def version_json(version: RunsVersion) -> dict[str, Any]:
    """The runs' version as the pages compare it (any field changed: reload)."""
    return {"runs": version.last_run_id, "deleted": version.deleted, "updated_at": version.updated_at}


@kept
def experiments(request: Request) -> Response:
    """The experiments of the visible runs, the latest first: the views' project selector."""
    return Json({"experiments": _dash(request).queries.experiments()})


def run_tags(request: Request) -> Response:
    return Json({"tags": _dash(request).queries.run_tags()})


def columns(request: Request) -> Response:
    return Json({"columns": [dataclasses.asdict(c) for c in _dash(request).table.columns()]})


async def save_columns(request: Request) -> Response:
    body = await params.json_object(request)
    prefs = body.get("columns")
    if not isinstance(prefs, list) or not prefs or len(prefs) > 10_000:
        raise BadRequest("columns must be a non-empty list of {name, alias, position}")
    for pref in prefs:
        if not (
            isinstance(pref, dict)
            and isinstance(pref.get("name"), str)
            and isinstance(pref.get("alias"), str)
            and 0 < len(pref["alias"]) <= 200
            and (pref.get("position") is None or _small_int(pref.get("position")))
        ):
            raise BadRequest("each column needs a name, a non-empty alias and a position (int or null)")
    changes = {pref["name"]: {"alias": pref["alias"], "position": pref.get("position")} for pref in prefs}
    try:
        _dash(request).writable_store().set_columns(changes)
    except KeyError as error:
        raise BadRequest(str(error.args[0])) from None
    return columns(request)


def _small_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1_000_000


# -- one run ------------------------------------------------------------------------------------
def run_detail(request: Request) -> Response:
    dash = _dash(request)
    run_id = params.path_id(request, "run_id")
    run = dash.queries.run(run_id)
    if run is None:
        return Json({"error": f"no run {run_id}"}, status_code=404)
    run["hidden"] = bool(run["hidden"])
    run["series"] = [
        {"tag": name, "split": split_tag(name)[0], "metric": split_tag(name)[1], "rep": rep}
        for _, _, name, rep, *_ in dash.queries.tags_of_runs([run_id])
    ]
    run["now"] = time.time()
    run["note_html"] = markdown.render(run["note"]) if run["note"] else None
    return Json(run)


async def edit_run(request: Request) -> Response:
    body = await params.json_object(request)
    changes: dict[str, Any] = {}
    for name, value in body.items():
        if name == "hidden":
            if not isinstance(value, bool):
                raise BadRequest("hidden must be true or false")
            changes[name] = int(value)
        elif name in TEXT_LIMITS:
            if name == "color" and value is None:
                changes[name] = None
                continue
            if not isinstance(value, str) or len(value) > TEXT_LIMITS[name]:
                raise BadRequest(f"{name} must be a string of at most {TEXT_LIMITS[name]} characters")
            if name == "status" and value not in STATUSES:
                raise BadRequest(f"status must be one of {', '.join(STATUSES)}")
            if name == "color" and not _is_color(value):
                raise BadRequest("color must be a #rrggbb hex colour or null")
            changes[name] = value
        else:
            raise BadRequest(f"{name!r} cannot be edited")
    if not changes:
        raise BadRequest("nothing to change")
    run_id = params.path_id(request, "run_id")
    dash = _dash(request)
    if dash.queries.run_states([run_id]) == []:
        return Json({"error": f"no run {run_id}"}, status_code=404)
    dash.writable_store().update_run(run_id, **changes)
    return run_detail(request)


def _is_color(value: str) -> bool:
    return len(value) == 7 and value[0] == "#" and all(c in "0123456789abcdefABCDEF" for c in value[1:])


# -- series -------------------------------------------------------------------------------------
def _series_of(dash: Dashboard, run_ids: list[int], metric: str | None) -> list[SeriesOfRun]:
    return [
        row for row in dash.queries.tags_of_runs(run_ids) if metric is None or split_tag(row.tag)[1] == metric
    ]


def _runs_and_metric(request: Request) -> tuple[list[int], str | None]:
    run_ids = params.id_list(request, "runs", MAX_COMPARE)
    if run_ids is None:
        raise BadRequest("runs is required (comma-separated run ids)")
    return run_ids, params.text(request, "metric", "", MAX_NAME) or None


@kept
def series(request: Request) -> Response:
    """Downsampled series of some runs (all metrics or one), on shared bucket boundaries."""
    dash = _dash(request)
    run_ids, metric = _runs_and_metric(request)
    width = params.integer(request, "width", DEFAULT_WIDTH, 1, MAX_WIDTH)
    step_min = params.integer(request, "step_min", None)
    step_max = params.integer(request, "step_max", None)
    listed = {series.key: series for series in _series_of(dash, run_ids, metric)}
    # one set of statements for the chart, however many series it has (not a few per series)
    found = dash.queries.series_bounds(run_ids, sorted({key.tag_id for key in listed}))
    found = {key: found[key] for key in listed if key in found}
    if not found:
        return Json({"lo": None, "hi": None, "bucket": 1, "series": []})
    # A requested range is cut to the steps that exist: no points lie outside, and an extreme
    # range (-2**62..2**62) would overflow 64-bit step arithmetic in SQL.
    lo = min(first for first, _ in found.values())
    hi = max(last for _, last in found.values())
    lo = lo if step_min is None else max(lo, step_min)
    hi = hi if step_max is None else min(hi, step_max)
    drawn = dash.downsampler.chart(found, lo, hi, width)
    out = [series_json(listed[key], last, drawn[key].to_json()) for key, (_, last) in found.items()]
    bucket = max(s["bucket"] for s in out)
    origin = grid(lo, hi, width)[0] if bucket > 1 else lo  # where bucket 0 starts
    return Json({"lo": origin, "hi": hi, "bucket": bucket, "series": out})


def series_json(series: SeriesOfRun, last: int, data: dict) -> dict[str, Any]:
    """A series as the API describes it, with `data` (its points); `axis` "window" where its steps
    count a Stat's windows (left out otherwise: the axis is the step)."""
    split, metric = split_tag(series.tag)
    out = {
        "run_id": series.run_id, "tag_id": series.tag_id, "tag": series.tag, "split": split,
        "metric": metric, "rep": series.rep, "start_time": series.start_time, "last_step": last, **data,
    }  # fmt: skip
    if series.window:
        out["axis"] = "window"
    return out


def series_names(request: Request) -> Response:
    """The scalar tags some runs logged, each once with the runs that have it: what the compare and
    hparams pages lay their charts and menus out from, in one statement rather than every run's
    details (whose git diff alone may be tens of kB)."""
    dash = _dash(request)
    run_ids, _ = _runs_and_metric(request)
    found: dict[str, list[int]] = {}
    for run_id, _, name, *_ in dash.queries.tags_of_runs(run_ids):
        having = found.setdefault(name, [])
        if run_id not in having:
            having.append(run_id)
    tags = [{"tag": name, "split": split_tag(name)[0], "metric": split_tag(name)[1], "runs": having}
            for name, having in sorted(found.items())]  # fmt: skip
    return Json({"tags": tags})


def cursors(request: Request) -> dict[tuple[int, int, int], int]:
    """`after` values 'RUN:TAG_ID:REP:STEP' -> {(run, tag_id, rep): step}."""
    found = {}
    for raw in request.query_params.getlist("after")[:2000]:
        try:
            run_id, tag_id, rep, step = (int(part) for part in raw.split(":"))
        except ValueError:
            raise BadRequest("after must look like RUN:TAG_ID:REP:STEP") from None
        if max(abs(run_id), abs(tag_id), abs(rep), abs(step)) > params.MAX_ID:
            raise BadRequest("after is out of range")
        found[(run_id, tag_id, rep)] = step
    return found


def live(request: Request) -> Response:
    """Only the points logged after each cursor, plus the runs' status (for live views)."""
    dash = _dash(request)
    run_ids, metric = _runs_and_metric(request)
    after = cursors(request)
    out = []
    for series in _series_of(dash, run_ids, metric):
        start_after = after.get((series.run_id, series.tag_id, series.rep), -(2**62))
        data, more = raw_after(dash.queries, series.key, start_after, LIVE_LIMIT)
        if data.step or more:
            out.append({**series_json(series, data.step[-1], data.to_json()), "more": more})
    states = dash.queries.run_states(run_ids)
    return Json({"series": out, "runs": states})


def scalars_csv(request: Request) -> Response:
    """The full-resolution series of one tag (every repetition), streamed in bounded batches."""
    dash = _dash(request)
    run_id = params.path_id(request, "run_id")
    tag = params.text(request, "tag", "", MAX_NAME)
    tag_id = dash.queries.tag_id(tag)
    reps = [row for row in dash.queries.tags_of_runs([run_id]) if row.tag_id == tag_id]
    if tag_id is None or not reps:
        return Json({"error": f"run {run_id} has no scalar {tag!r}"}, status_code=404)

    def lines() -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["run_id", "tag", "rep", "step", "epoch", "walltime", "value"])
        for series in reps:
            for count, (step, epoch, wall_ms, value) in enumerate(dash.queries.stream_points(series.key)):
                shown = "nan" if value is None else value
                writer.writerow([run_id, inert(series.tag), series.rep, step, epoch, wall_ms / 1000.0, shown])
                if count % 2000 == 1999:
                    yield buffer.getvalue()
                    buffer.seek(0)
                    buffer.truncate()
        yield buffer.getvalue()

    filename = f"run{run_id}_{tag.replace('/', '_')}.csv"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in filename)
    return StreamingResponse(
        lines(), media_type="text/csv", headers={"Content-Disposition": f'attachment; filename="{safe}"'}
    )


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert(cell: str) -> str:
    """A text cell that a spreadsheet shows as text: one that starts like a formula gets a leading
    apostrophe (OWASP's advice against CSV injection), so `=HYPERLINK(...)` in a tag name stays text."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


# -- repeated steps -------------------------------------------------------------------------------
EVENTS_LIMIT = 10_000  # points per answer; `after_seq` pages through longer series
WHY_STEPS_REPEAT = {
    "same_step": "logged again at the same step: the writer did not advance its step counter "
    "(for example every window of a monitor Stat written at step 0)",
    "step_went_back": "the step went back: the run was restarted or resumed from an earlier step "
    "and logged those steps again",
}


def repeated_steps(request: Request) -> Response:
    """The run's series that hold several points at one step, and why (imports keep every point;
    the charts by step show the last one of each step)."""
    dash = _dash(request)
    run_id = params.path_id(request, "run_id")
    series = []
    for tag_id, name, rep, points, same, back in dash.queries.repeated_step_series(run_id):
        why = [
            {"reason": reason, "count": count, "text": WHY_STEPS_REPEAT[reason]}
            for reason, count in (("same_step", same), ("step_went_back", back))
            if count
        ]
        series.append({"tag_id": tag_id, "tag": name, "rep": rep, "points": points, "why": why})
    return Json({"run_id": run_id, "series": series})


def scalar_events(request: Request) -> Response:
    """Every point of one series in source order (event index `seq`), with wall times, so that a
    chart can lay repeated steps out by event index or by wall time."""
    dash = _dash(request)
    run_id = params.path_id(request, "run_id")
    tag_id = dash.queries.tag_id(params.text(request, "tag", "", 500))
    rep = params.integer(request, "rep", 0, 0)
    after = params.integer(request, "after_seq", -1, -1)
    if tag_id is None:
        return Json({"error": "no such tag"}, status_code=404)
    rows = dash.queries.scalar_events(SeriesKey(run_id, tag_id, rep), after, EVENTS_LIMIT + 1)
    more = len(rows) > EVENTS_LIMIT
    rows = rows[:EVENTS_LIMIT]
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), (), ()]
    seq, step, epoch, wall_ms, value = columns
    return Json({
        "run_id": run_id, "tag_id": tag_id, "rep": rep, "more": more,
        "seq": list(seq), "step": list(step), "epoch": list(epoch),
        "walltime": [ms / 1000.0 for ms in wall_ms], "value": list(value),
    })  # fmt: skip


# -- media and text -----------------------------------------------------------------------------
def _kind(request: Request, allowed: tuple[str, ...]) -> str:
    kind = request.query_params.get("kind", allowed[0])
    if kind not in allowed:
        raise BadRequest(f"kind must be one of {', '.join(allowed)}")
    return kind


def media(request: Request) -> Response:
    run_id = params.path_id(request, "run_id")
    return Json({"media": _dash(request).queries.media(run_id, _kind(request, ("image", "figure")))})


def histograms(request: Request) -> Response:
    """A run's histogram tags and the histograms of one (`?tag=`, default the first)."""
    run_id = params.path_id(request, "run_id")
    tag = params.text(request, "tag", "", MAX_NAME) or None
    return Json(_dash(request).queries.histograms(run_id, tag))


def media_png(request: Request) -> Response:
    png = _dash(request).queries.media_png(params.path_id(request, "media_id"))
    if png is None:
        return Json({"error": "no such image"}, status_code=404)
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=86400"})


# -- files kept with a run (tallyboard/store/artifacts.py) ----------------------------------------------
def artifacts(request: Request) -> Response:
    run_id = params.path_id(request, "run_id")
    return Json({"artifacts": [row._asdict() for row in _dash(request).queries.artifacts(run_id)]})


def artifact_file(request: Request) -> Response:
    """The bytes of one artefact, streamed a chunk at a time, always as a download (never shown
    inline: a logged .html or .svg must not run as our page); the security middleware adds
    Cross-Origin-Resource-Policy: same-origin and nosniff."""
    from tallyboard.store import artifacts as store

    dash = _dash(request)
    run_id, name = params.path_id(request, "run_id"), params.storable("name", request.path_params["name"])
    found = dash.queries.artifacts(run_id, name)
    if not found:
        return Json({"error": f"run {run_id} has no artefact {name!r}"}, status_code=404)
    if dash.artifacts is None:
        return Json({"error": store.NO_STORE}, status_code=404)
    row = found[0]
    blobs = store.open_blobs(dash.artifacts)
    try:
        stored = blobs.exists(row.sha256)
    except ArtifactError as error:  # a damaged or hostile table: its hash is no hash
        return Json({"error": str(error)}, status_code=404)
    if not stored:
        return Json({"error": f"artefact {name!r} is listed but its file is missing from {blobs.location}"},
                    status_code=404)  # fmt: skip
    filename = name.rsplit("/", 1)[-1]
    headers = {
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(filename, safe='')}",
        "Content-Length": str(row.size),
        "Cache-Control": "private, max-age=86400",
    }
    return StreamingResponse(store.read_chunks(blobs, row.sha256), media_type="application/octet-stream",
                             headers=headers)  # fmt: skip


def texts(request: Request) -> Response:
    """A run's texts, fragments or tables (`kind`; a table's content is store/table_content.py's
    JSON); a text logged with `markdown=True` also comes as `html` (rendered, sanitised)."""
    run_id = params.path_id(request, "run_id")
    items = _dash(request).queries.texts(run_id, _kind(request, TEXT_KINDS))
    for item in items:
        item["html"] = markdown.render(item["content"]) if item["markdown"] else None
    return Json({"texts": items})


def run_alerts(request: Request) -> Response:
    """A run's alerts (store/alert_content.py), oldest first."""
    run_id = params.path_id(request, "run_id")
    return Json({"alerts": _dash(request).queries.alerts(run_id)})


def alerts(request: Request) -> Response:
    """Per run with alerts: how many, the highest level, and the latest (the runs table's marker)."""
    order = {level: index for index, level in enumerate(ALERT_LEVELS)}
    runs: dict[int, dict[str, Any]] = {}
    for alert in _dash(request).queries.alerts():
        mark = runs.setdefault(alert["run_id"], {"count": 0, "level": alert["level"]})
        mark["count"] += 1
        mark["latest"] = {"title": alert["title"], "time": alert["time"], "level": alert["level"]}
        if order.get(alert["level"], 0) > order.get(mark["level"], 0):
            mark["level"] = alert["level"]
    return Json({"runs": {str(run_id): mark for run_id, mark in runs.items()}})


# -- console and environment --------------------------------------------------------------------
CONSOLE_PAGE = 1000  # lines per answer; the live tail asks again with `after` = the last id


def console(request: Request) -> Response:
    """Console lines after id `after` (0: from the start), at most `CONSOLE_PAGE`, optionally only
    those containing `search`; `last` is the id to ask after next time."""
    run_id = params.path_id(request, "run_id")
    after = params.integer(request, "after", 0, lo=0)
    search = params.text(request, "search", longest=200) or None
    lines = _dash(request).queries.console(run_id, after, CONSOLE_PAGE, search)
    return Json({"lines": lines, "last": lines[-1]["console_id"] if lines else after})


def environment(request: Request) -> Response:
    run_id = params.path_id(request, "run_id")
    return Json({"environment": _dash(request).queries.environment(run_id)})

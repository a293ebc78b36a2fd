"""The OpenAPI 3 description of the JSON API, served at /api/openapi.json.

Written out by hand rather than generated from docstrings: it is the contract that the pages,
users' scripts and the schemathesis fuzz test all hold the server to.
"""

from __future__ import annotations

from typing import Any

from tallyboard import __version__
from tallyboard.dashboard.security import MAX_BODY
from tallyboard.store.records import TEXT_KINDS

# A value as json_numbers.py writes it: a number, or "NaN", "Infinity", "-Infinity".
_VALUE = {"oneOf": [{"type": "number"}, {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]}]}
_EXTREME = {
    "oneOf": [{"type": "number", "nullable": True}, {"type": "string", "enum": ["Infinity", "-Infinity"]}]
}
SERIES = {
    "type": "object",
    "description": "One series of a chart, point i at step[i] (or the range's i-th step). Arrays"
    " that would repeat `value` (min and max of raw points) or hold only nulls (epoch) are left out.",
    "required": [
        "run_id",
        "tag_id",
        "tag",
        "rep",
        "start_time",
        "last_step",
        "step",
        "wall_ms",
        "value",
        "bucket",
    ],
    "properties": {
        "run_id": {"type": "integer"},
        "tag_id": {"type": "integer"},
        "tag": {"type": "string"},
        "split": {"type": "string"},
        "metric": {"type": "string"},
        "rep": {"type": "integer"},
        "start_time": {"type": "number", "description": "when the repetition started (seconds since 1970)"},
        "last_step": {"type": "integer"},
        "axis": {
            "type": "string",
            "enum": ["window"],
            "description": "what the steps count, where they are not training steps: window, the"
            " windows of a monitor Stat (its index 0, 1, 2, ...); absent: steps",
        },
        "step": {
            "description": "each point's step (a bucket's: its last point's): a StepRange when they"
            " are regular, else the first step and then each step minus the one before",
            "oneOf": [
                {"type": "array", "items": {"type": "integer"}},
                {"$ref": "#/components/schemas/StepRange"},
            ],
        },
        "wall_ms": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "milliseconds since start_time: the first point's, then each point's"
            " minus the one before",
        },
        "value": {
            "type": "array",
            "items": _VALUE,
            "description": "the point's (a bucket's last point's) value, to 9 significant digits",
        },
        "epoch": {
            "type": "array",
            "items": {"type": "integer", "nullable": True},
            "description": "absent: none logged",
        },
        "min": {
            "type": "array",
            "items": _EXTREME,
            "description": "a bucket's least value (null: NaN only); absent: the values",
        },
        "max": {
            "type": "array",
            "items": _EXTREME,
            "description": "a bucket's greatest value; absent: the values",
        },
        "bucket": {"type": "integer", "description": "steps per bucket; 1: raw points"},
    },
}


def _q(name: str, kind: str, description: str, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": kind, **schema},
    }


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "integer"}}


def _json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema or {"type": "object"}}},
    }


ERROR = _json("invalid parameters", {"$ref": "#/components/schemas/Error"})
NOT_FOUND = _json("no such object", {"$ref": "#/components/schemas/Error"})
REFUSED = _json("CSRF token missing, or read-only mode", {"$ref": "#/components/schemas/Error"})
RUNS = _q("runs", "string", "comma-separated run ids (1 to 50)", pattern=r"^-?\d+(,-?\d+)*$")
METRIC = _q("metric", "string", "metric name (a tag without its split), e.g. loss")


STATS_QUERY = [
    {
        **_q("runs", "string", "comma-separated run ids (1 to 5000)", pattern=r"^-?\d+(,-?\d+)*$"),
        "required": True,
    },
    {**_q("metric", "string", "a scalar tag (val/accuracy) or a result column"), "required": True},
    _q("summary", "string", "one number per repetition", enum=["final", "best", "last_k"]),
    _q("k", "integer", "points averaged by last_k", minimum=1, maximum=1_000_000),
    _q("goal", "string", "what best means", enum=["max", "min"]),
]


def _get(summary: str, parameters: list[dict[str, Any]], ok: dict[str, Any]) -> dict:
    """A GET operation; any may answer 400 (bad parameter) or 404 (no such object or path)."""
    responses = {"200": ok, "400": ERROR, "404": NOT_FOUND}
    return {"get": {"summary": summary, "parameters": parameters, "responses": responses}}


def _post(summary: str, parameters: list[dict[str, Any]], body: dict[str, Any]) -> dict:
    responses = {
        "200": _json("the updated object"), "400": ERROR, "403": REFUSED, "404": NOT_FOUND,
        "413": {**ERROR, "description": f"the body is over {MAX_BODY:,} bytes"},
    }  # fmt: skip
    return {
        "post": {
            "summary": summary,
            "parameters": [
                *parameters,
                {"name": "X-CSRF-Token", "in": "header", "required": True, "schema": {"type": "string"}},
            ],
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": responses,
        }
    }


COLUMN_PREF = {
    "type": "object",
    "required": ["name", "alias", "position"],
    "properties": {
        "name": {"type": "string"},
        "alias": {"type": "string", "minLength": 1, "maxLength": 200},
        "position": {"type": "integer", "minimum": 0, "nullable": True},
    },
}
RUN_EDIT = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {
        "note": {"type": "string", "maxLength": 10000},
        "tag": {"type": "string", "maxLength": 200},
        "color": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$", "nullable": True},
        "status": {"type": "string", "enum": ["running", "finished", "failed"]},
        "hidden": {"type": "boolean"},
    },
}


# What selects a view's runs (a page's and a count's parameters).
VIEW_PARAMETERS = [
    _q("filter", "string", 'expression, e.g. lr < 1e-3 and status == "finished"'),
    _q("q", "string", "free text searched in visible cells"),
    _q("hidden", "boolean", "include hidden runs"),
    _q("ids", "string", "only these run ids (comma-separated)", pattern=r"^-?\d+(,-?\d+)*$"),
    _q("experiment", "string", "only this experiment's runs, and only the columns they have values in"),
]


def openapi_schema() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "tallyboard dashboard API",
            "version": __version__,
            "description": "Read runs and their logged series; edit run metadata (POST + CSRF).",
        },
        "paths": {
            "/api/runs": _get(
                "One page of the runs table, filtered and sorted on the server",
                [
                    _q("offset", "integer", "first row (when no `after`)", minimum=0),
                    _q("after", "string", "the `next` cursor of the previous page of the same view"),
                    _q("limit", "integer", "rows per page", minimum=1, maximum=1000),
                    _q("sort", "string", "column name or alias"),
                    _q("desc", "boolean", "sort descending"),
                    *VIEW_PARAMETERS,
                ],
                _json("a page of runs", {"$ref": "#/components/schemas/RunsPage"}),
            ),
            "/api/runs/count": _get(
                "The exact number of runs a view holds (a page may say only `total_exact: false`)",
                VIEW_PARAMETERS,
                _json(
                    "the count",
                    {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer"}}},
                ),
            ),
            "/api/version": _get(
                "The runs' version: largest run id, runs deleted, last edit time (poll to see changes)",
                [],
                _json("the version"),
            ),
            "/api/tags": _get("Run tags in use, for autocompletion", [], _json("tags")),
            "/api/experiments": _get(
                "The experiments of the visible runs (name, runs, latest start), the latest first",
                [],
                _json("experiments"),
            ),
            "/api/columns": {
                **_get("Column preferences", [], _json("columns")),
                **_post(
                    "Rename, hide (position null) or reorder columns",
                    [],
                    {
                        "type": "object",
                        "required": ["columns"],
                        "properties": {"columns": {"type": "array", "minItems": 1, "items": COLUMN_PREF}},
                    },
                ),
            },
            "/api/runs/{run_id}": {
                **_get("Everything about one run", [_path("run_id")], _json("the run")),
                **_post("Edit note, tag, colour, status or hidden", [_path("run_id")], RUN_EDIT),
            },
            "/api/series": _get(
                "Series of some runs downsampled to `width` buckets (min, max, last per bucket), in"
                " one compact encoding (schema Series): steps as a range where they are regular, wall"
                " times as millisecond differences, epoch, min and max only where they say something",
                [
                    {**RUNS, "required": True},
                    METRIC,
                    _q("width", "integer", "buckets (chart width in pixels)", minimum=1, maximum=4000),
                    _q("step_min", "integer", "first step of the range (zoom)"),
                    _q("step_max", "integer", "last step of the range (zoom)"),
                ],
                _json("series", {"$ref": "#/components/schemas/SeriesSet"}),
            ),
            "/api/series/names": _get(
                "The scalar tags some runs logged, each once with the runs that have it",
                [{**RUNS, "required": True}],
                _json("tags: [{tag, split, metric, runs}]"),
            ),
            "/api/live": _get(
                "Points logged after each cursor (incremental live updates)",
                [
                    {**RUNS, "required": True},
                    METRIC,
                    {
                        "name": "after",
                        "in": "query",
                        "required": False,
                        "style": "form",
                        "explode": True,
                        "description": "RUN:TAG_ID:REP:STEP, once per series already shown",
                        "schema": {
                            "type": "array",
                            "items": {"type": "string", "pattern": r"^-?\d+:\d+:\d+:-?\d+$"},
                        },
                    },
                ],
                _json("new points"),
            ),
            "/api/compare": _get(
                "Groups of runs (by hparams) on a metric: n, mean, std, 95% CI; Welch + Holm per pair",
                [
                    *STATS_QUERY,
                    {**_q("by", "string", "group by this hparam (repeat for more)"), "style": "form"},
                    _q("unit", "string", "one sample per repetition or per run", enum=["rep", "run"]),
                ],
                _json("groups and pairs", {"$ref": "#/components/schemas/Comparison"}),
            ),
            "/api/summaries": _get(
                "One number per run (mean over its repetitions, their std) for the scatter",
                STATS_QUERY,
                _json("per-run summaries"),
            ),
            "/api/importance": _get(
                "Per hparam: Spearman rho and ANOVA eta-squared against a metric",
                STATS_QUERY,
                _json("importance rows"),
            ),
            "/api/diff": _get(
                "What changed between 2 to 10 runs (config, CLI, command, git, hparams)",
                [{**_q("runs", "string", "2 to 10 run ids", pattern=r"^-?\d+(,-?\d+)+$"), "required": True}],
                _json("the diff"),
            ),
            "/api/runs/{run_id}/scalars.csv": {
                "get": {
                    "summary": "Full-resolution CSV of one tag of a run",
                    "parameters": [
                        _path("run_id"),
                        {**_q("tag", "string", "tag, e.g. train/loss"), "required": True},
                    ],
                    "responses": {
                        "200": {
                            "description": "CSV",
                            "content": {"text/csv": {"schema": {"type": "string"}}},
                        },
                        "400": ERROR,
                        "404": NOT_FOUND,
                    },
                }
            },
            "/api/runs/{run_id}/repeated-steps": _get(
                "Series of a run with several points at one step, and why the steps repeat",
                [_path("run_id")],
                _json("series with their point counts and reasons (same_step, step_went_back)"),
            ),
            "/api/runs/{run_id}/scalar-events": _get(
                "Every point of a series that repeats steps, in source order (seq), with wall times",
                [
                    _path("run_id"),
                    {**_q("tag", "string", "tag, e.g. train/loss"), "required": True},
                    _q("rep", "integer", "repetition (default 0)"),
                    _q("after_seq", "integer", "only points after this event index (paging)"),
                ],
                _json("columns seq, step, epoch, walltime, value; more: another page follows"),
            ),
            "/api/runs/{run_id}/media": _get(
                "Index of a run's images or figures",
                [_path("run_id"), _q("kind", "string", "image or figure", enum=["image", "figure"])],
                _json("media"),
            ),
            "/api/runs/{run_id}/texts": _get(
                "A run's texts, HTML fragments, logged tables or alerts (content: JSON for the last two)",
                [
                    _path("run_id"),
                    _q("kind", "string", "text, fragment, table or alert", enum=list(TEXT_KINDS)),
                ],
                _json("texts; one logged with markdown=true also has html (rendered, sanitised)"),
            ),
            "/api/runs/{run_id}/alerts": _get(
                "A run's alerts, oldest first (docs/alerts.md)",
                [_path("run_id")],
                _json("alerts: id, run_id, rep, step, time, title, text, level, rule, stop"),
            ),
            "/api/alerts": _get(
                "The runs that have alerts: count, highest level and latest alert of each",
                [],
                _json("runs: {run id: {count, level, latest: {title, time, level}}}"),
            ),
            "/api/runs/{run_id}/console": _get(
                "A run's captured console lines after an id (the live tail polls with the last one)",
                [
                    _path("run_id"),
                    _q("after", "integer", "only lines with a larger console_id", minimum=0),
                    _q("search", "string", "only lines containing this (any case)", maxLength=200),
                ],
                _json("lines (console_id, rep, walltime_ms, stream, line) and last"),
            ),
            "/api/runs/{run_id}/environment": _get(
                "The environment a run recorded (null when none)", [_path("run_id")], _json("environment")
            ),
            "/api/runs/{run_id}/histograms": _get(
                "A run's histogram tags, and the histograms (buckets, stats) of one tag by step",
                [_path("run_id"), _q("tag", "string", "tag; default: the run's first")],
                _json("tags, tag, histograms"),
            ),
            "/api/runs/{run_id}/artifacts": _get(
                "The files kept with a run (name, kind, size, sha256, step, logged_at)",
                [_path("run_id")],
                _json("artifacts"),
            ),
            "/api/runs/{run_id}/artifacts/{name}": {
                "get": {
                    "summary": "One artefact's bytes, streamed as a download (attachment)",
                    "parameters": [
                        _path("run_id"),
                        {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    ],
                    "responses": {
                        "200": {
                            "description": "the file",
                            "content": {
                                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
                            },
                        },
                        "400": ERROR,
                        "404": NOT_FOUND,
                    },
                }
            },
            "/api/media/{media_id}": {
                "get": {
                    "summary": "One image or figure as PNG",
                    "parameters": [_path("media_id")],
                    "responses": {
                        "200": {
                            "description": "PNG",
                            "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
                        },
                        "400": ERROR,
                        "404": NOT_FOUND,
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "string"}},
                },
                "RunsPage": {
                    "type": "object",
                    "required": ["total", "rows", "columns", "version"],
                    "properties": {
                        "total": {"type": "integer"},
                        "total_exact": {"type": "boolean"},
                        "next": {"type": "string", "nullable": True},
                        "rows": {"type": "array", "items": {"type": "object"}},
                        "columns": {"type": "array", "items": {"type": "object"}},
                        "version": {"type": "object"},
                    },
                },
                "Comparison": {
                    "type": "object",
                    "required": ["metric", "unit", "groups", "pairs"],
                    "properties": {
                        "metric": {"type": "string"},
                        "unit": {"type": "string"},
                        "groups": {"type": "array", "items": {"type": "object"}},
                        "pairs": {"type": "array", "items": {"type": "object"}},
                    },
                },
                "SeriesSet": {
                    "type": "object",
                    "required": ["series", "bucket"],
                    "properties": {
                        "lo": {"type": "integer", "nullable": True},
                        "hi": {"type": "integer", "nullable": True},
                        "bucket": {"type": "integer"},
                        "series": {"type": "array", "items": {"$ref": "#/components/schemas/Series"}},
                    },
                },
                "Series": SERIES,
                "StepRange": {
                    "type": "object",
                    "description": "steps first, first + stride, ..., count of them",
                    "required": ["first", "stride", "count"],
                    "properties": {n: {"type": "integer"} for n in ("first", "stride", "count")},
                },
            }
        },
    }

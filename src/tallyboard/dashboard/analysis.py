"""The JSON API of the deciding views: group statistics, per-run summaries (the scatter),
hparam importance, and the diff of runs. The numbers come from `comparison`/`stats` (scipy),
exactly as `ResultTable.compare` and `tallyboard compare` compute them."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tallyboard.analysis import comparison, stats
from tallyboard.analysis.run_diff import diff_runs
from tallyboard.dashboard import params
from tallyboard.dashboard.params import BadRequest, Json

MAX_RUNS = 5000  # runs in one statistics request (the hparams page of a large sweep)
MAX_DIFF = 10
MAX_NAME = 4000


def _choice(request: Request, name: str, allowed: tuple[str, ...]) -> str:
    value = request.query_params.get(name) or allowed[0]
    if value not in allowed:
        raise BadRequest(f"{name} must be one of {', '.join(allowed)}")
    return value


def _samples(request: Request) -> tuple[str, list[comparison.RunSample]]:
    """The metric named in the request and its samples for the requested runs."""
    run_ids = params.id_list(request, "runs", MAX_RUNS)
    if run_ids is None:
        raise BadRequest("runs is required (comma-separated run ids)")
    metric = params.text(request, "metric", "", MAX_NAME)
    if not metric:
        raise BadRequest("metric is required (a scalar tag or a result column)")
    summary = comparison.Summary(
        _choice(request, "summary", comparison.SUMMARIES),
        params.integer(request, "k", 5, 1, 1_000_000),
        _choice(request, "goal", comparison.GOALS),
    )
    queries = request.app.state.dashboard.queries
    rows = {row["run_id"]: row for row in queries.runs_of(run_ids)}
    rerun_of = {run_id: row.get("rerun_of") for run_id, row in rows.items()}
    wanted = [original for original in rerun_of.values() if original]
    originals = {row["run_id"]: row["hparams"] for row in queries.runs_of(wanted)}
    runs = comparison.with_originals(
        {run_id: rows[run_id]["hparams"] for run_id in run_ids if run_id in rows},
        rerun_of,
        lambda run_id: originals.get(run_id, {}),
    )
    results = {run_id: rows[run_id]["results"] for run_id in runs}
    found = comparison.run_samples(
        metric, runs, results, lambda: queries.metric_points(list(runs), metric), summary
    )
    return metric, found


def compare(request: Request) -> Response:
    """Groups (by the hparams named in `by`, repeatable) compared on a metric summary."""
    by = [params.storable("by", name) for name in request.query_params.getlist("by")[:8]]
    if any(len(name) > MAX_NAME for name in by):
        raise BadRequest(f"by is limited to {MAX_NAME} characters")
    unit = _choice(request, "unit", comparison.UNITS)
    metric, samples = _samples(request)
    return Json(comparison.compare(samples, by, metric, unit).to_json())


def summaries(request: Request) -> Response:
    """One point per run for the scatter: the mean over its repetitions, their std and values."""
    metric, samples = _samples(request)
    out: list[dict[str, Any]] = []
    for sample in samples:
        values = list(sample.values.values())
        spread = stats.describe(values)
        out.append(
            {"run_id": sample.run_id, "mean": spread.mean, "std": spread.std, "n": spread.n, "values": values}
        )
    return Json({"metric": metric, "runs": out})


def importance(request: Request) -> Response:
    """Per hparam: Spearman's rho and ANOVA eta-squared against the metric, strongest first."""
    metric, samples = _samples(request)
    names = sorted({name for sample in samples for name in sample.hparams})
    return Json({"metric": metric, "n": len(samples), "rows": comparison.importance_rows(samples, names)})


def diff(request: Request) -> Response:
    """What changed between 2 to 10 runs, each against the first."""
    run_ids = params.id_list(request, "runs", MAX_DIFF)
    if run_ids is None or len(run_ids) < 2:
        raise BadRequest(f"runs takes 2 to {MAX_DIFF} run ids")
    queries = request.app.state.dashboard.queries
    runs = []
    for run_id in run_ids:
        run = queries.run(run_id)
        if run is None:
            return Json({"error": f"no run {run_id}"}, status_code=404)
        runs.append(run)
    return Json(diff_runs(runs))

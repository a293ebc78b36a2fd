"""The API's compact series (dashboard/downsample.py `Series.to_json`, described in openapi.py)
expanded into plain columns, as static/series-math.js `decodeSeries` does for the charts, so
tests can read a series point by point."""

from __future__ import annotations

from itertools import accumulate
from typing import Any


def decoded(series: dict[str, Any]) -> dict[str, Any]:
    """step, epoch, wall (seconds since the start), value, min and max as lists of equal length."""
    if "value" not in series:  # a live update that only announces a series
        return series
    out = {k: v for k, v in series.items() if k != "wall_ms"}
    steps, n = series["step"], len(series["value"])
    if isinstance(steps, dict):
        steps = [steps["first"] + i * steps["stride"] for i in range(steps["count"])]
    else:
        steps = list(accumulate(steps))
    own = [None if v == "NaN" else v for v in series["value"]]  # a NaN point has no extreme
    out.update(
        step=steps,
        wall=[ms / 1000 for ms in accumulate(series["wall_ms"])],
        epoch=series.get("epoch", [None] * n),
        min=series.get("min", own),
        max=series.get("max", own),
    )
    return out

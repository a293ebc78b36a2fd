"""The package as users get it: the built wheel, installed into a fresh venv, imports without extras,
runs the demo with the [demo] extra, and serves every page and static file of the dashboard.

The source tree hides packaging mistakes (a static file left out of the package data, a module that
needs an undeclared dependency); only an installed wheel shows them. scripts/wheel_smoke.sh does the
work, so it can also be run by hand.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMOKE_TIMEOUT_S = 900  # building, a venv and the [demo] extra from pip's cache on a loaded 2-core machine


@pytest.mark.timeout(SMOKE_TIMEOUT_S + 30)
def test_the_built_wheel_installs_runs_the_demo_and_serves_every_static_file(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "TALLYBOARD_URL")}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "wheel_smoke.sh"), str(tmp_path / "smoke")],
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "import tallyboard: " + str(tmp_path / "smoke" / "venv") in result.stdout
    assert "logged 8 runs" in result.stdout
    assert "served 3 pages and" in result.stdout and "== the wheel works ==" in result.stdout

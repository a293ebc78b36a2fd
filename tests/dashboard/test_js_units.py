"""The dashboard scripts' unit tests (tests/js, node's built-in runner, no npm packages) as part of
the suite: smoothing, repetition aggregation, bucket merging and the board's naming rules are
checked under node, and a failure there fails here. Node is Debian's `nodejs` in CI
(scripts/ensure_services.sh installs it where missing)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support import require

ROOT = Path(__file__).resolve().parents[2]
JS_TESTS = ROOT / "tests" / "js"


def test_dashboard_script_units_pass_under_node():
    node = shutil.which("node") or shutil.which("nodejs")
    require(node is not None, "node (Debian's nodejs) for the dashboard's script tests")
    assert sorted(p.name for p in JS_TESTS.glob("*.test.mjs")), "no script tests found"
    result = subprocess.run(
        [node, "--test", str(JS_TESTS)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "# fail 0" in result.stdout and "# pass 0\n" not in result.stdout

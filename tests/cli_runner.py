"""Running the `tallyboard` command in a real subprocess, as a user's shell would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI_TIMEOUT_S = 240


def run_cli(
    *args: str | Path, cwd: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`python -m tallyboard ARGS`; with `check`, a non-zero exit fails the test showing stderr."""
    env = {key: value for key, value in os.environ.items() if key != "TALLYBOARD_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "tallyboard", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"tallyboard {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr}"
        )
    return result


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """A failed command says what went wrong in one line, without a traceback."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]

"""Training scripts written for a peer's API (tests/skins/scripts/), run as their users run them:
as they are (with the real package, where it is installed), or with only the import line changed
to tallyboard's skin, in a process of their own so that the run ends as the script ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).with_name("scripts")
TIMEOUT_S = 300


def with_import(script: str, peer_import: str, skin_import: str, folder: Path) -> Path:
    """A copy of `script` in `folder` whose one line `peer_import` is `skin_import`."""
    source = (SCRIPTS / script).read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    assert sum(line.rstrip("\n") == peer_import for line in lines) == 1, f"{script}: one {peer_import!r}"
    changed = folder / script
    changed.write_text(source.replace(peer_import + "\n", skin_import + "\n"), encoding="utf-8")
    return changed


def run_script(
    path: Path,
    *args: str | Path,
    table: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run `path` with `args`; `table` is the $TALLYBOARD_URL the skins find. Warnings are shown."""
    ours = ("TALLYBOARD_URL", "TALLYBOARD_ARTIFACTS", "PYTHONWARNINGS")
    env = {**{key: value for key, value in os.environ.items() if key not in ours}, **(env or {})}
    if table is not None:
        env["TALLYBOARD_URL"] = table
    done = subprocess.run(
        [sys.executable, str(path), *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    if check and done.returncode != 0:
        raise AssertionError(f"{path.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}")
    return done

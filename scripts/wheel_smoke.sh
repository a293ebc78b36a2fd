#!/usr/bin/env bash
# Proves the package as users get it works, not only the source tree: builds the wheel, installs it
# (not editable) into a fresh venv outside the repository, and checks that
#   1. `import tallyboard` and `tallyboard --version` work with no extra installed, and the
#      package is marked typed (py.typed, PEP 561) so type checkers use our annotations;
#   2. with the [demo] extra, `tallyboard demo --no-serve` trains and logs a sweep;
#   3. `tallyboard serve` answers every page and every static file of the dashboard, i.e. the
#      package data (scripts, styles, uPlot, the page template) ships in the wheel.
# Usage: bash scripts/wheel_smoke.sh [WORK_DIR]   (default: a new temporary folder, removed after)
# Run by tests/test_wheel.py, so CI runs it; pip reuses the machine's cache and local wheels.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-}"
keep=1
if [ -z "$work" ]; then work="$(mktemp -d)"; keep=0; fi
mkdir -p "$work"
server=""
cleanup() {
  local status=$?  # the script's own: the server's SIGTERM status must not replace it
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ $keep = 0 ]; then rm -rf "$work"; fi
  exit $status
}
trap cleanup EXIT
pip_install() { "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"; }

echo "== building the wheel =="
# From a copy of the files git knows (tracked, or new and not ignored), as a clean clone has them:
# no stale build/ or egg-info of the working tree can slip into the wheel. --no-isolation: the
# build backend (setuptools) is already installed; no download, no extra venv.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard) | (cd "$repo" && python -c '
import os, shutil, sys
for name in sys.stdin.buffer.read().decode().split("\0"):
    if name and os.path.isfile(name):
        os.makedirs(os.path.join(sys.argv[1], os.path.dirname(name)), exist_ok=True)
        shutil.copy2(name, os.path.join(sys.argv[1], name))' "$work/source")
python -m build --wheel --no-isolation --outdir "$work/dist" "$work/source" >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; exit 1; }
wheel="$(ls "$work"/dist/tallyboard-*.whl)"
echo "$wheel"

echo "== a fresh venv, the wheel without extras =="
python -m venv "$work/venv"
pip_install "$wheel"
cd "$work"  # away from the repository: nothing may come from its src/
env -u PYTHONPATH "$work/venv/bin/python" -c "
import tallyboard, sys
from importlib.resources import files
assert tallyboard.__file__.startswith('$work/venv/'), tallyboard.__file__
assert files('tallyboard').joinpath('py.typed').is_file(), 'py.typed is missing from the wheel'
print('import tallyboard:', tallyboard.__file__, '(typed)')"
env -u PYTHONPATH "$work/venv/bin/tallyboard" --version

echo "== the [demo] extra: train, log, serve =="
pip_install "$wheel[demo]"
env -u PYTHONPATH "$work/venv/bin/tallyboard" demo --db "$work/demo.db" --no-serve --quiet --epochs 1
port="$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
env -u PYTHONPATH "$work/venv/bin/tallyboard" serve "$work/demo.db" --port "$port" --read-only \
  >"$work/serve.log" 2>&1 &
server=$!
env -u PYTHONPATH "$work/venv/bin/python" - "$port" "$wheel" <<'PY'
"""Every page answers, every file they link and every static file in the wheel is served."""
import re
import sys
import time
import urllib.request
import zipfile

port, wheel = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"


def get(path: str) -> bytes:
    with urllib.request.urlopen(base + path, timeout=10) as response:
        assert response.status == 200, (path, response.status)
        return response.read()


deadline = time.monotonic() + 60
while True:
    try:
        get("/api/version")
        break
    except OSError:
        assert time.monotonic() < deadline, "the dashboard never answered"
        time.sleep(0.2)
linked = set()
for page in ("/", "/runs/1", "/compare?runs=1,2"):
    html = get(page).decode()
    linked |= set(re.findall(r'(?:src|href)="(/static/[^"?#]+)', html))
assert linked, "the pages link no static files"
shipped = {
    "/static/" + name.split("dashboard/static/", 1)[1]
    for name in zipfile.ZipFile(wheel).namelist()
    if "/dashboard/static/" in name and not name.endswith("/")
}
# The pages link content-hashed bundles the server builds at start from the shipped modules (a
# module missing from the wheel stops it there); each linked URL must be served from the wheel alone.
for path in sorted(linked | shipped):
    assert get(path), path
assert b'"rows"' in get("/api/runs")
print(f"served 3 pages and {len(shipped)} static files ({len(linked)} linked by the pages)")
PY
echo "== the wheel works =="

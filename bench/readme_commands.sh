#!/usr/bin/env bash
# Times the README's two set-up commands as a newcomer runs them: a fresh clone of this checkout in
# a temporary folder, a fresh venv, the command typed, the clock stopped when the dashboard answers
# (the demo) or when the tests are collected (the test command, `--collect-only -q`; the full run
# takes the CI time the README states). Prints one line per command; removes its folder.
#   bash bench/readme_commands.sh [demo|tests|both]   (default: both)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
which=${1:-both}
work="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
now() { date +%s.%N; }
seconds() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f} s')" "$@"; }

if [ "$which" != tests ]; then
  git clone -q "$repo" "$work/demo" && cd "$work/demo"
  python3 -m venv "$work/demo-venv" && source "$work/demo-venv/bin/activate"
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  start=$(now)
  pip install -q -e ".[demo]" >"$work/demo-install.log" 2>&1 || { tail "$work/demo-install.log"; exit 1; }
  installed=$(now)
  tallyboard demo --port "$port" --quiet >"$work/demo.log" 2>&1 &
  server=$!
  until curl -sf -o /dev/null "http://127.0.0.1:$port/"; do
    kill -0 "$server" 2>/dev/null || { tail "$work/demo.log"; exit 1; }
    sleep 0.5
  done
  done_=$(now)
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  deactivate
  echo "demo: $(seconds "$start" "$done_") from the command to the dashboard ($(seconds "$start" "$installed") pip install, $(seconds "$installed" "$done_") training and serving); load $(cut -d' ' -f1-3 /proc/loadavg)"
fi
if [ "$which" != demo ]; then
  git clone -q "$repo" "$work/tests" && cd "$work/tests"
  start=$(now)
  CI=true bash scripts/run_tests.sh --collect-only -q >"$work/tests.log" 2>&1 || { tail -20 "$work/tests.log"; exit 1; }
  done_=$(now)
  echo "tests: $(seconds "$start" "$done_") to $(grep -o '[0-9]* tests collected' "$work/tests.log"), $(grep -o 'installed in [0-9]* s' "$work/tests.log"); load $(cut -d' ' -f1-3 /proc/loadavg)"
fi

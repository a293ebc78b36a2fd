#!/usr/bin/env bash
# Installs everything the test suite needs, starts the services it talks to, and runs the tests.
# Used by the README's test command and by .ci/run; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing tallyboard with its test extras (and torch 2.13.0, CPU) =="
python -m pip install --quiet --disable-pip-version-check -e ".[test]" "torch==2.13.0"

bash scripts/ensure_services.sh

echo "== running the tests =="
python -m pytest "$@"

#!/usr/bin/env bash
# Installs everything the test suite needs, lints, starts the services the tests talk to, and runs
# the tests. The README's test command and exactly what CI runs (.ci/run, with CI=true); safe to run
# again. What it installs and starts, and how to keep it off your PostgreSQL: README "Development".
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing tallyboard with its test extras (and torch 2.13.0, CPU) =="
python -m pip install --quiet --disable-pip-version-check -e ".[test]" "torch==2.13.0"

echo "== lint: ruff =="
python -m ruff check src tests bench examples
python -m ruff format --check src tests bench examples

echo "== types: mypy (strict on the core; rules in pyproject.toml [tool.mypy]) =="
python -m mypy

bash scripts/ensure_services.sh

# One worker per core (TALLYBOARD_TEST_WORKERS=0 runs them in this process); work stealing keeps a
# worker busy while the other sits in a long test (the 60 s outage, the demo, DDP).
echo "== running the tests =="
python -m pytest -p no:benchmark -n "${TALLYBOARD_TEST_WORKERS:-auto}" --dist worksteal "$@"

#!/usr/bin/env bash
# Installs the locked test environment into a venv of its own, lints, type-checks, starts the
# services the tests talk to, and runs the tests. The README's test command and exactly what CI runs
# (.ci/run, with CI=true); safe to run again. Arguments go to pytest.
#
# The venv is .venv-test (TALLYBOARD_TEST_VENV overrides it), filled from
# requirements/test-py3.X.lock for the running python3 by uv (put into .venv-uv if missing), so what
# the tests import never floats; `uv pip sync` also removes whatever else was installed there. Under
# CI=true the venv is made anew every time, so a missing or broken pin fails CI instead of hiding
# behind a package installed by hand. What it starts, and how to keep it off your PostgreSQL:
# README "Development".
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
lock="requirements/test-py$version.lock"
if [ ! -f "$lock" ]; then
  echo "error: no lock for Python $version ($lock); the test environment is locked for $(ls requirements/test-py*.lock | sed 's/.*test-py\(.*\)\.lock/\1/' | tr '\n' ' ')" >&2
  exit 2
fi
venv=${TALLYBOARD_TEST_VENV:-.venv-test}

started=$(date +%s)
echo "== installing the locked test environment ($lock) into $venv =="
uv=$(command -v uv || true)
if [ -z "$uv" ]; then  # into a venv of its own: nothing is installed into the machine's Python
  uv=$PWD/.venv-uv/bin/uv
  if [ ! -x "$uv" ]; then
    echo "-- installing uv 0.13.9 (the installer) into .venv-uv --"
    "$python" -m venv .venv-uv
    .venv-uv/bin/python -m pip install --disable-pip-version-check --progress-bar on "uv==0.13.9"
  fi
fi
[ "${CI:-}" = true ] && rm -rf "$venv"
[ -x "$venv/bin/python" ] || "$uv" venv --python "$python" --seed "$venv"
find_links=()
[ -d /opt/wheels ] && find_links=(--find-links /opt/wheels)  # the CPU build of torch on these machines
"$uv" pip sync --python "$venv/bin/python" "${find_links[@]}" "$lock"
"$uv" pip install --python "$venv/bin/python" --no-deps -e .
echo "== installed in $(($(date +%s) - started)) s =="

export PATH="$PWD/$venv/bin:$PATH"  # every `python` the tests start is the venv's
export VIRTUAL_ENV="$PWD/$venv"

echo "== lint: ruff =="
python -m ruff check src tests bench examples
python -m ruff format --check src tests bench examples

echo "== types: mypy (strict on the core; rules in pyproject.toml [tool.mypy]) =="
python -m mypy

bash scripts/ensure_services.sh

# One worker per core and one more (TALLYBOARD_TEST_WORKERS=0 runs them in this process): a good
# part of the suite waits on real time (the 60 s outages, servers starting and stopping, killed
# processes), which a third worker fills: on 2 cores 17 min 24 s against 19 min 24 s with two.
# Work stealing keeps every worker busy while another sits in a long test (an outage, DDP).
workers=$(( $(nproc) + 1 ))
echo "== running the tests =="
python -m pytest -p no:benchmark -n "${TALLYBOARD_TEST_WORKERS:-$workers}" --dist worksteal "$@"

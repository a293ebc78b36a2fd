#!/usr/bin/env bash
# Regenerates the test environment's lock files from pyproject.toml (the `test` extra and what it
# pulls in) and requirements/torch.txt, one per Python version, for Linux x86_64:
#
#   bash scripts/lock.sh            # all of requirements/test-py3.{10,11,12}.lock
#   bash scripts/lock.sh --upgrade  # the newest releases the ranges allow, instead of the locked ones
#
# scripts/run_tests.sh installs from the lock of the running interpreter, and tests/test_lock.py
# fails when pyproject.toml and the locks disagree: run this after editing the dependencies, and
# commit the locks with the change. Upgrading the locked versions is a deliberate commit of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v uv >/dev/null || python3 -m pip install --quiet "uv==0.13.9"
extra=()
[ -d /opt/wheels ] && extra+=(--find-links /opt/wheels)  # the CPU build of torch on these machines
upgrade=()
[ "${1:-}" = --upgrade ] && upgrade=(--upgrade)
for version in 3.10 3.11 3.12; do
  out="requirements/test-py$version.lock"
  echo "== $out =="
  uv pip compile pyproject.toml --extra test requirements/torch.txt --python-version "$version" \
    --python-platform x86_64-manylinux_2_28 --no-header --quiet "${upgrade[@]}" "${extra[@]}" \
    --output-file "$out.new"
  { echo "# The test environment for Python $version on Linux x86_64. Made by scripts/lock.sh; do not edit."
    cat "$out.new"; } >"$out"
  rm "$out.new"
done

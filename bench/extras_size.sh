#!/usr/bin/env bash
# Disk size of each extra: builds the wheel, installs it with one extra at a time into a fresh venv
# and prints the venv's size (du) and the number of distributions in it. A bare venv (pip and
# setuptools only) is the first row, to subtract. pip reuses its cache, so the time column says
# little about a first install.
#   bash bench/extras_size.sh                     # none dashboard postgres media demo export tensorboard all
#   bash bench/extras_size.sh demo integrations   # integrations pulls torch: gigabytes
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
extras=("$@")
[ ${#extras[@]} = 0 ] && extras=(none dashboard postgres media demo export tensorboard all)
python -m build --wheel --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 || { tail "$work/build.log"; exit 1; }
wheel="$(ls "$work"/dist/*.whl)"
printf '%-14s %8s %8s %6s\n' extra "venv MB" "dists" "s"
for extra in "${extras[@]}"; do
  rm -rf "$work/venv" && python -m venv "$work/venv"
  spec="$wheel"; [ "$extra" = none ] || spec="$wheel[$extra]"
  start=$(date +%s)
  "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec" >/dev/null 2>&1 ||
    { echo "$extra: install failed"; continue; }
  dists=$("$work/venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | tail -n +3 | wc -l)
  printf '%-14s %8s %8s %6s\n' "$extra" "$(du -sm "$work/venv" | cut -f1)" "$dists" "$(( $(date +%s) - start ))"
done

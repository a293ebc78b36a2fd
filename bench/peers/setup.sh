#!/usr/bin/env bash
# Installs the peers of the benchmark into bench/peers/.venv (gitignored), apart from tallyboard's
# own environment: they pull ~1.3 GB and pin versions of their own. tallyboard goes in too, editable
# and without extras (its logging path needs none; numpy comes with the peers). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check \
  numpy psutil tensorboardX tensorboard mlflow aim trackio "deepboard==0.3.0" wandb
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps -e ../..
.venv/bin/python - <<'PY'
import importlib.metadata as m
for name in ("tallyboard", "tensorboardX", "tensorboard", "mlflow", "aim", "trackio", "deepboard", "wandb"):
    try:
        print(f"{name:14s} {m.version(name)}")
    except m.PackageNotFoundError:
        print(f"{name:14s} NOT INSTALLED (its rows will show the import error)")
PY

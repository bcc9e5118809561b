#!/usr/bin/env bash
# Creates the Python environment with Ray that tools/ray_index.py and its test run in (PyPI
# `ray==2.60.0`, about 70 MB). Idempotent and cached: a second run is offline. Prints the
# interpreter path on its last line; `ray` is beside it.
set -euo pipefail
venv="${LECTOR_RAYENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/rayenv}"
stamp="$venv/.lector-ray-2.60.0"
mkdir -p "$(dirname "$venv")"
# Parallel test threads may call this at once on a fresh machine: one creates, the others wait.
exec 9>"$venv.lock"
flock 9
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check ray==2.60.0 >&2
  touch "$stamp"
fi
echo "$venv/bin/python"

#!/usr/bin/env bash
# Creates the Python environment that lector's parity tests and benchmarks compare against
# (the official SQuAD scripts need only the standard library; ROUGE, trec_eval and the BM25
# reference need these packages). Bump the stamp when the package list changes.
# Idempotent and cached: a second run is offline. Prints the interpreter path on its last line.
set -euo pipefail
venv="${LECTOR_PYENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/pyenv}"
stamp="$venv/.lector-parity-v2"
mkdir -p "$(dirname "$venv")"
# Parallel test threads may call this at once on a fresh machine: one creates, the others wait.
exec 9>"$venv.lock"
flock 9
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    rouge-score==0.1.2 nltk==3.9.1 absl-py numpy six pytrec-eval-terrier==0.5.11 \
    bm25s==0.3.16 >&2
  touch "$stamp"
fi
echo "$venv/bin/python"

#!/usr/bin/env bash
# Builds the Python package in a fresh virtual environment and runs its tests (python/tests) with
# the real Haystack and LangChain packages (python/requirements-test.txt). The tests compare with
# the CLI built from this checkout ($LECTOR_BIN, default target/debug/lector, built here).
# The environment is made anew each run (under the user cache, or $LECTOR_PY_TEST_ENV), so what
# passes here installs on a clean machine; pip's own cache keeps reruns offline.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${LECTOR_PY_TEST_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/py-test-env}"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r python/requirements-test.txt
cargo build -q --locked -p lector-cli
# A wheel installed as a user installs it (not an editable build, whose extension module would sit
# in python/lector, shared by every environment). The dev profile: the dependencies and numeric
# crates are optimised in it (Cargo.toml) and already built by `cargo test`, so this compiles the
# bindings only.
"$venv/bin/maturin" build -q --locked --profile dev --interpreter "$venv/bin/python" -o "$venv/wheels"
"$venv/bin/python" -m pip install -q --no-deps "$venv"/wheels/lector-*.whl
export LECTOR_BIN="${LECTOR_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/debug/lector}"
"$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests

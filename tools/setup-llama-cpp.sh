#!/usr/bin/env bash
# Builds llama-cpp-python from its source package (llama.cpp compiled for this CPU) in its own
# virtual environment, for the tokenizer parity fixture (tools/gguf_tokens_reference.py) and the
# generation speed comparison (bench/gen_speed.py). Idempotent and cached; prints the interpreter
# path on its last line. Slow the first time (a C++ build: about 10-20 minutes on 2 cores).
set -euo pipefail
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
venv="${LECTOR_LLAMA_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/bench-llama-cpp}"
stamp="$venv/.lector-llama-cpp-$version"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check numpy >&2
  # Only llama-cpp-python itself from source; its build tools (cmake, ninja, scikit-build-core)
  # come as wheels. GGML_NATIVE: the same CPU features lector's candle build uses.
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-binary llama-cpp-python \
    "llama-cpp-python==$version" >&2
  touch "$stamp"
fi
echo "$venv/bin/python"

#!/usr/bin/env bash
# The Haystack peer of bench/haystack_peer.py: haystack-ai 3.x with its extractive reader
# (transformers-haystack: since Haystack 3 the reader lives in that integration package) on top of
# the transformers/PyTorch environment of tools/setup-hf.sh, which is reused through a .pth file
# rather than installed twice (torch with its CUDA wheels is 6.9 GB), plus the lector package
# (a wheel built by this script with maturin, release profile). Prints the interpreter on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
hf_python="$(bash tools/setup-hf.sh | tail -n 1)"
venv="${LECTOR_HAYSTACK_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/haystack-env}"
stamp="$venv/.lector-haystack-v1"
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv"
  hf_site="$("$hf_python" -c 'import site; print(site.getsitepackages()[0])')"
  own_site="$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
  echo "$hf_site" > "$own_site/lector-hf-env.pth"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r python/requirements-test.txt transformers-haystack==2.0.0 >&2
  touch "$stamp"
fi
# A wheel, not an editable build: an editable one loads whatever extension module was built last
# into python/lector, by any environment and profile.
rm -rf "$venv/wheels"
"$venv/bin/maturin" build -q --locked --release --interpreter "$venv/bin/python" -o "$venv/wheels" >&2
"$venv/bin/python" -m pip install -q --no-deps --force-reinstall "$venv"/wheels/lector-*.whl >&2
echo "$venv/bin/python"

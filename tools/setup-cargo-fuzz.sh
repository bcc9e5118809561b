#!/usr/bin/env bash
# cargo-fuzz for bench/fuzz.sh; prints the binary's path.
exec bash "$(dirname "$0")/setup-cargo-tool.sh" cargo-fuzz 0.13.2

#!/usr/bin/env bash
# Benchmark: the power-loss test of lector-index's commit protocol at many crash points.
#
# Runs crates/lector-index/src/crash_test.rs (a unit test: the crash-simulating file layer is
# crate-private) with LECTOR_CRASH_POINTS crash points (default 20000), release build, and prints
# its figures line: crash points, acknowledged documents checked and lost, indexes that failed to
# open, inconsistent states, failed recoveries. Lost, failed and inconsistent must all be 0.
#
#     bash bench/crash_points.sh [CRASH_POINTS]
set -euo pipefail
cd "$(dirname "$0")/.."
export LECTOR_CRASH_POINTS="${1:-20000}"
start=$(date +%s)
cargo test -p lector-index --release --lib crash_test -- --nocapture 2>&1 | grep -E "^crash points|test result|panicked"
echo "wall time: $(( $(date +%s) - start )) s"

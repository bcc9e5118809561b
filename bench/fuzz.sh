#!/usr/bin/env bash
# Fuzzes lector's parsers (docs/fuzzing.md): builds the cargo-fuzz targets in fuzz/ on the stable
# toolchain (coverage instrumentation, no sanitizer), seeds each from small slices of real files,
# and runs each target for FUZZ_RUNS executions (default 1,000,000), one after another on one core.
# Prints per target: executions, crashes, corpus size and time; fails when a target crashed or
# stopped short. Not run in CI (about an hour in all).
#
# The PDF and DOCX targets take inputs of up to 4 MiB (-max_len) with an 8 MiB document limit
# (lector_fuzz::FUZZ_MAX_FILE_BYTES), seeded with the sample PDFs and with hostile shapes (pages
# sharing a stream, long outlines, deep nesting); FUZZ_LARGE_RUNS executions each (default
# 20,000: inputs of megabytes take milliseconds to seconds). The others take 8 KiB.
#
# Usage: bench/fuzz.sh [TARGET...]     (default: every target)
# Environment: FUZZ_RUNS, FUZZ_LARGE_RUNS, FUZZ_BUILD_ARGS (e.g. --no-default-features: all but server_bodies), LECTOR_DATA_DIR (the shared data, else ../shared/data beside the
# checkout), LECTOR_FUZZ_GGUF (a GGUF model whose metadata seeds gguf_metadata; default: the
# first one in lector's model cache, else a hand-made header only).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs="${FUZZ_RUNS:-1000000}"
large_runs="${FUZZ_LARGE_RUNS:-20000}"
all_targets=(ingest_squad ingest_jsonl ingest_html ingest_pdf ingest_docx beir_queries trec server_bodies gguf_metadata reader_window)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

# The shared data, found as lector_eval::data finds it.
data="${LECTOR_DATA_DIR:-$repo/../shared/data}"
if [ ! -d "$data" ]; then
  echo "the shared data is missing: set LECTOR_DATA_DIR, or put it at $data" >&2
  exit 1
fi
cache="${LECTOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lector}"
# (No model cache yet, on a fresh machine: find fails, which must not end the script.)
gguf="${LECTOR_FUZZ_GGUF:-$({ find "$cache/models" -name '*.gguf' 2>/dev/null || true; } | sort | head -n 1)}"

cargo_fuzz="$(bash "$repo/tools/setup-cargo-fuzz.sh")"
cd "$repo/fuzz"
# -s none: the sanitizers need nightly; the coverage instrumentation does not. One job: the
# machine's cores are shared.
CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" "$cargo_fuzz" fuzz build -s none ${FUZZ_BUILD_ARGS:-}
bin_dir="target/x86_64-unknown-linux-gnu/release"

rm -rf seeds
python3 make_seeds.py "$data" "$repo" seeds ${gguf:+"$gguf"}

mkdir -p logs
failed=0
printf '| target | executions | crashes | corpus (files) | corpus (KiB) | seconds |\n| --- | --: | --: | --: | --: | --: |\n'
for target in "${targets[@]}"; do
  rm -rf "artifacts/$target"
  mkdir -p "corpus/$target" "artifacts/$target"
  start=$(date +%s)
  case "$target" in
    ingest_pdf | ingest_docx) target_runs="$large_runs" max_len=$((4 << 20)) ;;
    *) target_runs="$runs" max_len=8192 ;;
  esac
  # corpus/<target> gathers what libFuzzer finds; seeds/<target> is read only.
  "$bin_dir/$target" "corpus/$target" "seeds/$target" -runs="$target_runs" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="artifacts/$target/" \
    >"logs/$target.log" 2>&1 || true
  seconds=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$target.log" | tail -n 1)
  crashes=$(find "artifacts/$target" -type f | wc -l)
  files=$(find "corpus/$target" -type f | wc -l)
  # Bytes of input, not disk blocks: most corpus files are far smaller than a block.
  kib=$(du -sk --apparent-size "corpus/$target" | cut -f1)
  printf '| %s | %s | %s | %s | %s | %s |\n' "$target" "${execs:-0}" "$crashes" "$files" "$kib" "$seconds"
  if [ "$crashes" -ne 0 ] || [ "${execs:-0}" -lt "$target_runs" ]; then
    failed=1
    echo "  $target: see fuzz/logs/$target.log and fuzz/artifacts/$target/" >&2
  fi
done
exit "$failed"

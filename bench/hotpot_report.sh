#!/usr/bin/env bash
# Reports lector's multi-hop QA on the SECOND half of the shared HotpotQA sample (questions
# 550..1099), with the settings chosen on the first half (bench/hotpot_tune.sh): one hop against two,
# in the open setting (hybrid retrieval over every paragraph of the file) and the distractor setting,
# with the paired test. Usage: bash bench/hotpot_report.sh [OUT_DIR] [EXTRA FLAGS FOR --hops 2...]
# Needs a built lector (LECTOR=path, default target/release/lector).
set -euo pipefail
cd "$(dirname "$0")/.."
LECTOR=${LECTOR:-target/release/lector}
DATA=${LECTOR_DATA_DIR:-../shared/data}/hotpotqa/hotpot_dev_distractor_sample1100.json
OUT=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/hotpot-report}
shift || true
mkdir -p "$OUT"
run() { # name, setting, flags...
    local name=$1 setting=$2; shift 2
    [ -s "$OUT/$name.jsonl" ] && return 0
    local index=()
    [ "$setting" = open ] && index=(--mode hybrid --index "$OUT/open-hybrid-index")
    "$LECTOR" eval hotpot "$DATA" --setting "$setting" "${index[@]}" --offset 550 --limit 550 \
        --per-question "$OUT/$name.jsonl" --predictions "$OUT/$name.pred.json" "$@" > "$OUT/$name.txt"
}
run open-one open --hops 1
run open-two open --hops 2 "$@"
run distractor-one distractor --hops 1
run distractor-two distractor --hops 2 "$@"
for setting in open distractor; do
    for name in one two; do echo "== $setting, $name hop(s)"; cat "$OUT/$setting-$name.txt"; echo; done
    for metric in f1 joint_f1 both@2 both@5; do
        echo "== $setting: two hops against one, $metric"
        "$LECTOR" eval compare "$OUT/$setting-one.jsonl" "$OUT/$setting-two.jsonl" --metric "$metric"
    done
done

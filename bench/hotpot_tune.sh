#!/usr/bin/env bash
# Chooses lector's multi-hop settings on the FIRST half of the shared HotpotQA sample (questions
# 0..549), open setting, hybrid retrieval; the README reports on the second half with the
# settings chosen here (bench/hotpot_report.sh). Usage: bash bench/hotpot_tune.sh [OUT_DIR]
# Needs a built lector (LECTOR=path, default target/release/lector).
set -euo pipefail
cd "$(dirname "$0")/.."
LECTOR=${LECTOR:-target/release/lector}
DATA=${LECTOR_DATA_DIR:-../shared/data}/hotpotqa/hotpot_dev_distractor_sample1100.json
OUT=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/hotpot-tune}
INDEX=$OUT/open-hybrid-index
mkdir -p "$OUT"
run() { # name, extra flags...
    local name=$1; shift
    [ -s "$OUT/$name.jsonl" ] && return 0
    "$LECTOR" eval hotpot "$DATA" --setting open --mode hybrid --index "$INDEX" \
        --offset 0 --limit 550 --per-question "$OUT/$name.jsonl" "$@" > "$OUT/$name.txt"
}
run one-hop --hops 1
run two-hop --hops 2
run two-hop-both --hops 2 --second-hop both
run two-hop-dense --hops 2 --second-hop dense
run link-1 --hops 2 --path-weights 1,1,1,0.5,0.5
run alone-0 --hops 2 --path-weights 1,1,0.5,0.5,0
run named-1 --hops 2 --path-weights 1,1,0.5,1,0.5
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def rows(name):
    return [json.loads(l) for l in open(out / f"{name}.jsonl")]
def mean(xs): return 100 * sum(xs) / len(xs)
print(f"{'run':<16} {'F1':>6} {'EM':>6} {'joint F1':>8} {'both@2':>7} {'both@5':>7} {'both@10':>7}")
for f in sorted(out.glob("*.jsonl")):
    r = rows(f.stem)
    print(f"{f.stem:<16} {mean([x['f1'] for x in r]):6.2f} {mean([x['em'] for x in r]):6.2f} "
          f"{mean([x['joint_f1'] for x in r]):8.2f} {mean([x['both@2'] for x in r]):7.2f} "
          f"{mean([x['both@5'] for x in r]):7.2f} {mean([x['both@10'] for x in r]):7.2f}")
# The stopping rule, replayed exactly: hop 1 is the same in both runs, so a bridge question whose
# hop-1 confidence reaches c keeps the one-hop result.
one, two = rows("one-hop"), rows("two-hop")
print("\nstop after hop 1 when confidence >= c (bridge questions):")
print(f"{'c':>5} {'stopped':>8} {'F1':>6} {'both@5':>7}")
for c in [0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.01]:
    pick = [a if (b['type'] == 'bridge' and b['first_confidence'] >= c) else b for a, b in zip(one, two)]
    stopped = sum(1 for a, b in zip(one, two) if b['type'] == 'bridge' and b['first_confidence'] >= c)
    print(f"{c:5.2f} {stopped:8d} {mean([x['f1'] for x in pick]):6.2f} {mean([x['both@5'] for x in pick]):7.2f}")
PY

#!/usr/bin/env bash
# Domain adaptation on SubjQA (README, "Adapting lector to your questions"): the shipped reader against the
# same reader fine-tuned with `lector train reader` on SubjQA's review questions, both measured on a held-out
# part of the reviews at no-answer thresholds chosen by `lector calibrate` on the *training* questions.
#
#   bash bench/subjqa_adapt.sh            # everything: split, train (about an hour on 2 cores), evaluate
#   SKIP_TRAIN=1 bash bench/subjqa_adapt.sh   # evaluate an adapted reader already in $RUN
#
# Calibrations and predictions already in $WORK are reused (delete $WORK to recompute them).
#
# Needs a release build (cargo build --release) and the shared data (../shared/data/subjqa).
set -euo pipefail
cd "$(dirname "$0")/.."
LECTOR=${LECTOR:-target/release/lector}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/lector
SPLIT=${SPLIT:-$CACHE/subjqa-split}
RUN=${RUN:-$CACHE/runs/subjqa-adapted}
WORK=${WORK:-$CACHE/runs/subjqa-eval}
BASE=models/reader-minilm-squad
mkdir -p "$WORK"

python3 bench/subjqa_split.py --out "$SPLIT" >&2
if [ -z "${SKIP_TRAIN:-}" ]; then
  # One pass, the transformers QA example's recipe with a learning rate for a single epoch.
  "$LECTOR" train reader --model "$BASE" --train "$SPLIT/train.json" --out "$RUN" \
    --epochs 1 --lr 5e-5 --batch-size 16 --save-every 50 --seed 42 --threads 2
fi

# side NAME MODEL: threshold on the training questions, then predictions and scores on the held-out ones.
side() {
  local name=$1 model=$2
  [ -s "$WORK/$name-calibration.json" ] ||
    "$LECTOR" calibrate --squad "$SPLIT/train.json" --model "$model" --dry-run --json > "$WORK/$name-calibration.json"
  local threshold
  threshold=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['chosen']['threshold'])" \
    "$WORK/$name-calibration.json")
  [ -s "$WORK/$name-na.json" ] || "$LECTOR" read --model "$model" --squad "$SPLIT/heldout.json" \
    --out "$WORK/$name-pred.json" --na-prob-out "$WORK/$name-na.json" >&2
  for t in "$threshold" 1; do
    "$LECTOR" eval squad "$SPLIT/heldout.json" "$WORK/$name-pred.json" -n "$WORK/$name-na.json" -t "$t" \
      --json --per-question "$WORK/$name-t$t.jsonl" > "$WORK/$name-t$t.json"
  done
  echo "$threshold"
}
base_t=$(side base "$BASE")
adapted_t=$(side adapted "$RUN")

python3 - "$WORK" "$base_t" "$adapted_t" <<'PY'
import json, sys
work, thresholds = sys.argv[1], {"base": sys.argv[2], "adapted": sys.argv[3]}
print("| reader | threshold (train) | F1 | EM | answerable F1 | unanswerable accuracy | answerable F1, answering all |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name, t in thresholds.items():
    s = json.load(open(f"{work}/{name}-t{t}.json"))
    a = json.load(open(f"{work}/{name}-t1.json"))
    print(f"| {name} | {float(t):.4f} | {s['f1']:.2f} | {s['exact']:.2f} | {s['HasAns_f1']:.2f} | "
          f"{s['NoAns_exact']:.2f} | {a['HasAns_f1']:.2f} |")
PY
"$LECTOR" eval compare "$WORK/base-t$base_t.jsonl" "$WORK/adapted-t$adapted_t.jsonl"

#!/usr/bin/env bash
# Prompt variants of the shipped generator (SmolLM2-135M-Instruct, greedy) on the same questions
# (#51): SQuAD v1.1 dev, the first 200 questions, open book (each with its gold paragraph); and
# NQ-open dev, the first 200 questions, closed book. Variants: the default prompt; few-shot (the 3
# examples nearest each question by the embedder: SQuAD v1.1 train for SQuAD, NQ-open dev
# questions after the first 200 for NQ, so no evaluated question is its own example); chain of
# thought (the shipped chain-of-thought prompt). Each variant is compared with the default by
# `lector eval compare` (paired bootstrap interval, randomisation p-value) on F1 and key fact.
#
# Usage: bench/prompt_variants.sh [OUT_DIR]  (LECTOR: the binary, else target/release/lector;
# LECTOR_DATA_DIR: the shared data, else ../shared/data). About 90 minutes on 2 busy cores (few-shot on
# SQuAD embeds all 87,599 SQuAD v1.1 train questions once; chain of thought runs to 256 tokens).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/target/prompt-variants}"
lector="${LECTOR:-$repo/target/release/lector}"
data="${LECTOR_DATA_DIR:-$repo/../shared/data}"
n="${PROMPT_QUESTIONS:-200}"
mkdir -p "$out"

# The NQ-open pool: dev questions after the evaluated ones, each with its first answer.
python3 - "$data/nq_open/NQ-open.dev.jsonl" "$n" "$out/nq-pool.jsonl" <<'PY'
import json, sys
source, n, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(source) as f, open(target, "w") as out:
    for i, line in enumerate(f):
        if i >= n:
            row = json.loads(line)
            out.write(json.dumps({"question": row["question"], "answer": row["answer"][0]}) + "\n")
PY

run() { # name, then eval generative's arguments
  local name="$1"; shift
  echo "== $name"
  /usr/bin/time -f "%e s" "$lector" eval generative "$@" --no-reader --json \
    --per-question "$out/$name.jsonl" > "$out/$name.json"
}
squad=(--squad "$data/squad/dev-v1.1.json" --limit "$n")
nq=(--questions "$data/nq_open/NQ-open.dev.jsonl" --closed-book --limit "$n")
run squad-default "${squad[@]}"
run squad-few-shot "${squad[@]}" --examples "$data/squad/train-v1.1.json" --shots 3 --select similar
run squad-chain-of-thought "${squad[@]}" --prompt chain-of-thought
run nq-default "${nq[@]}"
run nq-few-shot "${nq[@]}" --examples "$out/nq-pool.jsonl" --shots 3 --select similar
run nq-chain-of-thought "${nq[@]}" --prompt chain-of-thought

for set in squad nq; do
  for variant in few-shot chain-of-thought; do
    for metric in f1 key_fact; do
      echo "== $set: $variant vs default, $metric"
      "$lector" eval compare "$out/$set-default.jsonl" "$out/$set-$variant.jsonl" --metric "$metric"
    done
  done
done

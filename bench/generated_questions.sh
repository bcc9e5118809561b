#!/usr/bin/env bash
# Does a test set generated from the documents rank systems as people's questions do? (#51)
# The first 200 paragraphs of SQuAD v1.1 dev are indexed (BM25, TF-IDF n-grams and
# all-MiniLM-L6-v2 vectors); `lector generate-questions` writes questions from the index's
# passages (rules; the round trip: the shipped reader recovers the answer, retrieval in the
# index's default mode ranks the passage within 5). Then eight configurations (BM25, TF-IDF,
# dense, hybrid; k = 1 and 5) answer both sets end to end (`lector eval odqa`), and the script
# prints each configuration's F1 on the human and on the generated questions, both rankings, and
# Kendall's tau-b between them.
#
# The human questions are asked with `eval odqa --squad` (the index holds their paragraphs, so
# nothing is added); the generated ones with `--questions` (JSON lines of question and answer),
# which asks an index as it is: their paragraphs are the index's passages, not documents to add.
# Steps whose output is in OUT_DIR already are not run again (delete OUT_DIR to start over).
#
# Usage: bench/generated_questions.sh [OUT_DIR]  (LECTOR: the binary, else target/release/lector;
# LECTOR_DATA_DIR: the shared data, else ../shared/data). About 40 minutes on 2 cores.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/target/generated-questions}"
lector="${LECTOR:-$repo/target/release/lector}"
data="${LECTOR_DATA_DIR:-$repo/../shared/data}"
paragraphs="${PARAGRAPHS:-200}"
mkdir -p "$out"

python3 - "$data/squad/dev-v1.1.json" "$paragraphs" "$out/human.json" <<'PY'
import json, sys
source, limit, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = json.load(open(source))
kept, left = [], limit
for article in data["data"]:
    if left == 0:
        break
    paragraphs = article["paragraphs"][:left]
    left -= len(paragraphs)
    kept.append({"title": article["title"], "paragraphs": paragraphs})
json.dump({"version": "1.1", "data": kept}, open(target, "w"))
print(f"{limit - left} paragraphs, {sum(len(p['qas']) for a in kept for p in a['paragraphs'])} human questions")
PY

[ -d "$out/index" ] || "$lector" index add "$out/human.json" --index "$out/index" --dense --tfidf
[ -s "$out/generated.json" ] || /usr/bin/time -f "generate-questions: %e s" "$lector" \
  generate-questions --index "$out/index" --out "$out/generated.json" --json \
  | tee "$out/generate-report.json"
python3 - "$out/generated.json" "$out/generated.jsonl" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                out.write(json.dumps({"id": qa["id"], "question": qa["question"], "answer": answers}) + "\n")
PY

configs=(bm25:1 bm25:5 tfidf:1 tfidf:5 dense:1 dense:5 hybrid:1 hybrid:5)
for set in human generated; do
  for config in "${configs[@]}"; do
    mode="${config%%:*}"; k="${config##*:}"
    result="$out/$set-$mode-k$k.json"
    [ -s "$result" ] && continue
    echo "== $set $mode k=$k"
    case "$set" in
      human) questions=(--squad "$out/human.json") ;;
      generated) questions=(--questions "$out/generated.jsonl") ;;
    esac
    "$lector" eval odqa "${questions[@]}" --index "$out/index" --mode "$mode" --k "$k" \
      --json > "$result.part" && mv "$result.part" "$result"
  done
done

python3 - "$out" "${configs[@]}" <<'PY'
import json, sys
out, configs = sys.argv[1], sys.argv[2:]

def f1(set_name, config):
    mode, k = config.split(":")
    report = json.load(open(f"{out}/{set_name}-{mode}-k{k}.json"))
    value = report["f1"]
    return value["mean"] if isinstance(value, dict) else value

def tau_b(x, y):
    concordant = discordant = ties_x = ties_y = 0
    n = len(x)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx * dy > 0:
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    return (concordant - discordant) / denominator if denominator else float("nan")

human = [f1("human", c) for c in configs]
generated = [f1("generated", c) for c in configs]
rank = lambda values: [sorted(values, reverse=True).index(v) + 1 for v in values]
print(f"{'configuration':<14} {'human F1':>9} {'rank':>5} {'generated F1':>13} {'rank':>5}")
for c, h, g, rh, rg in zip(configs, human, generated, rank(human), rank(generated)):
    print(f"{c:<14} {h:>9.2f} {rh:>5} {g:>13.2f} {rg:>5}")
print(f"Kendall tau-b between the two rankings: {tau_b(human, generated):.3f} over {len(configs)} configurations")
PY

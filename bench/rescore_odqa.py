#!/usr/bin/env python3
"""Rescores `lector eval odqa --per-question` output offline under other aggregation rules.

Each line holds every retrieved passage with the reader's answers and no-answer score, so reading once
with a large k answers what smaller k, the rank prior and abstention would have given. Used to choose the
pipeline's rank prior on held-out questions (tools/heldout_squad.py):

    python3 tools/heldout_squad.py --out /tmp/train-tail20.json
    lector eval odqa --squad /tmp/train-tail20.json --mode hybrid --k 20 --limit 1000 --per-question k20.jsonl
    python3 bench/rescore_odqa.py k20.jsonl --ks 5,10,20 --priors 0,1,2,3 [--oracle] [--rerank-oracle DATA.json]

A candidate's score is `p / (p + null x rank^a)` (its best occurrence; SQuAD-normalised text merges answers);
the answer is abstained on when `null / (null + p)` of the winner's occurrence is above --threshold (2: never).
Prints end-to-end EM / F1 per (k, a), with the official SQuAD v1.1 metric (tools/squad_official.py).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from squad_official import exact_match_score_v1, f1_score_v1, metric_max_over_ground_truths, normalize_answer  # noqa: E402


def answer(row, k, prior, threshold):
    best = {}
    for rank, passage in enumerate(row["passages"][:k], start=1):
        null = passage["null_score"]
        for a in passage["answers"]:
            p = a["score"]
            weighted = null * rank ** prior
            score = p / (p + weighted) if p + weighted > 0 else 0.0
            key = normalize_answer(a["answer"]) or a["answer"].lower()
            if key not in best or score > best[key][0]:
                best[key] = (score, a["answer"], p, null)
    if not best:
        return ""
    _, text, p, null = max(best.values(), key=lambda c: c[0])
    na_prob = null / (null + p) if null + p > 0 else 1.0
    return "" if na_prob > threshold else text


def contexts(squad_path):
    """Paragraph contexts by the document id lector gives them (`title#i`)."""
    with open(squad_path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    return {f"{a['title']}#{i}": p["context"] for a in data for i, p in enumerate(a["paragraphs"])}


def holds_answer(text, golds):
    """Whether `text` contains one of the gold answers, both SQuAD-normalised (answer containment)."""
    text = normalize_answer(text)
    return any(normalize_answer(g) in text for g in golds)


def reranked_by_oracle(row, ctx):
    """The row with the passages that contain a gold answer moved first (each group keeps its order)."""
    def text(p):
        return ctx[p["doc_id"]][p["char_start"]:p["char_end"]]

    passages = sorted(row["passages"], key=lambda p: not holds_answer(text(p), row["answers"]))
    return dict(row, passages=passages)


def table(rows, ks, priors, threshold, oracle):
    print("k".rjust(4) + "".join(f"a = {a:g}".rjust(16) for a in priors))
    for k in ks:
        cells = []
        for prior in priors:
            em = f1 = 0.0
            for row in rows:
                prediction = answer(row, k, prior, threshold)
                em += metric_max_over_ground_truths(exact_match_score_v1, prediction, row["answers"])
                f1 += metric_max_over_ground_truths(f1_score_v1, prediction, row["answers"])
            cells.append(f"{100 * em / len(rows):.2f} / {100 * f1 / len(rows):.2f}".rjust(16))
        if oracle:
            best = sum(max((metric_max_over_ground_truths(f1_score_v1, p["answers"][0]["answer"], row["answers"])
                            for p in row["passages"][:k] if p["answers"]), default=0.0) for row in rows)
            cells.append(f"   oracle F1 {100 * best / len(rows):.2f}")
        print(f"{k:>4}" + "".join(cells))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("per_question", help="JSON lines written by `lector eval odqa --per-question`")
    parser.add_argument("--ks", default="5,10,20")
    parser.add_argument("--priors", default="0,1,2,3")
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--oracle", action="store_true",
                        help="also print the F1 of an oracle aggregation: per question, the best F1 among the "
                             "reader's best answers of the first k passages (what no aggregation rule can beat)")
    parser.add_argument("--rerank-oracle", metavar="SQUAD",
                        help="also score after a perfect reranker of the retrieved passages: those containing a "
                             "gold answer first (SQUAD: the dataset the file was made from, for the passage texts)")
    args = parser.parse_args()
    with open(args.per_question, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    priors = [float(a) for a in args.priors.split(",")]
    ks = [int(k) for k in args.ks.split(",")]
    print(f"{len(rows)} questions; EM / F1 by k (rows) and rank prior a (columns), threshold {args.threshold}")
    table(rows, ks, priors, args.threshold, args.oracle)
    if args.rerank_oracle:
        ctx = contexts(args.rerank_oracle)
        print("after an oracle reranker of the retrieved passages (those holding a gold answer first)")
        table([reranked_by_oracle(row, ctx) for row in rows], ks, priors, args.threshold, args.oracle)


if __name__ == "__main__":
    main()

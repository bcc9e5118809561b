#!/usr/bin/env python3
"""Chooses `--prefer-recent`'s near-tie margin (lector_pipeline::aggregate::NEAR_TIE_LOG_ODDS) on held-out
questions: how well can the reader tell the best answer from the runner-up, by their log-odds gap?

No dated held-out QA data exists here, so the margin is read from the reader's own resolution: among
questions where exactly one of the top two candidates (from different documents) is right, the share in which
the top one is right, by the log-odds gap between them. Where that share is near 50% the reader cannot tell
them apart, and preferring the newer document costs little on average; the margin is the largest gap such that,
at it and every smaller one, the top candidate is right no more than --max-share of the time.

    python3 tools/heldout_squad.py --out /tmp/train-tail20.json
    lector eval odqa --squad /tmp/train-tail20.json --k 5 --limit 2000 --per-question tail.jsonl
    python3 bench/near_tie.py tail.jsonl [--prior 2] [--max-share 0.65]
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from squad_official import exact_match_score_v1, metric_max_over_ground_truths, normalize_answer  # noqa: E402


def candidates(row, prior):
    """(log_odds, text, doc_id) per normalised answer, best occurrence, best first."""
    best = {}
    for rank, passage in enumerate(row["passages"], start=1):
        null = max(passage["null_score"] * rank ** prior, 1e-300)
        for a in passage["answers"]:
            if not a["answer"]:
                continue
            odds = math.log(max(a["score"], 1e-300)) - math.log(null)
            key = normalize_answer(a["answer"]) or a["answer"].lower()
            if key not in best or odds > best[key][0]:
                best[key] = (odds, a["answer"], passage["doc_id"])
    return sorted(best.values(), key=lambda c: -c[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("per_question")
    parser.add_argument("--prior", type=float, default=2.0)
    parser.add_argument("--max-share", type=float, default=0.65)
    args = parser.parse_args()
    pairs = []  # (gap, top is right)
    with open(args.per_question, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            cands = candidates(row, args.prior)
            if len(cands) < 2:
                continue
            top = cands[0]
            other = next((c for c in cands[1:] if c[2] != top[2]), None)
            if other is None:
                continue
            right = [metric_max_over_ground_truths(exact_match_score_v1, c[1], row["answers"]) for c in (top, other)]
            if right[0] != right[1]:
                pairs.append((top[0] - other[0], bool(right[0])))
    pairs.sort()
    print(f"{len(pairs)} questions with exactly one of the top two (different documents) right")
    print(f"{'gap <=':>8}  {'pairs':>6}  {'top right':>9}")
    chosen, open_prefix = 0.0, True
    for margin in [0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0]:
        within = [right for gap, right in pairs if gap <= margin]
        if not within:
            continue
        share = sum(within) / len(within)
        print(f"{margin:>8.2f}  {len(within):>6}  {share:>9.3f}")
        open_prefix = open_prefix and share <= args.max_share
        if open_prefix:
            chosen = margin
    print(f"margin: {chosen} (largest gap up to which the top answer is right at most {args.max_share:.0%} of the time)")


if __name__ == "__main__":
    main()

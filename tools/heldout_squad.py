#!/usr/bin/env python3
"""Held-out questions for choosing lector's settings: the last N articles of SQuAD v1.1 *train*.

The dev sets report lector's figures, so settings (the reader's bf16 re-read margin, the pipeline's rank
prior) are chosen on these instead: 20 articles, 4,301 questions by default.

    python3 tools/heldout_squad.py [--articles 20] [--questions N] [--out /tmp/train-tail20.json]
                                   [--head /tmp/train-head.json]

--head also writes every other article (the training part, for `lector train ... --train`).

--questions keeps only the first N questions; every paragraph stays, so an index built from the file is the
same.
"""
import argparse
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "..", "shared", "data", "squad", "train-v1.1.json")


def keep_first_questions(articles, n):
    for article in articles:
        for paragraph in article["paragraphs"]:
            paragraph["qas"] = paragraph["qas"][:max(n, 0)]
            n -= len(paragraph["qas"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--articles", type=int, default=20)
    parser.add_argument("--train", default=TRAIN)
    parser.add_argument("--questions", type=int, help="keep only the first N questions")
    parser.add_argument("--out", default="/tmp/train-tail20.json")
    parser.add_argument("--head", help="also write the articles before the held-out ones here")
    args = parser.parse_args()
    with open(args.train, encoding="utf-8") as f:
        train = json.load(f)
    tail = {"version": train.get("version", "1.1"), "data": train["data"][-args.articles:]}
    if args.questions is not None:
        keep_first_questions(tail["data"], args.questions)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(tail, f)
    questions = sum(len(p["qas"]) for a in tail["data"] for p in a["paragraphs"])
    print(f"{args.out}: {len(tail['data'])} articles, {questions} questions")
    if args.head:
        head = {"version": train.get("version", "1.1"), "data": train["data"][:-args.articles]}
        with open(args.head, "w", encoding="utf-8") as f:
            json.dump(head, f)
        print(f"{args.head}: {len(head['data'])} articles")


if __name__ == "__main__":
    main()

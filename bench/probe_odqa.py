#!/usr/bin/env python3
"""Can a model trained on the reader's own outputs compare answers across passages better than lector's rule?

lector scores an answer from the passage at rank r by its odds against that passage's no-answer score, divided
by r^2 (crates/lector-pipeline/src/aggregate.rs). This script fits, on the `--per-question` file of one set of
questions, three learned alternatives, and scores them on another set:

- `logits`: a listwise linear model over the raw start/end logits of the span and of [CLS], the window's log
  partition functions, the span probability, the no-answer score, the rank and how many passages gave the
  same answer (the BERTserini idea, learned);
- `hidden`: the same plus the reader's last hidden states at [CLS] and at the span's first and last tokens (a
  verifier head on the frozen reader);
- `relevance`: a pointwise probe on the [CLS] state predicting "this passage contains a gold answer", added to
  the rule's log-odds with weight beta (a cross-encoder reranker made of the reader).

Features come from the reference checkpoint run with transformers (environment of tools/setup-hf.sh), over
the passages the `--per-question` file names (its `char_start`/`char_end` slice the SQuAD paragraph). Train on
train articles, test on held-out train articles (never the dev sets lector reports):

    python3 tools/heldout_squad.py --out /tmp/tail20.json          # the last 20 train articles
    python3 -c 'import json; t = json.load(open("../shared/data/squad/train-v1.1.json")); \\
        json.dump({"version": "1.1", "data": t["data"][-60:-20]}, open("/tmp/mid40.json", "w"))'
    lector eval odqa --squad /tmp/tail20.json --mode hybrid --k 10 --limit 1000 --per-question /tmp/tail.jsonl
    lector eval odqa --squad /tmp/mid40.json --mode hybrid --k 10 --limit 2500 --per-question /tmp/mid.jsonl
    ~/.cache/lector/hf-env/bin/python bench/probe_odqa.py --train /tmp/mid40.json /tmp/mid.jsonl \\
        --test /tmp/tail20.json /tmp/tail.jsonl

Prints end-to-end F1 (official SQuAD v1.1, never abstaining) of the rule, of the raw span logit in the rule's place
(start + end logit, BERTserini's cross-passage comparison) and of each learned scorer, k = 5, 10.
"""
import argparse
import collections
import json
import math
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from squad_official import f1_score_v1, metric_max_over_ground_truths, normalize_answer  # noqa: E402
from rescore_odqa import contexts, holds_answer  # noqa: E402  (this script's folder)

READER = os.path.join(ROOT, "models", "reader-minilm-squad")
RANK_PRIOR = 2.0


def token_range(offsets, context_tokens, start, end):
    """The first and last context tokens overlapping characters [start, end)."""
    first = next(t for t in context_tokens if offsets[t][1] > start)
    last = next(t for t in reversed(context_tokens) if offsets[t][0] < end)
    return first, last


def read_question(tok, model, row, texts):
    """Every candidate answer of one question with its features, and each passage's [CLS] state."""
    enc = tok([row["question"]] * len(texts), texts, truncation="only_second", max_length=384, padding=True,
              return_offsets_mapping=True, return_tensors="pt")
    offsets = enc.pop("offset_mapping")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    hidden, starts, ends = out.hidden_states[-1], out.start_logits, out.end_logits
    candidates, passages = [], []
    for i, passage in enumerate(row["passages"][: len(texts)]):
        context_tokens = [t for t, s in enumerate(enc.sequence_ids(i)) if s == 1]
        allowed = torch.full_like(starts[i], -1e4)
        allowed[context_tokens + [0]] = 0
        log_z = (torch.logsumexp(starts[i] + allowed, 0) + torch.logsumexp(ends[i] + allowed, 0)).item()
        null_logit = (starts[i, 0] + ends[i, 0]).item()
        golds = row["answers"]
        passages.append((hidden[i, 0].numpy(), float(holds_answer(texts[i], golds))))
        for a in passage["answers"][:3]:
            first, last = token_range(offsets[i], context_tokens, a["start"], a["end"])
            span_logit = (starts[i, first] + ends[i, last]).item()
            candidates.append({
                "rank": i + 1, "text": a["answer"], "p": a["score"], "null": passage["null_score"],
                "span_logit": span_logit, "null_logit": null_logit, "log_z": log_z,
                "hidden": torch.cat([hidden[i, 0], hidden[i, first], hidden[i, last]]).numpy(),
                "f1": metric_max_over_ground_truths(f1_score_v1, a["answer"], golds),
            })
    return candidates, passages


def extract(squad_path, rows_path, k, tok, model):
    ctx = contexts(squad_path)
    questions = []
    with open(rows_path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts = [ctx[p["doc_id"]][p["char_start"]:p["char_end"]] for p in row["passages"][:k]]
            if texts:
                questions.append(read_question(tok, model, row, texts))
    return questions


def log_odds(c):
    return math.log(max(c["p"], 1e-12)) - math.log(max(c["null"], 1e-12))


def scalars(c, agreeing):
    return [log_odds(c), math.log(c["rank"]), c["span_logit"], c["null_logit"], c["log_z"],
            c["span_logit"] - c["null_logit"], math.log(max(c["p"], 1e-12)), math.log(agreeing)]


def padded(questions, k, with_hidden):
    """Features (questions, candidates, d), F1 of each candidate, and the mask of real candidates."""
    kept = [[c for c in cands if c["rank"] <= k] for cands, _ in questions]
    width = max(len(c) for c in kept)
    rows = []
    for cands in kept:
        counts = collections.Counter(normalize_answer(c["text"]) for c in cands)
        rows.append([np.concatenate([scalars(c, counts[normalize_answer(c["text"])]),
                                     c["hidden"] if with_hidden else []]) for c in cands])
    d = len(rows[0][0])
    x = np.zeros((len(kept), width, d), np.float32)
    y = np.zeros((len(kept), width), np.float32)
    mask = np.zeros((len(kept), width), bool)
    for i, cands in enumerate(kept):
        for j, c in enumerate(cands):
            x[i, j], y[i, j], mask[i, j] = rows[i][j], c["f1"], True
    return torch.tensor(x), torch.tensor(y), torch.tensor(mask)


def fit_listwise(x, y, mask, weight_decay):
    """A linear score trained with a softmax over each question's candidates, targets weighted by F1."""
    mu, sd = x[mask].mean(0), x[mask].std(0) + 1e-4
    linear = torch.nn.Linear(x.shape[-1], 1)
    opt = torch.optim.Adam(linear.parameters(), lr=0.01, weight_decay=weight_decay)
    answerable = y.max(1).values > 0
    target = y / y.sum(1, keepdim=True).clamp_min(1e-9)
    for _ in range(300):
        scores = linear((x - mu) / sd).squeeze(-1).masked_fill(~mask, -1e9)
        loss = -(target * torch.log_softmax(scores, 1))[answerable].sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return lambda z: linear((z - mu) / sd).squeeze(-1)


def fit_relevance(questions):
    """Logistic regression on [CLS] states: does the passage contain a gold answer."""
    x = torch.tensor(np.array([h for _, ps in questions for h, _ in ps]))
    y = torch.tensor([c for _, ps in questions for _, c in ps])
    mu, sd = x.mean(0), x.std(0) + 1e-4
    linear = torch.nn.Linear(x.shape[-1], 1)
    opt = torch.optim.Adam(linear.parameters(), lr=0.01, weight_decay=1e-3)
    for _ in range(300):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(linear((x - mu) / sd).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return lambda h: linear((torch.tensor(h) - mu) / sd).item()


def f1_of_choice(scores, y, mask):
    with torch.no_grad():
        best = scores.masked_fill(~mask, -1e9).argmax(1, keepdim=True)
    return 100 * y.gather(1, best).mean().item()


def rule_f1(questions, k, relevance=None, beta=0.0, evidence=log_odds):
    """F1 of the answer with the best `evidence - 2 ln rank (+ beta x relevance of its passage)`;
    `relevance[q][r]`: the probe's score of question q's passage at rank r + 1."""
    total = 0.0
    for q, (cands, _) in enumerate(questions):
        kept = [c for c in cands if c["rank"] <= k]
        if kept:
            bonus = (lambda c: beta * relevance[q][c["rank"] - 1]) if relevance else (lambda c: 0.0)
            total += max(kept, key=lambda c: evidence(c) - RANK_PRIOR * math.log(c["rank"]) + bonus(c))["f1"]
    return 100 * total / len(questions)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", nargs=2, metavar=("SQUAD", "ROWS"), required=True)
    parser.add_argument("--test", nargs=2, metavar=("SQUAD", "ROWS"), required=True)
    parser.add_argument("--ks", default="5,10")
    parser.add_argument("--reader", default=READER)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    ks = [int(k) for k in args.ks.split(",")]
    tok = AutoTokenizer.from_pretrained(args.reader)
    model = AutoModelForQuestionAnswering.from_pretrained(args.reader, dtype=torch.float32).eval()
    train = extract(*args.train, max(ks), tok, model)
    test = extract(*args.test, max(ks), tok, model)
    probe = fit_relevance(train)
    relevance = [[probe(h) for h, _ in passages] for _, passages in test]
    print(f"train {len(train)} questions, test {len(test)}; end-to-end F1 on test (never abstaining)")
    print(f"{'k':>3}  {'rule':>6}  {'raw':>6}  {'logits':>6}  {'hidden':>6}  relevance beta 0.5 / 1 / 2")
    for k in ks:
        learned = []
        for with_hidden, decay in ((False, 0.0), (True, 1e-2)):
            score = fit_listwise(*padded(train, k, with_hidden), decay)
            x, y, mask = padded(test, k, with_hidden)
            learned.append(f1_of_choice(score(x), y, mask))
        blended = " / ".join(f"{rule_f1(test, k, relevance, b):.2f}" for b in (0.5, 1.0, 2.0))
        raw = rule_f1(test, k, evidence=lambda c: c["span_logit"])
        print(f"{k:>3}  {rule_f1(test, k):6.2f}  {raw:6.2f}  {learned[0]:6.2f}  {learned[1]:6.2f}  {blended}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Trains a cross-encoder passage reranker for `--rerank DIR` on SQuAD v1.1 train questions.

No cross-encoder is published where lector fetches models, so this script makes one: a
`BertForSequenceClassification` with one label (the Hugging Face layout of cross-encoder rerankers, such as
sentence-transformers' CrossEncoder) whose encoder starts from the reference reader (already trained to find
answers on SQuAD), scoring "question [SEP] title passage" for how likely the passage answers the question.
Training data are SQuAD v1.1 *train* questions, leaving out the last `--holdout-articles` articles (60: the
held-out sets of tools/heldout_squad.py), so the dev sets and the held-out train articles stay unseen:

- each question forms a group of its answer passage, cut as lector cuts passages (train_reader.py's `chunk`),
  and `--negatives` passages from the best BM25 passages of the training articles that do not contain an answer;
- loss: cross-entropy of the answer passage over its group (one softmax per question, listwise).

Needs the environment of tools/setup-hf.sh:

    ~/.cache/lector/hf-env/bin/python tools/train_reranker.py --out ~/.cache/lector/models/reranker-minilm-squad

The output (model.safetensors, config.json, tokenizer.json) is for `--rerank DIR`. About 44 minutes on 2 cores for the
default 3,200 questions; measured in the README ("Reranking: --rerank DIR").
"""
import argparse
import json
import os
import random
import shutil
import sys
import time

import torch
from transformers import BertForSequenceClassification, PreTrainedTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from squad_official import normalize_answer  # noqa: E402
from train_reader import READER, TRAIN, Bm25, chunk, linear_schedule, training_run  # noqa: E402


def question_groups(articles, questions, negatives, rng):
    """Per sampled question: (question, [passage text]) with the answer passage first; texts are "title passage"."""
    passages, holders = [], {}  # passages: (text, title); holders: (paragraph, start) -> passage ids
    paragraphs = []
    for article in articles:
        title = article["title"].replace("_", " ")
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            spans = []
            for start, end in chunk(context):
                spans.append((len(passages), start, end))
                passages.append((context[start:end], title))
            paragraphs.append((paragraph, spans))
    bm25 = Bm25([f"{title} {text}" for text, title in passages])
    items = [(p, qa) for p, (paragraph, _) in enumerate(paragraphs) for qa in paragraph["qas"]]
    rng.shuffle(items)
    out = []
    for p, qa in items:
        if len(out) == questions:
            break
        answer = qa["answers"][0]
        start, end = answer["answer_start"], answer["answer_start"] + len(answer["text"])
        holder = next((i for i, s, e in paragraphs[p][1] if s <= start and end <= e), None)
        if holder is None:  # the answer crosses two passages
            continue
        golds = {normalize_answer(a["text"]) for a in qa["answers"]} - {""}
        distractors = [i for i in bm25.top(qa["question"], 4 * negatives)
                       if i != holder and not any(g in normalize_answer(passages[i][0]) for g in golds)]
        if len(distractors) < negatives:
            continue
        texts = [f"{passages[i][1]} {passages[i][0]}" for i in [holder] + distractors[:negatives]]
        out.append((qa["question"], texts))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=READER, help="encoder to start from (the reference reader)")
    parser.add_argument("--train", default=TRAIN)
    parser.add_argument("--out", required=True)
    parser.add_argument("--holdout-articles", type=int, default=60)
    parser.add_argument("--questions", type=int, default=3200)
    parser.add_argument("--negatives", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="questions per step")
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    articles, rng = training_run(args)
    items = question_groups(articles, args.questions, args.negatives, rng)
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(args.model, "tokenizer.json"))
    tok.pad_token = "[PAD]"
    model = BertForSequenceClassification.from_pretrained(args.model, num_labels=1, dtype=torch.float32)
    model.train()
    plan = [items[i:i + args.batch] for i in range(0, len(items), args.batch)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    schedule = linear_schedule(optimizer, len(plan), warmup=max(1, len(plan) // 10))
    group = args.negatives + 1
    print(f"{len(items)} questions, {len(plan)} steps of {args.batch} x {group} passages", flush=True)
    began = time.time()
    for step, batch in enumerate(plan, start=1):
        questions = [q for q, texts in batch for _ in texts]
        texts = [t for _, ts in batch for t in ts]
        enc = tok(questions, texts, padding=True, truncation="only_second", max_length=args.max_length,
                  return_tensors="pt")
        logits = model(**enc).logits.view(len(batch), group)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 20 == 0 or step == len(plan):
            print(f"step {step}/{len(plan)} loss {loss.item():.4f} {time.time() - began:.0f} s", flush=True)
    os.makedirs(args.out, exist_ok=True)
    model.config.architectures = ["BertForSequenceClassification"]
    model.save_pretrained(args.out, safe_serialization=True)
    shutil.copy(os.path.join(args.model, "tokenizer.json"), args.out)
    print(f"saved {args.out} ({time.time() - began:.0f} s)")


if __name__ == "__main__":
    main()

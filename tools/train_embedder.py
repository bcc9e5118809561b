#!/usr/bin/env python3
"""Fine-tunes the sentence embedder (all-MiniLM-L6-v2) for question-to-passage retrieval on SQuAD v1.1 train.

all-MiniLM-L6-v2 was trained for sentence similarity; lector's dense retrieval asks it which passage answers a
question. This script continues its training on SQuAD v1.1 *train* questions, leaving out the last
`--holdout-articles` articles (60: the held-out sets of tools/heldout_squad.py), so the dev sets and the held-out
train articles stay unseen:

- each question is paired with the passage that holds its answer, cut as lector cuts passages (sentences packed
  up to 100 words, tools/train_reader.py's `chunk`) and embedded as lector embeds it ("title passage");
- its hard negative is the best BM25 passage of the same article that does not contain the answer (the passages
  a question's true passage competes with in a small corpus);
- loss: cross-entropy of each question over every positive and hard negative of the batch (in-batch negatives,
  cosine x 20, as sentence-transformers' MultipleNegativesRankingLoss); one question per paragraph per batch,
  so no batch holds a question's positive twice.

Needs the environment of tools/setup-hf.sh and the embedder in the user cache (`lector models pull embedder`):

    ~/.cache/lector/hf-env/bin/python tools/train_embedder.py --out ~/.cache/lector/models/minilm-squad-retriever

The output has the embedder's layout (model.safetensors, config.json, tokenizer.json), for `--embedder DIR`.
About 27 minutes on 2 cores for the default 6,400 questions; measured in the README ("lector eval odqa").
"""
import argparse
import json
import os
import random
import shutil
import sys
import time

import torch
from transformers import AutoModel, PreTrainedTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from squad_official import normalize_answer  # noqa: E402
from train_reader import TRAIN, Bm25, chunk, linear_schedule, training_run  # noqa: E402

EMBEDDER = os.path.expanduser("~/.cache/lector/models/all-minilm-l6-v2")


def examples(articles, rng):
    """(question, positive passage text, hard negative text, paragraph key) for every usable question, shuffled."""
    out = []
    for a, article in enumerate(articles):
        title = article["title"].replace("_", " ")
        passages = []  # (text, paragraph index, start offset)
        for p, paragraph in enumerate(article["paragraphs"]):
            context = paragraph["context"]
            passages += [(context[s:e], p, s) for s, e in chunk(context)]
        bm25 = Bm25([text for text, _, _ in passages])
        for p, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                answer = qa["answers"][0]
                start, end = answer["answer_start"], answer["answer_start"] + len(answer["text"])
                holder = next((i for i, (text, q, s) in enumerate(passages)
                               if q == p and s <= start and end <= s + len(text)), None)
                gold = normalize_answer(answer["text"])
                negative = next((i for i in bm25.top(qa["question"], 8)
                                 if i != holder and gold not in normalize_answer(passages[i][0])), None)
                if holder is None or negative is None:
                    continue
                out.append((qa["question"], f"{title} {passages[holder][0]}", f"{title} {passages[negative][0]}",
                            (a, p)))
    rng.shuffle(out)
    return out


def batches(items, size):
    """Batches of `size` with at most one question per paragraph (a repeat waits for a later batch; the last,
    incomplete batch is dropped)."""
    pending = list(items)
    while pending:
        batch, seen, rest = [], set(), []
        for item in pending:
            if len(batch) < size and item[3] not in seen:
                batch.append(item)
                seen.add(item[3])
            else:
                rest.append(item)
        if len(batch) < size:
            return
        yield batch
        pending = rest


def embed(model, tok, texts, max_length):
    enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=EMBEDDER)
    parser.add_argument("--train", default=TRAIN)
    parser.add_argument("--out", required=True)
    parser.add_argument("--holdout-articles", type=int, default=60)
    parser.add_argument("--questions", type=int, default=6400)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--max-length", type=int, default=128, help="the embedder's own truncation")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    articles, rng = training_run(args)
    items = examples(articles, rng)[:args.questions]
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(args.model, "tokenizer.json"))
    tok.pad_token = "[PAD]"
    model = AutoModel.from_pretrained(args.model)
    model.train()
    plan = list(batches(items, args.batch))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    schedule = linear_schedule(optimizer, len(plan), warmup=max(1, len(plan) // 10))
    print(f"{len(items)} questions, {len(plan)} batches of {args.batch}", flush=True)
    began = time.time()
    for step, batch in enumerate(plan, start=1):
        questions = embed(model, tok, [b[0] for b in batch], args.max_length)
        passages = embed(model, tok, [b[1] for b in batch] + [b[2] for b in batch], args.max_length)
        logits = args.scale * questions @ passages.T
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 20 == 0 or step == len(plan):
            print(f"step {step}/{len(plan)} loss {loss.item():.4f} {time.time() - began:.0f} s", flush=True)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    shutil.copy(os.path.join(args.model, "tokenizer.json"), args.out)
    print(f"saved {args.out} ({time.time() - began:.0f} s)")


if __name__ == "__main__":
    main()

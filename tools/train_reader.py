#!/usr/bin/env python3
"""Fine-tunes an extractive reader so that its scores compare across passages (shared normalisation).

lector's open-domain pipeline reads the k retrieved passages of a question one by one and ranks each passage's
best span by its odds against that passage's own no-answer score (crates/lector-pipeline/src/aggregate.rs).
The reference reader was trained on single paragraphs, so nothing taught it that a confident span in a
distractor passage must lose to the span in the passage that holds the answer. This script continues training
a Hugging Face `...ForQuestionAnswering` checkpoint on groups of passages per question, the passage holding the
answer plus BM25-retrieved distractors that do not contain it (Clark & Gardner 2018, "shared normalization"):

- per passage, the usual cross-entropy over [CLS] and the passage tokens: the answer span in the answer
  passage, [CLS] (no answer) in the distractors (weighted down, `--negative-weight`);
- across the question's passages, one softmax over every passage token of every passage of the question, each
  logit taken relative to its own passage's [CLS] logit (exactly the odds lector compares), whose target is the
  answer's first (and, separately, last) token.

Passages are cut as lector cuts them (sentences packed up to 100 words) from SQuAD v1.1 *train* articles,
leaving out the last `--holdout-articles` (60: the held-out sets of tools/heldout_squad.py and
bench/probe_odqa.py), so the dev sets and the held-out train articles stay unseen. Runs on the CPU (float32);
needs the environment of tools/setup-hf.sh:

    ~/.cache/lector/hf-env/bin/python tools/train_reader.py --seed 1 --out ~/.cache/lector/models/reader-sharednorm

The output is a checkpoint of the same layout as the input (float16 safetensors, tokenizer files copied), for
`--model DIR` or LECTOR_READER. About 30 minutes on 2 cores for the default 3,000 questions. Measured (README,
"lector eval odqa"): at this budget it compares passages better without the rank prior but reads worse, and
ends below the reference reader on the held-out questions, so lector keeps the reference reader.
"""
import argparse
import collections
import json
import math
import os
import random
import re
import shutil
import sys
import time

import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from squad_official import normalize_answer  # noqa: E402

TRAIN = os.path.join(ROOT, "..", "shared", "data", "squad", "train-v1.1.json")
READER = os.path.join(ROOT, "models", "reader-minilm-squad")
WORD = re.compile(r"\w+")
# Sentence ends: lector uses Unicode sentence boundaries; this is close enough for SQuAD's prose.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
STOPWORDS = set(
    "a an and are as at be by for from has he in is it its of on or that the to was were will with what which who "
    "whom when where why how did does do in into than then there these this those".split()
)


def chunk(text, max_words=100):
    """(start, end) character ranges: whole sentences packed up to max_words (longer sentences split)."""
    pieces, start = [], 0
    for match in list(SENTENCE_END.finditer(text)) + [None]:
        end = match.start() if match else len(text)
        words = [m.start() + start for m in WORD.finditer(text[start:end])]
        for n in range(0, len(words), max_words):
            piece_start = start if n == 0 else words[n]
            piece_end = words[n + max_words] if n + max_words < len(words) else end
            pieces.append((piece_start, len(text[:piece_end].rstrip()), len(words[n:n + max_words])))
        start = match.end() if match else len(text)
    ranges, i = [], 0
    while i < len(pieces):
        first, words = i, pieces[i][2]
        while i + 1 < len(pieces) and words + pieces[i + 1][2] <= max_words:
            i += 1
            words += pieces[i][2]
        ranges.append((pieces[first][0], pieces[i][1]))
        i += 1
    return ranges


def terms(text):
    return [w for w in WORD.findall(text.lower()) if w not in STOPWORDS]


class Bm25:
    """Okapi BM25 (k1 = 1.2, b = 0.75, as Tantivy) over a list of texts."""

    def __init__(self, texts):
        self.postings = collections.defaultdict(list)
        self.lengths = []
        for doc, text in enumerate(texts):
            counts = collections.Counter(terms(text))
            self.lengths.append(sum(counts.values()))
            for term, tf in counts.items():
                self.postings[term].append((doc, tf))
        self.average = sum(self.lengths) / max(1, len(self.lengths))

    def top(self, query, n):
        scores = collections.defaultdict(float)
        total = len(self.lengths)
        for term in set(terms(query)):
            posting = self.postings.get(term, ())
            idf = math.log(1 + (total - len(posting) + 0.5) / (len(posting) + 0.5))
            for doc, tf in posting:
                norm = tf + 1.2 * (0.25 + 0.75 * self.lengths[doc] / self.average)
                scores[doc] += idf * tf * 2.2 / norm
        return sorted(scores, key=scores.get, reverse=True)[:n]


def passages_of(articles):
    """Every passage as (text, paragraph id, start offset in the paragraph) and each paragraph's passages."""
    passages, by_paragraph = [], []
    for article in articles:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            ids = []
            for start, end in chunk(context):
                ids.append(len(passages))
                passages.append((context[start:end], len(by_paragraph), start))
            by_paragraph.append(ids)
    return passages, by_paragraph


def groups(articles, passages, by_paragraph, questions, negatives, rng):
    """Per sampled question: (question, [(passage text, answer char span or None)]), answer passage first."""
    bm25 = Bm25([p[0] for p in passages])
    items = [(pi, qa) for pi, par in enumerate(p for a in articles for p in a["paragraphs"]) for qa in par["qas"]]
    rng.shuffle(items)
    out = []
    for paragraph, qa in items:
        if len(out) == questions:
            break
        answer = qa["answers"][0]
        start, end = answer["answer_start"], answer["answer_start"] + len(answer["text"])
        holder = next((i for i in by_paragraph[paragraph]
                       if passages[i][2] <= start and end <= passages[i][2] + len(passages[i][0])), None)
        if holder is None:  # the answer crosses two passages
            continue
        golds = {normalize_answer(a["text"]) for a in qa["answers"]}
        distractors = [i for i in bm25.top(qa["question"], 4 * negatives)
                       if i != holder and not any(g and g in normalize_answer(passages[i][0]) for g in golds)]
        if len(distractors) < negatives:
            continue
        offset = passages[holder][2]
        group = [(passages[holder][0], (start - offset, end - offset))]
        group += [(passages[i][0], None) for i in distractors[:negatives]]
        out.append((qa["question"], group))
    return out


def training_run(args):
    """Seeds torch and Python from --seed, sets --threads, and returns the --train articles without the last
    --holdout-articles (the held-out sets) and the seeded random generator."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    with open(args.train, encoding="utf-8") as f:
        articles = json.load(f)["data"][:-args.holdout_articles]
    return articles, random.Random(args.seed)


def linear_schedule(optimizer, steps, warmup):
    """Learning rate: linear warm-up over `warmup` steps, then linear decay to 0 at `steps`."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))


def encode(tok, batch, max_length):
    """Tokenised passages of a batch of groups, with targets and masks."""
    questions = [q for q, group in batch for _ in group]
    texts = [text for _, group in batch for text, _ in group]
    enc = tok(questions, texts, truncation="only_second", max_length=max_length, padding=True,
              return_offsets_mapping=True, return_tensors="pt")
    n = len(texts)
    starts, ends = torch.zeros(n, dtype=torch.long), torch.zeros(n, dtype=torch.long)
    context = torch.zeros_like(enc["input_ids"], dtype=torch.bool)
    row, keep = 0, []
    for _, group in batch:
        ok = True
        for _, span in group:
            seq = enc.sequence_ids(row)
            tokens = [t for t, s in enumerate(seq) if s == 1]
            context[row, tokens] = True
            if span is not None:
                offsets = enc["offset_mapping"][row]
                first = [t for t in tokens if offsets[t][1] > span[0]]
                last = [t for t in tokens if offsets[t][0] < span[1]]
                if not first or not last or first[0] > last[-1]:
                    ok = False  # the answer was truncated away
                else:
                    starts[row], ends[row] = first[0], last[-1]
            row += 1
        keep.append(ok)
    enc.pop("offset_mapping")
    return enc, starts, ends, context, keep


def loss_of(start_logits, end_logits, starts, ends, context, group_sizes, negative_weight):
    """Per-passage cross-entropy plus the shared-normalisation term (see the module docstring)."""
    allowed = context.clone()
    allowed[:, 0] = True
    neg_inf = torch.finfo(start_logits.dtype).min
    per_passage, shared = [], []
    row = 0
    for size in group_sizes:
        rows = slice(row, row + size)
        for logits, target in ((start_logits, starts), (end_logits, ends)):
            masked = logits[rows].masked_fill(~allowed[rows], neg_inf)
            ce = torch.nn.functional.cross_entropy(masked, target[rows], reduction="none")
            weights = torch.full((size,), negative_weight / max(1, size - 1))
            weights[0] = 1.0
            per_passage.append((ce * weights).sum())
            relative = (logits[rows] - logits[rows, :1]).masked_fill(~context[rows], neg_inf).reshape(-1)
            # The answer passage is the group's first, so its target indexes the flattened logits directly.
            shared.append(-torch.log_softmax(relative, dim=0)[target[row]])
        row += size
    groups_n = len(group_sizes)
    return (torch.stack(per_passage).sum() + torch.stack(shared).sum()) / (2 * groups_n)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=READER)
    parser.add_argument("--train", default=TRAIN)
    parser.add_argument("--out", required=True)
    parser.add_argument("--holdout-articles", type=int, default=60)
    parser.add_argument("--questions", type=int, default=3000)
    parser.add_argument("--negatives", type=int, default=3)
    parser.add_argument("--negative-weight", type=float, default=0.25)
    parser.add_argument("--batch", type=int, default=8, help="questions per step")
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    articles, rng = training_run(args)
    passages, by_paragraph = passages_of(articles)
    data = groups(articles, passages, by_paragraph, args.questions, args.negatives, rng)
    print(f"{len(articles)} articles, {len(passages)} passages, {len(data)} questions x {1 + args.negatives} passages",
          flush=True)

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForQuestionAnswering.from_pretrained(args.model, torch_dtype=torch.float32)
    model.train()
    steps = math.ceil(len(data) / args.batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = linear_schedule(optimizer, steps, warmup=max(1, steps // 20))
    began, running = time.time(), None
    for step in range(steps):
        batch = data[step * args.batch:(step + 1) * args.batch]
        enc, starts, ends, context, keep = encode(tok, batch, args.max_length)
        if not all(keep):  # rare: drop groups whose answer fell past max_length, re-encode the rest
            batch = [g for g, ok in zip(batch, keep) if ok]
            if not batch:
                continue
            enc, starts, ends, context, _ = encode(tok, batch, args.max_length)
        out = model(**enc)
        loss = loss_of(out.start_logits, out.end_logits, starts, ends, context,
                       [len(g) for _, g in batch], args.negative_weight)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        if step % 20 == 0 or step == steps - 1:
            rate = (step + 1) / (time.time() - began)
            print(f"step {step + 1}/{steps} loss {running:.3f} {rate * args.batch:.1f} questions/s "
                  f"eta {(steps - step - 1) / rate / 60:.1f} min", flush=True)

    os.makedirs(args.out, exist_ok=True)
    model.half().save_pretrained(args.out, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if os.path.exists(os.path.join(args.model, name)):
            shutil.copy(os.path.join(args.model, name), os.path.join(args.out, name))
    print(f"wrote {args.out} ({(time.time() - began) / 60:.1f} min)")


if __name__ == "__main__":
    main()

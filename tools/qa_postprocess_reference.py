#!/usr/bin/env python3
"""A from-scratch re-implementation of the transformers question-answering pipeline's post-processing
(numpy only, no transformers), written from tools/HF_PIPELINE_NOTES.md, and a check that it reproduces the
pipeline answers stored in the tiny checkpoints' expected.json files.

    PY=$(bash tools/setup-hf.sh | tail -1)      # any python with numpy works
    $PY tools/qa_postprocess_reference.py [crates/lector-models/tests/fixtures]

Input per window (as stored in expected.json): start/end logits, p_mask, attention_mask, offsets, word_ids,
sequence_ids. It is the executable form of the notes: windows -> masked float32 softmax -> null score ->
decode_spans (top 2*top_k+10) -> word alignment -> case-insensitive merge -> sort.
"""
import json
import os
import sys

import numpy as np


def softmax_masked(logits, allowed):
    x = np.asarray(logits, dtype=np.float32)[None, :]
    x = np.where(allowed[None, :] == 0, np.float32(-10000.0), x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum()


def decode_spans(start, end, topk, max_answer_len, allowed):
    outer = np.matmul(np.expand_dims(start, -1), np.expand_dims(end, 1))
    candidates = np.tril(np.triu(outer), max_answer_len - 1)
    flat = candidates.flatten()
    if topk == 1:
        idx = [np.argmax(flat)]
    elif len(flat) < topk:
        idx = np.argsort(-flat)
    else:
        idx = np.argpartition(-flat, topk)[0:topk]
        idx = idx[np.argsort(-flat[idx])]
    starts, ends = np.unravel_index(idx, candidates.shape)[1:]
    ok = allowed.nonzero()[0]
    keep = np.isin(starts, ok) & np.isin(ends, ok)
    starts, ends = starts[keep], ends[keep]
    return starts, ends, candidates[0, starts, ends]


def word_chars(window, word):
    """Encoding.word_to_chars(word, sequence_index=1) restricted to this window's tokens."""
    toks = [i for i, (w, s) in enumerate(zip(window["word_ids"], window["sequence_ids"])) if w == word and s == 1]
    if not toks:
        raise KeyError(word)
    return window["offsets"][toks[0]][0], window["offsets"][toks[-1]][1]


def token_chars(window, s, e):
    try:
        ws, we = window["word_ids"][s], window["word_ids"][e]
        if ws is None or we is None:
            raise KeyError
        return word_chars(window, ws)[0], word_chars(window, we)[1]
    except KeyError:
        return window["offsets"][s][0], window["offsets"][e][1]


def answer(context, windows, top_k=1, handle_impossible_answer=False, max_answer_len=15, align_to_words=True):
    min_null = 1000000.0
    answers = []
    pre_topk = top_k * 2 + 10 if align_to_words else top_k
    for w in windows:
        allowed = (1 - np.asarray(w["p_mask"])) & np.asarray(w["attention_mask"])
        start = softmax_masked(w["start_logits"], allowed)
        end = softmax_masked(w["end_logits"], allowed)
        if handle_impossible_answer:
            min_null = min(min_null, (start[0, 0] * end[0, 0]).item())
        start[0, 0] = end[0, 0] = 0.0
        for s, e, score in zip(*decode_spans(start, end, pre_topk, max_answer_len, allowed)):
            cs, ce = token_chars(w, int(s), int(e)) if align_to_words else (w["offsets"][s][0], w["offsets"][e][1])
            text = context[cs:ce]
            hit = next((a for a in answers if a["answer"].lower() == text.lower()), None)
            if hit:
                hit["score"] += score.item()
            else:
                answers.append({"score": score.item(), "start": cs, "end": ce, "answer": text})
    if handle_impossible_answer:
        answers.append({"score": min_null, "start": 0, "end": 0, "answer": ""})
    answers = sorted(answers, key=lambda a: a["score"], reverse=True)[:top_k]
    return answers, (min_null if handle_impossible_answer else None)


def same(got, want, tol=1e-9):
    return (got["answer"], got["start"], got["end"]) == (want["answer"], want["start"], want["end"]) and \
        abs(got["score"] - want["score"]) <= tol * max(1.0, abs(want["score"]))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "crates/lector-models/tests/fixtures"
    checked = failed = 0
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "expected.json")
        if not os.path.exists(path):
            continue
        exp = json.load(open(path, encoding="utf-8"))
        p = exp["params"]
        for case in exp["cases"]:
            ctx, wins = case["context"], case["windows"]
            got1, _ = answer(ctx, wins, 1, False, p["max_answer_len"])
            got3, _ = answer(ctx, wins, 3, False, p["max_answer_len"])
            goti, null = answer(ctx, wins, 1, True, p["max_answer_len"])
            res = [same(got1[0], case["pipeline"]),
                   len(got3) == len(case["pipeline_top3"]) and all(same(a, b) for a, b in zip(got3, case["pipeline_top3"])),
                   same(goti[0], case["pipeline_impossible"]),
                   abs(null - case["pipeline_impossible"]["null_score"]) <= 1e-9 * max(1e-30, null)]
            checked += 1
            if not all(res):
                failed += 1
                print("MISMATCH", name, case["name"], res, got1[0], case["pipeline"], file=sys.stderr)
    print(f"{checked - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

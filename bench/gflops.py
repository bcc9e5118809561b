#!/usr/bin/env python3
"""GFLOP/s of the reader's encoder against a plain matrix product on the same machine.

    <hf-python> bench/gflops.py count [--limit 2000] [--batch-size 8]   # FLOPs of the first N SQuAD v1.1 dev questions
    <hf-python> bench/gflops.py matmul [--tokens 2048] [--threads 2]    # torch's GFLOP/s on the model's linear shapes

Run with the interpreter of tools/setup-hf.sh (tokenizers, torch); bench/reader_speed.py calls both, runs
examples/matmul_speed.rs for candle's side, and prints everything side by side.

FLOPs are counted from the checkpoint's shapes (config.json) and the real token counts of the windows both
readers cut (max_seq_len 384, doc_stride 128: the pipeline's defaults), 2 FLOPs per multiply-add:
per layer, the linear layers do 2 * tokens * (4 h^2 + 2 h i) (fused QKV, attention output, feed-forward) and
attention 4 * len^2 * h per window (scores and weighted values). LayerNorm, softmax, GELU, embeddings and the
QA head (well under 1%) are not counted. `executed` is what a reader that pads each batch of `batch_size`
consecutive windows to its longest (the pipeline) computes; lector runs only the real tokens.
"""
import argparse
import json
import os
import statistics
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "squad", "dev-v1.1.json")
MODEL = os.path.join(ROOT, "models", "reader-minilm-squad")


def model_shape(model):
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    return cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]


def window_lengths(model, data, limit, max_seq_len=384, doc_stride=128):
    """Tokens of every window of the first `limit` questions, in order ([CLS] q [SEP] window [SEP])."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    special = tok.post_processor.num_special_tokens_to_add(True) if tok.post_processor else 0
    with open(data) as f:
        pairs = [(qa["question"], p["context"]) for a in json.load(f)["data"] for p in a["paragraphs"]
                 for qa in p["qas"]][:limit]
    lengths = []
    for question, context in pairs:
        q = len(tok.encode(question, add_special_tokens=False).ids)
        n = len(tok.encode(context, add_special_tokens=False).ids)
        room = max_seq_len - q - special
        start = 0
        while True:
            stop = min(start + room, n)
            lengths.append(q + special + stop - start)
            if stop == n:
                break
            start += room - doc_stride
    return lengths


def encoder_flops(lengths, shape):
    h, i, layers = shape
    linear = 2 * sum(lengths) * (4 * h * h + 2 * h * i)
    attention = sum(4 * n * n * h for n in lengths)
    return layers * (linear + attention)


def count(args):
    shape = model_shape(args.model)
    lengths = window_lengths(args.model, args.data, args.limit)
    padded = []
    for b in range(0, len(lengths), args.batch_size):
        batch = lengths[b:b + args.batch_size]
        padded += [max(batch)] * len(batch)
    print(json.dumps({"questions": args.limit, "windows": len(lengths), "tokens": sum(lengths),
                      "padded_tokens": sum(padded), "gflop": encoder_flops(lengths, shape) / 1e9,
                      "executed_gflop": encoder_flops(padded, shape) / 1e9}))


def matmul(args):
    """torch.nn.functional.linear (bias included, as the model calls it) on each linear layer's shape."""
    import torch
    torch.set_num_threads(args.threads)
    h, i, _ = model_shape(args.model)
    for layer, k, n in [("qkv", h, 3 * h), ("attn_out", h, h), ("ffn_in", h, i), ("ffn_out", i, h)]:
        x, w, b = torch.rand(args.tokens, k), torch.rand(n, k), torch.rand(n)
        torch.nn.functional.linear(x, w, b)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(5):
                torch.nn.functional.linear(x, w, b)
            times.append((time.perf_counter() - start) / 5)
        gflops = 2 * args.tokens * k * n / statistics.median(times) / 1e9
        print(json.dumps({"layer": layer, "m": args.tokens, "k": k, "n": n, "threads": args.threads,
                          "torch_gflops": round(gflops, 1)}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["count", "matmul"])
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    count(args) if args.what == "count" else matmul(args)


if __name__ == "__main__":
    main()

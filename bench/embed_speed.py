#!/usr/bin/env python3
"""Benchmark: `lector models embed` vs sentence-transformers (torch, CPU) on the same model and texts.

all-MiniLM-L6-v2 (the registry's embedder), the first N SciFact abstracts (title + text, as the index embeds
them), max 256 tokens, batch 32, the same threads on both sides. The sides take turns, the order reversed every
other round (bench/rounds.py); prints each side's min / median / max and the load at each start, texts/s (model loading
excluded on both sides), the median over rounds, the ratio, and how far the two sets of vectors agree.

    python3 bench/embed_speed.py [--texts 2000] [--threads 2] [--rounds 3] [--precisions f32,bf16]
                                 [--peer-precisions f32,bf16] [--passage-words 100]

`--passage-words N` embeds passages instead of whole abstracts: each abstract cut into runs of whole sentences
of at most N words, each with its title, as `lector index add --dense` embeds a corpus (the splitter here is a
plain regular expression on sentence-final punctuation; lector's chunker uses UAX #29 sentences).

`--precisions` runs lector once per listed `--precision` in every round (bf16: bfloat16 products);
`--peer-precisions` likewise sentence-transformers (bf16: torch.autocast on the CPU). Ratios are printed
against each peer run and against the fastest. `--ort f32,int8` adds ONNX Runtime peers (tools/ort_qa.py: the
encoder exported to ONNX, float32 or dynamically quantized to int8, batched and pooled as sentence-transformers
does; installed by tools/setup-ort.sh); their vectors are compared with sentence-transformers' float32 ones.

The sentence-transformers side runs in the environment of tools/setup-hf.sh.
Under `LECTOR_SIMD=avx2` the peer is capped at AVX2 as well (bench/cpu.py: ATen, MKL, oneDNN), so both sides run
what an AVX2-only CPU runs; the CPU line printed first says so.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

import cpu
import rounds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "..", "shared", "data", "beir", "scifact", "corpus.jsonl")

PEER = r"""
import json, sys, time
import numpy as np, torch
from sentence_transformers import SentenceTransformer, models
model_dir, texts_path, out, threads, batch, precision = sys.argv[1:7]
torch.set_num_threads(int(threads))
encoder = models.Transformer(model_dir, max_seq_length=256)
pooling = models.Pooling(encoder.get_word_embedding_dimension(), pooling_mode="mean")
model = SentenceTransformer(modules=[encoder, pooling, models.Normalize()], device="cpu")
texts = []
for line in open(texts_path, encoding="utf-8"):
    d = json.loads(line)
    texts.append((d["title"] + " " + d["text"]).strip())
# bf16: torch's CPU autocast (linear layers in bfloat16, softmax and LayerNorm in float32, as lector's bf16).
autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
with autocast:
    model.encode(texts[:64], batch_size=int(batch))  # warm-up, as lector's first batch is not timed apart
    start = time.perf_counter()
    vectors = model.encode(texts, batch_size=int(batch), convert_to_tensor=True)
    seconds = time.perf_counter() - start
np.save(out, vectors.float().cpu().numpy())
print(json.dumps({"texts": len(texts), "seconds": seconds, "texts_per_second": len(texts) / seconds}))
"""

# ONNX Runtime (tools/ort_qa.py): the encoder exported to ONNX, float32 or dynamically quantized to int8, run as
# sentence-transformers runs it: texts sorted by length, batches padded to their longest text (at most 256
# tokens), mean pooling over the real tokens, unit length.
PEER_ORT = r"""
import json, os, sys, time
import numpy as np, torch
from transformers import AutoModel, AutoTokenizer
model_dir, texts_path, out, threads, batch, runtime, tools = sys.argv[1:8]
sys.path.insert(0, tools)
import ort_qa
torch.set_num_threads(int(threads))
tokenizer = AutoTokenizer.from_pretrained(model_dir)
path = ort_qa.model_file(AutoModel.from_pretrained(model_dir), tokenizer, model_dir, runtime, ("last_hidden_state",))
session = ort_qa.session(path, int(threads))
names = [i.name for i in session.get_inputs()]
texts = []
for line in open(texts_path, encoding="utf-8"):
    d = json.loads(line)
    texts.append((d["title"] + " " + d["text"]).strip())

def encode(texts):
    order = np.argsort([-len(t) for t in texts], kind="stable")
    vectors = np.zeros((len(texts), 384), dtype=np.float32)
    for first in range(0, len(texts), int(batch)):
        ids = order[first:first + int(batch)]
        enc = tokenizer([texts[i] for i in ids], padding=True, truncation=True, max_length=256, return_tensors="np")
        hidden = session.run(["last_hidden_state"], {n: enc[n].astype(np.int64) for n in names})[0]
        mask = enc["attention_mask"][..., None].astype(np.float32)
        mean = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        vectors[ids] = mean / np.clip(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12, None)
    return vectors

encode(texts[:64])  # warm-up, as for the other sides
start = time.perf_counter()
vectors = encode(texts)
seconds = time.perf_counter() - start
np.save(out, vectors)
print(json.dumps({"texts": len(texts), "seconds": seconds, "texts_per_second": len(texts) / seconds}))
"""

AGREE = r"""
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
cos = (a * b).sum(axis=1)
print(f"{cos.min():.6f} {np.abs(a - b).max():.2e} {cos.mean():.6f}")
"""


def passages(text, words):
    """`text` cut into runs of whole sentences of at most `words` words (a longer sentence alone)."""
    out, current = [], []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        n = len(sentence.split())
        if current and sum(len(s.split()) for s in current) + n > words:
            out.append(" ".join(current))
            current = []
        current.append(sentence)
    if current:
        out.append(" ".join(current))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precisions", default="f32", help="lector's --precision values to run, e.g. f32,bf16")
    parser.add_argument("--peer-precisions", default="f32", help="sentence-transformers precisions, e.g. f32,bf16")
    parser.add_argument("--lector", help="use this lector binary instead of building the release one")
    parser.add_argument("--ort", default="", help="ONNX Runtime peers to add: f32, int8 or f32,int8")
    parser.add_argument("--passage-words", type=int, default=0,
                        help="embed the abstracts cut into passages of at most this many words on sentence "
                             "boundaries, as `lector index add` embeds a corpus (0: whole abstracts)")
    args = parser.parse_args()
    capped = cpu.cap_peers()
    print(f"CPU: {cpu.line()}", flush=True)
    precisions = args.precisions.split(",")
    peers = [f"sentence-transformers {p}" for p in args.peer_precisions.split(",")]
    ort = [f"onnxruntime {p}" for p in args.ort.split(",") if p]
    if ort and capped:
        print("note: ONNX Runtime has no switch for its instruction sets: its rows use every extension of this CPU")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    lector = args.lector or os.path.join(target, "release", "lector")
    if not args.lector:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "lector-cli"], check=True, cwd=ROOT)
    setup = "setup-ort.sh" if ort else "setup-hf.sh"
    python = subprocess.run(["bash", os.path.join(ROOT, "tools", setup)], check=True, capture_output=True,
                            text=True).stdout.strip().splitlines()[-1]
    model_dir = subprocess.run([lector, "models", "pull", "embedder"], check=True, capture_output=True,
                               text=True).stdout.split(": ", 1)[1].strip()
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as tmp:
        texts = os.path.join(tmp, "texts.jsonl")
        count = 0
        with open(CORPUS, encoding="utf-8") as src, open(texts, "w", encoding="utf-8") as dst:
            for line in src:
                d = json.loads(line)
                pieces = passages(d["text"], args.passage_words) if args.passage_words else [d["text"]]
                for piece in pieces[:args.texts - count]:
                    dst.write(json.dumps({"title": d.get("title", ""), "text": piece}) + "\n")
                    count += 1
                if count == args.texts:
                    break
        ours = {p: os.path.join(tmp, f"lector-{p}.npy") for p in precisions}
        theirs = {peer: os.path.join(tmp, f"st-{peer.split()[-1]}.npy") for peer in peers}
        others = {peer: os.path.join(tmp, f"ort-{peer.split()[-1]}.npy") for peer in ort}
        def lector_side(p):
            def run():
                out = subprocess.run([lector, "models", "embed", texts, "--out", ours[p], "--json", "--precision", p],
                                     check=True, capture_output=True, text=True, env=env).stdout
                rate = json.loads(out)["texts_per_second"]
                print(f"lector {p}: {rate:.1f} texts/s", flush=True)
                return {"rate": rate}
            return run

        def peer_side(peer):
            def run():
                out = subprocess.run([python, "-c", PEER, model_dir, texts, theirs[peer], str(args.threads), "32",
                                      peer.split()[-1]], check=True, capture_output=True, text=True, env=env).stdout
                rate = json.loads(out.strip().splitlines()[-1])["texts_per_second"]
                print(f"{peer}: {rate:.1f} texts/s", flush=True)
                return {"rate": rate}
            return run

        def ort_side(peer):
            def run():
                runtime = "onnx" if peer.endswith("f32") else "onnx-int8"
                out = subprocess.run([python, "-c", PEER_ORT, model_dir, texts, others[peer], str(args.threads), "32",
                                      runtime, os.path.join(ROOT, "tools")], check=True, capture_output=True,
                                     text=True, env=env).stdout
                rate = json.loads(out.strip().splitlines()[-1])["texts_per_second"]
                print(f"{peer}: {rate:.1f} texts/s", flush=True)
                return {"rate": rate}
            return run

        sides = {**{f"lector {p}": lector_side(p) for p in precisions}, **{peer: peer_side(peer) for peer in peers},
                 **{peer: ort_side(peer) for peer in ort}}
        # The sides take turns, the order reversed every other round (bench/rounds.py).
        turns = rounds.alternate(sides, args.rounds)
        rates = {name: [r["rate"] for r in rs] for name, rs in turns.items()}
        # Agreement with the float32 peer when it ran (the reference numbers), else the first.
        reference = theirs.get("sentence-transformers f32", theirs[peers[0]])
        runs = {**{f"lector {p}": ours[p] for p in precisions}, **theirs, **others}
        agree = {name: subprocess.run([python, "-c", AGREE, path, reference], check=True, capture_output=True,
                                      text=True).stdout.split() for name, path in runs.items()}
    med = {k: statistics.median(v) for k, v in rates.items()}
    unit = f"passages of <= {args.passage_words} words" if args.passage_words else "abstracts"
    print(f"\n{args.texts} SciFact {unit}, all-MiniLM-L6-v2, {args.threads} threads, batch 32, "
          f"median of {args.rounds} rounds")
    print(f"{'system':<24}{'texts/s':>10}")
    for name, rate in med.items():
        print(f"{name:<24}{rate:>10.1f}")
    fastest = max(peers, key=med.get)
    print(f"\n{args.rounds} alternating rounds, load average at each start; ratios against {fastest}:")
    print(rounds.table(rounds.summary(turns, fastest), "texts/s", fastest))
    for name in rates:
        print(f"{name}: min cosine {agree[name][0]} (mean {agree[name][2]}), max |diff| {agree[name][1]} "
              "against the float32 peer")
    for p in precisions:
        ratios = ", ".join(f"{med[f'lector {p}'] / med[peer]:.2f}x vs {peer}" for peer in peers + ort)
        print(f"lector {p}: {ratios}; {med[f'lector {p}'] / med[fastest]:.2f}x vs the fastest peer ({fastest})")


if __name__ == "__main__":
    main()

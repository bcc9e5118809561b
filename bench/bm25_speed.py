#!/usr/bin/env python3
"""Benchmark: lector's BM25 index vs `bm25s` on BEIR SciFact, side by side.

Both index title + text with Lucene BM25 (k1 1.2, b 0.75) and English stopwords; lector also stems (Porter2)
and cuts documents into ~100-word passages, bm25s indexes whole documents. Prints index build time (lector:
`lector index add` wall time including reading the corpus and the durable commit; bm25s: tokenize + index in
process, import excluded), per-query latency p50/p95 over the 300 test queries (lector: the retrieval time
`lector eval retrieval --index` reports, MaxP document ranking of depth 1000 included; bm25s: tokenize +
retrieve top 1000 per query), the medians over rounds, the ratios, and nDCG@10 of both.

    python3 bench/bm25_speed.py [--rounds 5] [--lector BIN]

The sides take turns, the order reversed every other round (bench/rounds.py), and the per-side spread of the
p50 rate and the load at each start are printed.

bm25s runs in its own cached environment (~/.cache/lector/bench-bm25s).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

import rounds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEIR = os.path.join(ROOT, "..", "shared", "data", "beir", "scifact")
VENV = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "lector", "bench-bm25s")

PEER = r"""
import json, os, sys, time
import bm25s, numpy as np
beir, run_out = sys.argv[1:3]
read = lambda p: [json.loads(l) for l in open(p, encoding="utf-8") if l.strip()]
corpus = read(os.path.join(beir, "corpus.jsonl"))
queries = read(os.path.join(beir, "queries.jsonl"))
judged = {l.split("\t")[0] for l in list(open(os.path.join(beir, "qrels", "test.tsv")))[1:]}
queries = [q for q in queries if q["_id"] in judged]
start = time.perf_counter()
texts = [(d.get("title", "") + " " + d["text"]).strip() for d in corpus]
retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
build = time.perf_counter() - start
ids = [d["_id"] for d in corpus]
latencies = []
with open(run_out, "w") as out:
    for q in queries:
        t = time.perf_counter()
        tokens = bm25s.tokenize([q["text"]], stopwords="en", show_progress=False)
        docs, scores = retriever.retrieve(tokens, k=1000, show_progress=False, n_threads=1)
        latencies.append((time.perf_counter() - t) * 1000)
        for rank, (d, s) in enumerate(zip(docs[0], scores[0]), start=1):
            out.write(f"{q['_id']} Q0 {ids[d]} {rank} {s:.6f} bm25s\n")
latencies.sort()
at = lambda f: latencies[round((len(latencies) - 1) * f)]
print(json.dumps({"build_s": build, "p50_ms": at(0.5), "p95_ms": at(0.95)}))
"""


def peer_python():
    python = os.path.join(VENV, "bin", "python")
    stamp = os.path.join(VENV, ".lector-bm25s-v1")
    if not os.path.exists(stamp):
        subprocess.run(["python3", "-m", "venv", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "bm25s==0.3.16",
                        "numpy==2.3.5", "scipy==1.16.3"], check=True)
        open(stamp, "w").close()
    return python


def ndcg10(lector, run, qrels):
    out = subprocess.run([lector, "eval", "retrieval", "--run", run, "--qrels", qrels, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["ndcg@10"]["mean"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lector", help="use this lector binary instead of building the release one")
    args = parser.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    lector = args.lector or os.path.join(target, "release", "lector")
    if not args.lector:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "lector-cli"], check=True, cwd=ROOT)
    python = peer_python()
    corpus, queries = os.path.join(BEIR, "corpus.jsonl"), os.path.join(BEIR, "queries.jsonl")
    qrels = os.path.join(BEIR, "qrels", "test.tsv")
    with tempfile.TemporaryDirectory() as tmp:
        index, ours, theirs = (os.path.join(tmp, n) for n in ("index", "lector.trec", "bm25s.trec"))

        def lector_side():
            shutil.rmtree(index, ignore_errors=True)
            start = time.perf_counter()
            subprocess.run([lector, "index", "add", corpus, "--index", index], check=True, capture_output=True)
            build = time.perf_counter() - start
            err = subprocess.run([lector, "eval", "retrieval", "--index", index, "--queries", queries, "--qrels",
                                  qrels, "--mode", "bm25", "--run-out", ours, "--json"], check=True,
                                 capture_output=True, text=True).stderr
            p50, p95 = map(float, re.search(r"p50 ([\d.]+) ms, p95 ([\d.]+) ms", err).groups())
            print(f"lector: build {build:.2f} s, p50 {p50:.3f} ms", flush=True)
            return {"rate": 1000.0 / p50, "build": build, "p50": p50, "p95": p95}

        def peer_side():
            out = subprocess.run([python, "-c", PEER, BEIR, theirs], check=True, capture_output=True,
                                 text=True).stdout
            peer = json.loads(out.strip().splitlines()[-1])
            print(f"bm25s: build {peer['build_s']:.2f} s, p50 {peer['p50_ms']:.3f} ms", flush=True)
            return {"rate": 1000.0 / peer["p50_ms"], "build": peer["build_s"], "p50": peer["p50_ms"],
                    "p95": peer["p95_ms"]}

        # The sides take turns, the order reversed every other round (bench/rounds.py).
        turns = rounds.alternate({"lector": lector_side, "bm25s": peer_side}, args.rounds)
        rows = {name: [(r["build"], r["p50"], r["p95"]) for r in runs] for name, runs in turns.items()}
        quality = {"lector": ndcg10(lector, ours, qrels), "bm25s": ndcg10(lector, theirs, qrels)}
    med = {name: [statistics.median(r[i] for r in runs) for i in range(3)] for name, runs in rows.items()}
    print(f"\nSciFact (5,183 abstracts, 300 test queries), median of {args.rounds} rounds")
    print(f"{'system':<10}{'build s':>10}{'p50 ms':>10}{'p95 ms':>10}{'nDCG@10':>10}")
    for name, (build, p50, p95) in med.items():
        print(f"{name:<10}{build:>10.2f}{p50:>10.3f}{p95:>10.3f}{quality[name]:>10.4f}")
    l, b = med["lector"], med["bm25s"]
    print(f"speed-up lector vs bm25s: build {b[0] / l[0]:.2f}x, p50 {b[1] / l[1]:.2f}x, p95 {b[2] / l[2]:.2f}x")
    print(f"\n{args.rounds} alternating rounds, queries/s at the p50 latency, load average at each start:")
    print(rounds.table(rounds.summary(turns, "bm25s"), "queries/s at p50", "bm25s"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a TREC run of BM25 (the `bm25s` package, Lucene variant, k1=1.2, b=0.75) over a BEIR corpus.

A real third-party retrieval run to evaluate with `lector eval retrieval`, and the BM25 peer of the
retrieval benchmarks. Indexes title + text, English stopwords, no stemming.

    python bench/bm25s_run.py ../shared/data/beir/scifact --k 100 --out scifact-bm25s.trec
"""
import argparse
import json
import os

import bm25s


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("beir_dir")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    corpus = read_jsonl(os.path.join(args.beir_dir, "corpus.jsonl"))
    queries = read_jsonl(os.path.join(args.beir_dir, "queries.jsonl"))
    with open(os.path.join(args.beir_dir, "qrels", "test.tsv")) as f:
        judged = {line.split("\t")[0] for line in list(f)[1:]}
    queries = [q for q in queries if q["_id"] in judged]
    doc_ids = [d["_id"] for d in corpus]
    texts = [(d.get("title", "") + " " + d["text"]).strip() for d in corpus]
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize([q["text"] for q in queries], stopwords="en", show_progress=False)
    results, scores = retriever.retrieve(tokens, k=args.k, show_progress=False)
    with open(args.out, "w") as out:
        for q, docs, doc_scores in zip(queries, results, scores):
            for rank, (d, s) in enumerate(zip(docs, doc_scores), start=1):
                out.write(f"{q['_id']} Q0 {doc_ids[d]} {rank} {s:.6f} bm25s\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""BM25 scores from bm25s, the independent reference lector-index's BM25 is tested against.

Reads one JSON object on stdin:

    {"k1": 1.2, "b": 0.75, "k": 100,
     "passages": [["term", ...], ...],   # the analysed terms of every passage, in index order
     "queries": [["term", ...], ...]}    # the analysed terms of every query (repeats kept)

and writes, for each query, its best `k` passages with a positive score as
[[passage_number, score], ...], best first (ties by passage number), one JSON list in all.

Tokenisation is the caller's: both sides see exactly the same terms, so any difference is in
the scoring. bm25s's "lucene" method is Lucene's BM25 (idf ln(1 + (N - df + 0.5) / (df + 0.5)),
tf / (tf + k1 (1 - b + b |d| / avgdl))), computed here in float64.
"""
import json
import sys

import bm25s
import numpy as np


def build(passages, k1, b):
    vocab = {}
    ids = [[vocab.setdefault(term, len(vocab)) for term in terms] for terms in passages]
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64", int_dtype="int64")
    retriever.index((ids, vocab), show_progress=False)
    return retriever


def best(retriever, query, k):
    ids = retriever.get_tokens_ids(query)
    scores = retriever.get_scores_from_ids(ids)
    positive = np.flatnonzero(scores > 0)
    # Best first, ties by passage number: lexsort sorts by its last key first.
    order = positive[np.lexsort((positive, -scores[positive]))][:k]
    return [[int(p), float(scores[p])] for p in order]


def main():
    request = json.load(sys.stdin)
    retriever = build(request["passages"], request["k1"], request["b"])
    results = [best(retriever, query, request["k"]) for query in request["queries"]]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()

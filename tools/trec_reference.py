#!/usr/bin/env python3
"""Reference retrieval metrics from pytrec_eval (pytrec-eval-terrier 0.5.11), for lector's parity tests.

Usage: trec_reference.py QRELS RUN [--ks 1,3,5,10,20,100]

QRELS is a TREC qrels file (qid iter docid rel) or a BEIR tsv (query-id, corpus-id, score, with a
header line); RUN is a TREC run file (qid Q0 docid rank score tag). Prints one JSON object:

  {"queries": {qid: {metric: value}}, "means": {metric: value},
   "run_qids_without_qrels": [...], "qrels_qids_without_run": [...]}

with lector's metric names: ndcg@k (ndcg_cut.k), recall@k (recall.k), p@k (P.k), map, mrr
(recip_rank) and mrr@k (recip_rank on the run cut to its top k, ranked as trec_eval ranks: score
descending, ties by docid descending).
"""

import argparse
import json

import pytrec_eval


def read_qrels(path):
    qrels = {}
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    beir = len(lines[0].split("\t")) == 3
    if beir:
        try:
            int(lines[0].split("\t")[2])
        except ValueError:
            lines = lines[1:]
    for line in lines:
        if beir:
            qid, docid, rel = (x.strip() for x in line.split("\t"))
        else:
            qid, _, docid, rel = line.split()
        assert docid not in qrels.setdefault(qid, {}), (qid, docid)
        qrels[qid][docid] = int(rel)
    return qrels


def read_run(path):
    run = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            qid, _, docid, _, score, _ = line.split()
            assert docid not in run.setdefault(qid, {}), (qid, docid)
            run[qid][docid] = float(score)
    return run


def cut(run, k):
    """The run limited to each query's top k documents in trec_eval order."""
    out = {}
    for qid, docs in run.items():
        ranked = sorted(docs.items(), key=lambda d: (d[1], d[0].encode("utf-8")), reverse=True)
        out[qid] = dict(ranked[:k])
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("qrels")
    parser.add_argument("run")
    parser.add_argument("--ks", default="1,3,5,10,20,100")
    args = parser.parse_args()
    ks = sorted({int(k) for k in args.ks.split(",")})
    ks_text = ",".join(str(k) for k in ks)

    qrels = read_qrels(args.qrels)
    run = read_run(args.run)
    measures = {f"ndcg_cut.{ks_text}", f"recall.{ks_text}", f"P.{ks_text}", "map", "recip_rank"}
    full = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    cut_rr = {k: rr.evaluate(cut(run, k)) for k in ks}

    queries = {}
    for qid, values in full.items():
        out = {}
        for k in ks:
            out[f"ndcg@{k}"] = values[f"ndcg_cut_{k}"]
            out[f"recall@{k}"] = values[f"recall_{k}"]
            out[f"p@{k}"] = values[f"P_{k}"]
            out[f"mrr@{k}"] = cut_rr[k][qid]["recip_rank"]
        out["map"] = values["map"]
        out["mrr"] = values["recip_rank"]
        queries[qid] = out

    names = list(next(iter(queries.values())).keys()) if queries else []
    qids = sorted(queries)
    means = {
        name: pytrec_eval.compute_aggregated_measure(name, [queries[q][name] for q in qids])
        for name in names
    }
    print(json.dumps({
        "queries": queries,
        "means": means,
        "run_qids_without_qrels": sorted(set(run) - set(qrels)),
        "qrels_qids_without_run": sorted(set(qrels) - set(run)),
    }))


if __name__ == "__main__":
    main()

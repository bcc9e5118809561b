#!/usr/bin/env python3
"""Benchmark: lector from Python (its API, and its components in a Haystack pipeline) vs Haystack's
own in-memory BM25 retriever and extractive reader, on the same checkpoint and the same passages.

The first --limit questions of SQuAD v1.1 dev; the corpus is every paragraph of their articles, one
passage each on both sides (lector with --passage-words 1000, Haystack's InMemoryDocumentStore with the
paragraphs as documents). k = 5 passages per question, one question per call, 2 threads (torch) and
2 cores (lector). Each side runs in its own process (peak RSS is its own); model loading and a warm-up
question are excluded. The sides take turns over --rounds rounds (bench/rounds.py: the order reversed
every other round, the load average recorded at each start), so load from other jobs lands on both;
the speed table gives each side's min / median / max questions/s, the ratio of medians and the
per-round ratios. Then questions/s of the median round, the ratio to Haystack, EM/F1 (official SQuAD v1.1 metric),
answers equal to Haystack's, and top-5 retrieval agreement. Then the Python call's overhead over the
Rust call: `Pipeline.ask` wall time minus the stage times lector measures inside Rust, and
`Reader.read_batch` against `lector read --squad` on the gold paragraphs.

    bash bench/setup-haystack.sh          # the environment (prints its interpreter)
    PY=$(bash bench/setup-haystack.sh | tail -1); $PY bench/haystack_peer.py [--limit 300] [--rounds 3] [--lector BIN]
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

from cpu import line as cpu_line
from rounds import alternate, summary, table

# Haystack sends usage telemetry by default; a benchmark reaches nothing beyond this machine.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "reader-minilm-squad")
K = 5


def subset(limit):
    """The first `limit` questions of SQuAD v1.1 dev and the articles they come from."""
    import lector

    data = json.load(open(lector.eval.shared_data("squad/dev-v1.1.json")))
    articles, taken = [], 0
    for article in data["data"]:
        articles.append(article)
        taken += sum(len(p["qas"]) for p in article["paragraphs"])
        if taken >= limit:
            break
    questions = [
        (qa["id"], qa["question"])
        for a in articles
        for p in a["paragraphs"]
        for qa in p["qas"]
    ][:limit]
    return {"version": data["version"], "data": articles}, questions


def asked_only(dataset, questions):
    """The dataset with only the questions asked (the corpus keeps every paragraph)."""
    wanted = {qid for qid, _ in questions}
    return {"version": dataset["version"], "data": [
        {"title": a["title"], "paragraphs": [
            {"context": p["context"], "qas": [qa for qa in p["qas"] if qa["id"] in wanted]} for p in a["paragraphs"]]}
        for a in dataset["data"]]}


def timed(ask, questions):
    """Asks every question; `ask` returns (the answer, "" when abstaining; the best span found)."""
    ask(questions[0][1])  # warm-up (model loading, first allocations)
    answers, best, start = {}, {}, time.perf_counter()
    for qid, question in questions:
        answers[qid], best[qid] = ask(question)
    return {"answers": answers, "best": best, "seconds": time.perf_counter() - start}


def side_haystack(dataset, questions, work):
    import torch
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_integrations.components.readers.transformers import TransformersExtractiveReader

    torch.set_num_threads(2)
    store = InMemoryDocumentStore()
    store.write_documents([
        Document(id=f"{a['title']}#{i}", content=p["context"])
        for a in dataset["data"]
        for i, p in enumerate(a["paragraphs"])
    ])
    qa = Pipeline()
    qa.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=K))
    qa.add_component("reader", TransformersExtractiveReader(model=MODEL, top_k=1, no_answer=False))
    qa.connect("retriever.documents", "reader.documents")
    qa.warm_up()
    retrieved = {}

    def ask(q):
        out = qa.run({"retriever": {"query": q}, "reader": {"query": q}}, include_outputs_from={"retriever"})
        retrieved[q] = [d.id for d in out["retriever"]["documents"]]
        answers = out["reader"]["answers"]
        text = answers[0].data if answers and answers[0].data else ""
        return text, text

    return dict(timed(ask, questions), retrieved=retrieved)


def lector_index(dataset, work):
    import lector

    path = os.path.join(work, "squad-subset.json")
    json.dump(dataset, open(path, "w"))
    index = lector.Index(os.path.join(work, "index"), passage_words=1000)
    if not os.path.exists(index.path):
        index.add(paths=[path])
    return index


def side_lector_haystack(dataset, questions, work):
    from haystack import Pipeline
    from lector.haystack import LectorReader, LectorRetriever

    index = lector_index(dataset, work)
    qa = Pipeline()
    qa.add_component("retriever", LectorRetriever(index=index.path, top_k=K, mode="bm25"))
    qa.add_component("reader", LectorReader(index=index.path, top_k=1))
    qa.connect("retriever.documents", "reader.documents")
    qa.warm_up()
    retrieved = {}

    def ask(q):
        out = qa.run({"retriever": {"query": q}, "reader": {"query": q}}, include_outputs_from={"retriever"})
        retrieved[q] = [d.meta["doc_id"] for d in out["retriever"]["documents"]]
        answers = out["reader"]["answers"]
        spans = [a.data for a in answers if a.data is not None]
        return answers[0].data or "", spans[0] if spans else ""

    return dict(timed(ask, questions), retrieved=retrieved)


def side_lector_api(dataset, questions, work):
    import lector

    pipeline = lector.Pipeline(lector_index(dataset, work), mode="bm25")
    overhead = []

    def ask(q):
        start = time.perf_counter()
        response = pipeline.ask(q, k=K)
        wall = (time.perf_counter() - start) * 1000
        overhead.append((wall, wall - sum(response.timings.values())))
        best = response.candidates[0].text if response.candidates else ""
        return (response.answer.text if response.answer else ""), best

    result = timed(ask, questions)
    overhead = overhead[1:]  # not the warm-up
    start = time.perf_counter()
    batch = pipeline.ask_many([q for _, q in questions], k=K)
    batch_seconds = time.perf_counter() - start
    batch_answers = {qid: r.answer.text if r.answer else "" for (qid, _), r in zip(questions, batch)}
    return dict(
        result,
        **{
        "batch_seconds": batch_seconds,
        "batch_equal": batch_answers == result["answers"],
        "mean_wall_ms": sum(w for w, _ in overhead) / len(overhead),
        "mean_overhead_ms": sum(o for _, o in overhead) / len(overhead),
        "read_pairs": reader_overhead(dataset, questions),
        },
    )


def reader_overhead(dataset, questions):
    """Reader.read_batch on the gold paragraphs, timed from Python (the CLI's figure is added by the parent)."""
    import lector

    wanted = {qid for qid, _ in questions}
    pairs = [
        (qa["question"], p["context"])
        for a in dataset["data"]
        for p in a["paragraphs"]
        for qa in p["qas"]
        if qa["id"] in wanted
    ]
    reader = lector.Reader()
    start = time.perf_counter()  # a first batch after loading, as `lector read` times it
    reader.read_batch(pairs)
    return {"pairs": len(pairs), "seconds": time.perf_counter() - start}


SIDES = {"haystack": side_haystack, "lector-haystack": side_lector_haystack, "lector-api": side_lector_api}


def run_side(name, limit, work):
    out = os.path.join(work, f"{name}.json")
    subprocess.run([sys.executable, __file__, "--side", name, "--limit", str(limit), "--work", work, "--out", out], check=True)
    return json.load(open(out))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="turns each side takes (default 3)")
    parser.add_argument("--lector", help="the lector binary for `lector read` (default: target/release/lector)")
    parser.add_argument("--side", choices=SIDES)
    parser.add_argument("--work")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.side:
        dataset, questions = subset(args.limit)
        result = SIDES[args.side](dataset, questions, args.work)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        json.dump(result, open(args.out, "w"))
        return

    import lector

    dataset, questions = subset(args.limit)
    work = tempfile.mkdtemp(prefix="haystack-peer-")
    lector_index(dataset, work)  # built once, outside the timings
    def turn(name):
        result = run_side(name, args.limit, work)
        return dict(result, rate=len(questions) / result["seconds"])

    runs = alternate({name: (lambda name=name: turn(name)) for name in SIDES}, args.rounds)
    speed = summary(runs, "haystack")
    # The answers of each side's median round (answers do not depend on the round).
    results = {}
    for name, side_runs in runs.items():
        ordered = sorted(side_runs, key=lambda r: r["rate"])
        results[name] = ordered[len(ordered) // 2]
    peer = results["haystack"]
    print(f"CPU: {cpu_line()}; {len(questions)} SQuAD v1.1 dev questions, {sum(len(a['paragraphs']) for a in dataset['data'])} paragraphs, k={K}\n")
    print(f"Speed over {args.rounds} alternating rounds:\n")
    print(table(speed, "questions/s", "haystack"))
    print(f"\nEach side's median round ({args.rounds} rounds):\n")
    gold = asked_only(dataset, questions)
    print("| side | questions/s | vs Haystack | EM / F1 (abstaining) | EM / F1 (best span) | best span equal to Haystack's | abstained | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        answered = lector.eval.squad(gold, r["answers"])
        best = lector.eval.squad(gold, r["best"])
        equal = sum(r["best"][q] == peer["best"][q] for q, _ in questions)
        qps = len(questions) / r["seconds"]
        print(f"| {name} | {qps:.1f} | {qps / (len(questions) / peer['seconds']):.2f}x | "
              f"{answered['exact_match']:.2f} / {answered['f1']:.2f} | {best['exact_match']:.2f} / {best['f1']:.2f} | "
              f"{equal}/{len(questions)} | {sum(not a for a in r['answers'].values())} | {r['peak_rss_mb']:.0f} MB |")
    api = results["lector-api"]
    print(f"| lector-api ask_many (one batch) | {len(questions) / api['batch_seconds']:.1f} | "
          f"{peer['seconds'] / api['batch_seconds']:.2f}x | answers equal to ask's: {api['batch_equal']} | | | |")
    same = [len(set(peer["retrieved"][q]) & set(results["lector-haystack"]["retrieved"][q])) / K for _, q in questions]
    print(f"\ntop-{K} passages shared by Haystack's BM25 and lector's: {100 * sum(same) / len(same):.1f}%")

    print(f"\nPython overhead of Pipeline.ask: {api['mean_overhead_ms']:.3f} ms of {api['mean_wall_ms']:.2f} ms per call "
          f"({100 * api['mean_overhead_ms'] / api['mean_wall_ms']:.2f}%): wall time minus lector's own stage timings")
    binary = args.lector or os.path.join(ROOT, "target", "release", "lector")
    gold_file = os.path.join(work, "asked.json")
    json.dump(gold, open(gold_file, "w"))
    cli = subprocess.run([binary, "read", "--squad", gold_file, "--out", os.path.join(work, "pred.json")],
                         capture_output=True, text=True, check=True)
    cli_seconds = float(re.search(r"questions in ([\d.]+) s", cli.stdout + cli.stderr).group(1))
    py = api["read_pairs"]
    print(f"Reader.read_batch: {py['pairs']} questions in {py['seconds']:.2f} s from Python, "
          f"`lector read --squad` {cli_seconds:.2f} s (ratio {py['seconds'] / cli_seconds:.3f})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The whole feedback loop on SubjQA reviews (issue "Your own questions"): serve, log, sample, label, export,
fine-tune, and show on questions nobody labelled that the adapted reader is better; uncertain sampling against
random sampling at the same label budget.

    python3 bench/label_loop.py [--lector target/release/lector] [--budget 200] [--replay 0] [--work DIR]

1. The reviews of `bench/subjqa_split.py` (both parts) become one BM25 index, one document per review.
2. `lector serve --log-queries` runs over it and the *training* part's questions are asked over HTTP, as users
   would (`--replay N` asks only the first N; 0: all). The log is the traffic.
3. For each strategy (uncertain, random), a copy of the log is served and `--budget` questions are labelled by
   script through the routes the labelling page uses: `GET /v1/label/next?sample=...` gives the next question,
   and the labeller answers it from SubjQA's gold answer (its review and character offsets, which are document
   offsets here) with `POST /v1/labels`, or marks it unanswerable.
4. `lector label export` writes the labels as SQuAD v2.0; `lector train reader` fine-tunes the shipped reader on
   them (the transformers QA example's defaults: 2 epochs, lr 3e-5, batch 12, seed 42), `lector calibrate`
   chooses each reader's no-answer threshold on the same labelled file (all a user would have), and both readers
   read the *held-out* reviews' questions (never asked, never labelled) on their gold review.
5. Prints EM/F1 per reader and `lector eval compare` (paired bootstrap) of each adapted reader against the
   shipped one, and of uncertain against random.

Needs the shared data (../shared/data/subjqa) and a lector binary with `label export` (cargo build --release).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lector"
BASE_READER = ROOT / "models" / "reader-minilm-squad"


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), file=sys.stderr)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            text = response.read().decode()
            return response.status, json.loads(text) if text.strip() else None
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read().decode() or "null")


class Server:
    """`lector serve` on a free loopback port, logging into `log`."""

    def __init__(self, lector, index, log):
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen([str(lector), "serve", "--index", str(index), "--read-only",
                                         "--addr", f"127.0.0.1:{port}", "--log-queries", str(log)],
                                        stdout=subprocess.DEVNULL)
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if call(self.base, "GET", "/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.3)
        sys.exit("the server did not start")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=120)


def corpus(split, out):
    """One JSONL document per review of both parts; returns {question id: (doc id, qa)} of the training part."""
    gold = {}
    with open(out, "w") as f:
        for part in ("train", "heldout"):
            data = json.load(open(split / f"{part}.json"))["data"]
            for article in data:
                for i, paragraph in enumerate(article["paragraphs"]):
                    doc_id = f"{part}-{article['title']}-{i}"
                    f.write(json.dumps({"id": doc_id, "title": article["title"],
                                        "text": paragraph["context"]}) + "\n")
                    if part == "train":
                        for qa in paragraph["qas"]:
                            gold[qa["id"]] = (doc_id, qa)
    return gold


def replay(server, gold, limit):
    """Asks the training questions over HTTP; {request_id: question id}."""
    todo = list(gold.items())[: limit or None]
    asked, lock, queue = {}, threading.Lock(), iter(todo)

    def client():
        while True:
            with lock:
                item = next(queue, None)
            if item is None:
                return
            qid, (_, qa) = item
            status, out = call(server.base, "POST", "/v1/ask", {"question": qa["question"], "k": 5})
            if status != 200:
                sys.exit(f"ask {qid}: {status} {out}")
            with lock:
                asked[out["request_id"]] = qid
                if len(asked) % 250 == 0:
                    print(f"asked {len(asked)} of {len(todo)}", file=sys.stderr)

    threads = [threading.Thread(target=client) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return asked


def label(server, strategy, budget, asked, gold):
    """Labels `budget` questions in the order the server samples them; counts by verdict."""
    counts = {"answer": 0, "unanswerable": 0}
    for _ in range(budget):
        status, item = call(server.base, "GET", f"/v1/label/next?sample={strategy}")
        if status != 200 or not item or not item.get("request_id"):
            break
        doc_id, qa = gold[asked[item["request_id"]]]
        body = {"request_id": item["request_id"], "verdict": "unanswerable"}
        if not qa["is_impossible"]:
            answer = qa["answers"][0]
            start = answer["answer_start"]
            body = {"request_id": item["request_id"], "verdict": "answer", "doc_id": doc_id,
                    "start": start, "end": start + len(answer["text"]), "text": answer["text"]}
        status, out = call(server.base, "POST", "/v1/labels", body)
        if status != 201:
            sys.exit(f"label {item['request_id']}: {status} {out}")
        counts[body["verdict"]] += 1
    return counts


def evaluate(lector, name, model, labels, heldout, work):
    """Threshold from the labelled file, then predictions and scores on the held-out questions."""
    calibration = json.loads(run([lector, "calibrate", "--squad", labels, "--model", model, "--dry-run",
                                  "--json"], stdout=subprocess.PIPE).stdout)
    threshold = calibration["chosen"]["threshold"]
    run([lector, "read", "--model", model, "--squad", heldout, "--out", work / f"{name}-pred.json",
         "--na-prob-out", work / f"{name}-na.json"], stdout=subprocess.DEVNULL)
    scores = json.loads(run([lector, "eval", "squad", heldout, work / f"{name}-pred.json", "-n",
                             work / f"{name}-na.json", "-t", str(threshold), "--json", "--per-question",
                             work / f"{name}.jsonl"], stdout=subprocess.PIPE).stdout)
    return threshold, scores


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lector", default=str(ROOT / "target" / "release" / "lector"))
    ap.add_argument("--budget", type=int, default=200, help="labels per strategy")
    ap.add_argument("--replay", type=int, default=0, help="training questions asked (0: all)")
    ap.add_argument("--work", default=str(CACHE / "runs" / "label-loop"))
    ap.add_argument("--strategies", default="uncertain,random")
    args = ap.parse_args()
    lector, work = args.lector, Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    split = CACHE / "subjqa-split"
    run([sys.executable, ROOT / "bench" / "subjqa_split.py", "--out", split], stdout=subprocess.DEVNULL)
    gold = corpus(split, work / "reviews.jsonl")
    index, log = work / "index", work / "log"
    for stale in (index, log):
        shutil.rmtree(stale, ignore_errors=True)
    run([lector, "index", "add", work / "reviews.jsonl", "--index", index], stdout=subprocess.DEVNULL)

    server = Server(lector, index, log)
    started = time.time()
    asked = replay(server, gold, args.replay)
    server.stop()
    print(f"replayed {len(asked)} questions in {time.time() - started:.0f} s", file=sys.stderr)

    heldout = split / "heldout.json"
    results = {"shipped": None}
    exported = {}
    for strategy in args.strategies.split(","):
        copy = work / f"log-{strategy}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(log, copy)
        server = Server(lector, index, copy)
        counts = label(server, strategy, args.budget, asked, gold)
        server.stop()
        labels = work / f"labels-{strategy}.json"
        run([lector, "label", "export", "--log", copy, "--index", index, "--out", labels])
        exported[strategy] = (labels, counts)
        model = work / f"reader-{strategy}"
        shutil.rmtree(model, ignore_errors=True)
        run([lector, "train", "reader", "--model", BASE_READER, "--train", labels, "--out", model,
             "--epochs", "2", "--lr", "3e-5", "--batch-size", "12", "--seed", "42", "--threads", "2"])
        results[strategy] = evaluate(lector, strategy, model, labels, heldout, work)
    # The shipped reader's threshold comes from the uncertain labels (the first strategy's file).
    first = args.strategies.split(",")[0]
    results["shipped"] = evaluate(lector, "shipped", BASE_READER, exported[first][0], heldout, work)

    print(f"\nSubjQA held-out questions ({heldout.name}), labels per strategy: {args.budget}, "
          f"questions replayed: {len(asked)}\n")
    print("| reader | labels (answer / unanswerable) | threshold | F1 | EM | answerable F1 | unanswerable acc |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (threshold, s) in results.items():
        counts = exported.get(name, (None, None))[1]
        labelled = f"{counts['answer']} / {counts['unanswerable']}" if counts else "none (shipped)"
        print(f"| {name} | {labelled} | {threshold:.4f} | {s['f1']:.2f} | {s['exact']:.2f} | "
              f"{s.get('HasAns_f1', float('nan')):.2f} | {s.get('NoAns_exact', float('nan')):.2f} |")
    print()
    strategies = args.strategies.split(",")
    pairs = [("shipped", s) for s in strategies]
    if len(strategies) == 2:
        pairs.append((strategies[1], strategies[0]))
    for a, b in pairs:
        print(f"eval compare {a} -> {b}:")
        sys.stdout.flush()
        run([lector, "eval", "compare", work / f"{a}.jsonl", work / f"{b}.jsonl"])


if __name__ == "__main__":
    main()

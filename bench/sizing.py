#!/usr/bin/env python3
"""Sizing measurements for docs/sizing.md: bytes per passage and asks/s, embedded index and Redis.

1. Bytes per passage. A corpus of every passage text the shared data holds (SQuAD v1.1 dev and
   train paragraphs, BEIR SciFact abstracts, HotpotQA sample paragraphs, SubjQA reviews), one
   document each, is indexed at several sizes into an index directory and into a Redis store
   (tools/setup-redis.sh, started on a free loopback port and stopped by its pid). For each size
   it prints the passages, the index directory's bytes on disk and Redis's `used_memory` growth,
   each per passage. The largest size indexes the corpus twice (ids suffixed `~copy`), since the
   shared data holds fewer than 100k distinct passages: repeated text adds postings but no new
   terms, so that row slightly understates the cost of novel text. `--dense` sizes add the
   all-MiniLM-L6-v2 vectors (384 float32, HNSW in both stores).
2. Asks/s. `lector serve` over the smallest BM25 index and over the same corpus in Redis, side
   by side: rounds alternate between the two servers (who goes first alternates too), each round
   sends `--asks` SQuAD dev questions from `--clients` threads (POST /v1/ask, k = 5). Prints the
   median asks/s of each and per core, and each server's resident memory after the asks (the
   embedded index's passages and postings live in the server; the Redis store's in Redis).

    python3 bench/sizing.py [--lector target/release/lector] [--sizes 4800,all,x2]
                            [--dense-sizes 4800] [--rounds 3] [--asks 40] [--clients 2]

Sizes are document counts (a prefix of the corpus), `all` (the whole corpus) or `x2` (it twice).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("LECTOR_DATA_DIR", ROOT.parent / "shared" / "data"))


def squad_paragraphs(path, prefix):
    for article in json.loads(path.read_text())["data"]:
        for i, paragraph in enumerate(article["paragraphs"]):
            yield {"id": f"{prefix}:{article['title']}#{i}", "title": article["title"],
                   "text": paragraph["context"]}


def corpus():
    """Every distinct passage text of the shared data, one document each, in a fixed order."""
    docs = list(squad_paragraphs(DATA / "squad" / "dev-v1.1.json", "squad-dev"))
    with open(DATA / "beir" / "scifact" / "corpus.jsonl") as f:
        for line in f:
            row = json.loads(line)
            docs.append({"id": f"scifact:{row['_id']}", "title": row["title"], "text": row["text"]})
    docs += squad_paragraphs(DATA / "squad" / "train-v1.1.json", "squad-train")
    seen = set()
    for q in json.loads((DATA / "hotpotqa" / "hotpot_dev_distractor_sample1100.json").read_text()):
        for title, sentences in q["context"]:
            if title not in seen:
                seen.add(title)
                docs.append({"id": f"hotpot:{title}", "title": title, "text": "".join(sentences)})
    for path in sorted((DATA / "subjqa").glob("*.json")):
        docs += squad_paragraphs(path, f"subjqa-{path.name.split('.')[0]}")
    return docs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_command(port, *args):
    """One RESP command; the reply's raw text (a bulk reply read to its stated length)."""
    payload = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(payload.encode())
        reply = b""
        while b"\r\n" not in reply:
            reply += s.recv(65536)
        header, _, body = reply.partition(b"\r\n")
        if header.startswith(b"$"):
            while len(body) < int(header[1:]) + 2:
                body += s.recv(65536)
            return body.decode()
        return header.decode()


def used_memory(port):
    info = redis_command(port, "INFO", "memory")
    return int(next(line.split(":")[1] for line in info.split("\r\n") if line.startswith("used_memory:")))


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def measure(lector, port, work, docs, label, dense):
    """Indexes `docs` into a directory and into Redis; returns the row for the table."""
    path = work / f"{label}.jsonl"
    with open(path, "w") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
    index = work / f"index-{label}"
    flags = ["--dense"] if dense else []
    redis_command(port, "FLUSHALL")
    before = used_memory(port)
    store = f"redis://127.0.0.1:{port}/{label}"
    started = time.time()
    run([lector, "index", "add", str(path), "--store", store, *flags])
    redis_seconds = time.time() - started
    redis_bytes = used_memory(port) - before
    started = time.time()
    run([lector, "index", "add", str(path), "--index", str(index), *flags])
    index_seconds = time.time() - started
    stats = json.loads(run([lector, "index", "stats", "--index", str(index), "--json"]))
    disk = sum(p.stat().st_size for p in index.rglob("*") if p.is_file())
    n = stats["passages"]
    print(f"  {label}: {len(docs)} documents, {n} passages; index {index_seconds:.0f} s, "
          f"Redis {redis_seconds:.0f} s", file=sys.stderr)
    return {"size": label, "dense": dense, "documents": len(docs), "passages": n,
            "disk_bytes": disk, "redis_bytes": redis_bytes,
            "disk_per_passage": disk / n, "redis_per_passage": redis_bytes / n,
            "store": store, "index": str(index)}


def start_server(lector, place):
    proc = subprocess.Popen([lector, "serve", "--addr", "127.0.0.1:0", *place],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    addr = line.split("http://")[1].split("/")[0]
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    return proc, addr


def resident_mb(pid):
    """The process's resident memory (VmRSS), MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmRSS:"))) / 1024


def ask(addr, question):
    body = json.dumps({"question": question, "k": 5}).encode()
    request = urllib.request.Request(f"http://{addr}/v1/ask", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.status == 200
        response.read()


def asks_per_second(addr, questions, clients):
    chunks = [questions[i::clients] for i in range(clients)]
    errors = []

    def client(chunk):
        try:
            for q in chunk:
                ask(addr, q)
        except Exception as e:  # reported below; the round fails
            errors.append(e)

    threads = [threading.Thread(target=client, args=(c,)) for c in chunks]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"asks failed: {errors[0]}")
    return len(questions) / (time.time() - started)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lector", default=str(ROOT / "target" / "release" / "lector"))
    ap.add_argument("--sizes", default="4800,all,x2")
    ap.add_argument("--dense-sizes", default="4800")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of asks/s (0: sizes only)")
    ap.add_argument("--asks", type=int, default=40)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    if not Path(args.lector).exists():
        subprocess.run(["cargo", "build", "--release", "-p", "lector-cli"], cwd=ROOT, check=True)
    launcher = run(["bash", str(ROOT / "tools" / "setup-redis.sh")]).strip().splitlines()[-1]
    docs = corpus()
    print(f"corpus: {len(docs)} documents", file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        port = free_port()
        redis = subprocess.Popen([launcher, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", tmp],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        servers = []
        try:
            for _ in range(100):
                try:
                    used_memory(port)
                    break
                except OSError:
                    time.sleep(0.1)
            rows = []
            for dense, sizes in ((False, args.sizes), (True, args.dense_sizes)):
                for size in filter(None, sizes.split(",")):
                    chosen = {"all": docs, "x2": docs + [dict(d, id=d["id"] + "~copy") for d in docs]}
                    chosen = chosen.get(size) or docs[:int(size)]
                    label = f"{'dense' if dense else 'bm25'}-{size}"
                    rows.append(measure(args.lector, port, work, chosen, label, dense))
            print("| store content | documents | passages | disk bytes/passage | Redis RAM bytes/passage |")
            print("| --- | --: | --: | --: | --: |")
            for r in rows:
                kind = "BM25 + vectors" if r["dense"] else "BM25"
                print(f"| {kind} | {r['documents']:,} | {r['passages']:,} | {r['disk_per_passage']:,.0f} "
                      f"| {r['redis_per_passage']:,.0f} |")

            if args.json:
                Path(args.json).write_text(json.dumps({"rows": rows}, indent=2))
            if args.rounds == 0:
                return
            # Asks/s over the smallest BM25 size (its Redis store is rebuilt: the sizes flushed it).
            smallest = rows[0]
            run([args.lector, "index", "add", str(work / f"{smallest['size']}.jsonl"),
                 "--store", smallest["store"]])
            questions = [qa["question"]
                         for article in json.loads((DATA / "squad" / "dev-v1.1.json").read_text())["data"]
                         for p in article["paragraphs"] for qa in p["qas"]][:args.asks]
            embedded = start_server(args.lector, ["--index", smallest["index"], "--read-only"])
            servers.append(embedded[0])
            external = start_server(args.lector, ["--store", smallest["store"]])
            servers.append(external[0])
            for addr in (embedded[1], external[1]):
                ask(addr, questions[0])  # warm-up
            rates = {"embedded": [], "redis": []}
            for r in range(args.rounds):
                order = [("embedded", embedded[1]), ("redis", external[1])]
                for name, addr in (order if r % 2 == 0 else order[::-1]):
                    rates[name].append(asks_per_second(addr, questions, args.clients))
            rss = {name: resident_mb(proc.pid) for name, proc in (("embedded", embedded[0]), ("redis", external[0]))}
            cores = os.cpu_count()
            print(f"\nasks/s, POST /v1/ask k=5, {args.clients} clients, {args.asks} SQuAD dev questions, "
                  f"median of {args.rounds} alternating rounds, {cores} cores:")
            print("| served from | asks/s | asks/s per core | server resident MB |")
            print("| --- | --: | --: | --: |")
            for name, values in rates.items():
                m = statistics.median(values)
                print(f"| {name} | {m:.2f} | {m / cores:.2f} | {rss[name]:.0f} |")
            ratio = statistics.median(rates["redis"]) / statistics.median(rates["embedded"])
            print(f"Redis / embedded asks/s: {ratio:.2f}")
            if args.json:
                Path(args.json).write_text(json.dumps({"rows": rows, "asks_per_second": rates}, indent=2))
        finally:
            for proc in servers:
                proc.kill()
                proc.wait()
            redis.kill()
            redis.wait()


if __name__ == "__main__":
    main()

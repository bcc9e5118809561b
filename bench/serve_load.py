#!/usr/bin/env python3
"""Load test of `lector serve`: POST /v1/ask (k=5) at 1, 8 and 32 concurrent clients.

Builds the release binary, indexes the bundled sample corpus (BM25) into a temporary directory,
starts `lector serve` on a free loopback port with its default limits, and runs a bounded load
with oha (installed into ~/.cache/lector/bin with `cargo install` when missing), wrk (a fixed
duration per level; Debian's `wrk` package) or Python threads. Prints a
Markdown table: requests, p50/p95/max latency, throughput, non-200 responses and client errors.
Every response must be a 200: the server's queue is sized so that a well-behaved load test waits
rather than being refused.

    python3 bench/serve_load.py [--requests-per-client 4] [--concurrency 1,8,32] [--nice]
    python3 bench/serve_load.py --client wrk [--seconds 30] [--concurrency 1,8,32] [--nice]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OHA_ROOT = Path.home() / ".cache" / "lector" / "bin"
QUESTION = "Which team won Super Bowl 50?"


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), file=sys.stderr)
    return subprocess.run(cmd, check=True, **kw)


def oha(nice):
    found = shutil.which("oha") or (OHA_ROOT / "bin" / "oha")
    if Path(found).is_file():
        return str(found)
    run(nice + ["cargo", "install", "--locked", "--root", str(OHA_ROOT), "oha"])
    return str(OHA_ROOT / "bin" / "oha")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base, server, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if server.poll() is not None:
            sys.exit(f"lector serve exited with {server.returncode}")
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    sys.exit("lector serve did not become healthy")


def load(oha_bin, url, clients, requests, nice):
    body = json.dumps({"question": QUESTION, "k": 5})
    base = nice + [oha_bin, "-n", str(requests), "-c", str(clients), "-m", "POST",
                   "-H", "Content-Type: application/json", "-d", body, "--no-tui"]
    for fmt in (["--output-format", "json"], ["-j"]):
        out = subprocess.run(base + fmt + [url], capture_output=True, text=True)
        if out.returncode == 0:
            return json.loads(out.stdout)
    sys.exit(f"oha failed: {out.stderr}")


WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.body = os.getenv("LECTOR_BODY")
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "seconds": %f, "p50": %f, "p95": %f, "max": %f, '
    .. '"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e6,
    latency:percentile(95) / 1e6, latency.max / 1e6,
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""


def load_wrk(url, clients, seconds, nice):
    """A fixed-duration load from wrk (one keep-alive connection per client), in oha's report shape;
    wrk counts non-2xx/3xx responses in `summary.errors.status`, reported here as "other"."""
    wrk = shutil.which("wrk") or sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT)
    env = dict(os.environ, LECTOR_BODY=json.dumps({"question": QUESTION, "k": 5}))
    cmd = nice + [wrk, "-t", str(min(clients, 4)), "-c", str(clients), "-d", f"{seconds}s",
                  "--timeout", "60s", "-s", script.name, url]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    os.unlink(script.name)
    if out.returncode != 0:
        sys.exit(f"wrk failed: {out.stderr}")
    report = json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])
    errors = {k: report[k] for k in ("connect", "read", "write", "timeout") if report[k]}
    return {
        "summary": {"slowest": report["max"], "requestsPerSec": report["requests"] / report["seconds"]},
        "latencyPercentiles": {"p50": report["p50"], "p95": report["p95"]},
        "statusCodeDistribution": {"200": report["requests"] - report["status"], "other": report["status"]},
        "errorDistribution": errors,
    }


def load_python(url, clients, requests):
    """The same load from Python threads (one keep-alive connection each), in oha's report shape."""
    import http.client
    import threading
    from urllib.parse import urlparse

    body = json.dumps({"question": QUESTION, "k": 5})
    target = urlparse(url)
    latencies, codes, errors = [], {}, {}
    lock = threading.Lock()
    todo = iter(range(requests))

    def client():
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
        while True:
            with lock:
                if next(todo, None) is None:
                    return
            start = time.perf_counter()
            try:
                conn.request("POST", target.path, body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                key, bucket = str(response.status), codes
            except OSError as err:
                conn.close()
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
                key, bucket = type(err).__name__, errors
            with lock:
                latencies.append(time.perf_counter() - start)
                bucket[key] = bucket.get(key, 0) + 1

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
    return {
        "summary": {"slowest": latencies[-1], "requestsPerSec": len(latencies) / seconds},
        "latencyPercentiles": {"p50": pick(0.50), "p95": pick(0.95)},
        "statusCodeDistribution": codes,
        "errorDistribution": errors,
    }


def row(clients, report):
    summary = report["summary"]
    pct = report["latencyPercentiles"]
    codes = report.get("statusCodeDistribution", {})
    errors = sum(report.get("errorDistribution", {}).values())
    total = sum(codes.values()) + errors
    non_ok = sum(n for code, n in codes.items() if code != "200")
    return {
        "clients": clients,
        "requests": total,
        "p50_ms": pct["p50"] * 1000,
        "p95_ms": pct["p95"] * 1000,
        "max_ms": summary["slowest"] * 1000,
        "rps": summary["requestsPerSec"],
        "non_200": non_ok,
        "client_errors": errors,
        "codes": codes,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--requests-per-client", type=int, default=4,
                    help="requests per level = max(20, clients x this)")
    ap.add_argument("--nice", action="store_true", help="run the server and oha under nice -n 19")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--client", choices=["oha", "wrk", "python"], default="oha",
                    help="load generator: oha (installed if missing), wrk or Python threads")
    ap.add_argument("--seconds", type=int, default=30, help="wrk: seconds per concurrency level")
    args = ap.parse_args()
    nice = ["nice", "-n", "19"] if args.nice else []

    run(nice + ["cargo", "build", "--release", "--locked", "-p", "lector-cli"], cwd=ROOT)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    lector = target / "release" / "lector"
    oha_bin = oha(nice) if args.client == "oha" else None
    if args.client == "oha":
        send = lambda c, n: load(oha_bin, url, c, n, nice)
    elif args.client == "wrk":
        send = lambda c, n: load_wrk(url, c, args.seconds, nice) if n > 3 else load_python(url, c, n)
    else:
        send = lambda c, n: load_python(url, c, n)

    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        run([str(lector), "index", "add", str(ROOT / "samples" / "squad-v1.1-sample.json"),
             "--index", str(index)], stdout=subprocess.DEVNULL)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        url = base + "/v1/ask"
        server = subprocess.Popen(nice + [str(lector), "serve", "--index", str(index),
                                          "--addr", f"127.0.0.1:{port}"])
        try:
            wait_healthy(base, server)
            send(1, 3)  # warm-up
            rows = []
            for clients in (int(c) for c in args.concurrency.split(",")):
                requests = max(20, clients * args.requests_per_client)
                rows.append(row(clients, send(clients, requests)))
                print(f"{clients} clients done: {rows[-1]}", file=sys.stderr)
        finally:
            server.terminate()
            server.wait(timeout=60)

    print(f"client: {args.client}; cpus: {os.cpu_count()}; load average after the run: {os.getloadavg()}")
    print()
    print("| clients | requests | p50 ms | p95 ms | max ms | requests/s | non-200 | client errors |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['clients']} | {r['requests']} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | "
              f"{r['max_ms']:.0f} | {r['rps']:.2f} | {r['non_200']} | {r['client_errors']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    bad = sum(r["non_200"] + r["client_errors"] for r in rows)
    if bad:
        sys.exit(f"{bad} requests failed")


if __name__ == "__main__":
    main()

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

Two more measurements, each loopback-only and bounded in requests and time:

    python3 bench/serve_load.py --uploads 8,32 [--upload-mb 64]
        Peak server memory (VmHWM of /proc/PID/status) under N concurrent maximum-size
        `POST /v1/documents` uploads, each on a fresh server, once with admission before the body
        is read (`--workers 1 --queue 2`, the default body budget) and once with every upload
        admitted at once (`--queue N --max-buffered-bytes N x size`: bodies read and parsed
        before any waits for the worker, as the server did before admission came first). The
        uploads send `Expect: 100-continue`, so a refused one (503) never sends its body. Each
        body is a document whose text is blank: it is read and parsed whole, then refused (400)
        without indexing, so the figure is the memory of buffered bodies.

    python3 bench/serve_load.py --writes [--write-rate 2] [--concurrency 4]
        p50/p95/p99 of `POST /v1/ask` without writes, then while a writer thread adds documents
        at a steady rate (Python client), and the write latencies.

    --index DIR serves a copy of an index of your own instead of the sample corpus, and
    --serve-arg ARG (repeatable) passes ARG to `lector serve`, e.g. a dense index of SQuAD
    train, large enough for an HNSW graph, served in hybrid mode:
        lector index add ../shared/data/squad/train-v1.1.json --dense --index /tmp/squad-train
        python3 bench/serve_load.py --writes --index /tmp/squad-train --serve-arg=--mode=hybrid

    python3 bench/serve_load.py --logging [--rounds 5] [--concurrency 4] [--requests-per-client 25]
        Throughput with the query log off and on (`--log-queries DIR --redact`), side by side:
        the two servers take turns, round after round (which goes first alternates), so drift in
        the machine's speed hits both; prints the median requests/s of each, the median of the
        per-round on/off ratios, the log's bytes per ask, and the
        answer-quality series of /metrics. A last run with 4 KiB files, at most 3 kept, shows
        the log stays within files x size.
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
    pick = lambda q: percentile(latencies, q)
    return {
        "summary": {"slowest": latencies[-1], "requestsPerSec": len(latencies) / seconds},
        "latencyPercentiles": {"p50": pick(0.50), "p95": pick(0.95), "p99": pick(0.99)},
        "statusCodeDistribution": codes,
        "errorDistribution": errors,
    }


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


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


MIB = 1 << 20


def vm_hwm_mib(pid):
    """Peak resident memory of process `pid`, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    sys.exit("no VmHWM in /proc")


def metric(base, name):
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def upload(port, doc_id, size):
    """One `POST /v1/documents` of exactly `size` bytes with `Expect: 100-continue`, streamed
    from one reused chunk: the status, and whether the body was sent."""
    head_json = ('{"id": "%s", "text": "' % doc_id).encode()
    tail_json = b'"}'
    blank = size - len(head_json) - len(tail_json)
    chunk = b" " * MIB
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall((f"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {size}\r\n"
                      "Expect: 100-continue\r\nConnection: close\r\n\r\n").encode())
        reader = sock.makefile("rb")
        status = int(reader.readline().split()[1])
        if status != 100:
            return status, False
        while reader.readline() not in (b"\r\n", b""):
            pass
        sock.sendall(head_json)
        for start in range(0, blank, MIB):
            sock.sendall(chunk[:min(MIB, blank - start)])
        sock.sendall(tail_json)
        return int(reader.readline().split()[1]), True


def upload_run(lector, index, clients, size, admission, nice):
    """Peak memory of a fresh server under `clients` concurrent uploads of `size` bytes."""
    import threading

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    if admission:
        limits = ["--workers", "1", "--queue", "2"]
    else:
        limits = ["--workers", "1", "--queue", str(clients),
                  "--max-buffered-bytes", str(clients * size)]
    server = subprocess.Popen(nice + [str(lector), "serve", "--index", str(index),
                                      "--addr", f"127.0.0.1:{port}",
                                      "--max-documents-bytes", str(size)] + limits)
    try:
        wait_healthy(base, server)
        idle = vm_hwm_mib(server.pid)
        results = []
        lock = threading.Lock()

        def client(i):
            outcome = upload(port, f"upload-{i}", size)
            with lock:
                results.append(outcome)

        start = time.perf_counter()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        codes = {}
        for status, _ in results:
            codes[status] = codes.get(status, 0) + 1
        return {
            "clients": clients, "admission": admission, "idle_mib": idle,
            "peak_mib": vm_hwm_mib(server.pid), "seconds": seconds,
            "bodies_sent": sum(sent for _, sent in results), "codes": codes,
            "buffered_peak_mib": (metric(base, "lector_body_bytes_buffered_peak") or 0) / MIB,
        }
    finally:
        server.terminate()
        server.wait(timeout=60)


def uploads(lector, index, levels, size, nice):
    rows = []
    for clients in levels:
        for admission in (False, True):
            rows.append(upload_run(lector, index, clients, size, admission, nice))
            print(f"uploads: {rows[-1]}", file=sys.stderr)
    print(f"N concurrent uploads of {size / MIB:.0f} MiB (the largest allowed); one worker")
    print()
    print("| uploads | admission | peak RSS MiB (idle) | bodies buffered at peak MiB | bodies sent | statuses | seconds |")
    print("| ---: | --- | ---: | ---: | ---: | --- | ---: |")
    for r in rows:
        mode = "before the body (queue 2)" if r["admission"] else f"all at once (queue {r['clients']})"
        codes = ", ".join(f"{n}x{c}" for c, n in sorted(r["codes"].items()))
        print(f"| {r['clients']} | {mode} | {r['peak_mib']:.0f} ({r['idle_mib']:.0f}) | "
              f"{r['buffered_peak_mib']:.0f} | {r['bodies_sent']} | {codes} | {r['seconds']:.1f} |")
    return rows


def writer(base, rate, stop, out):
    """Adds one small document every 1/rate seconds until `stop` is set: (latency, status) each."""
    import http.client
    from urllib.parse import urlparse

    target = urlparse(base)
    n = 0
    next_at = time.perf_counter()
    while not stop.is_set():
        doc = {"id": f"written-{n}", "title": f"Written {n}",
               "text": f"Bulletin {n}: the harbour crane number {n} was painted blue on day {n}."}
        start = time.perf_counter()
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
        try:
            conn.request("POST", "/v1/documents", json.dumps(doc), {"Content-Type": "application/json"})
            status = conn.getresponse().status
        except OSError:
            status = None
        finally:
            conn.close()
        out.append((time.perf_counter() - start, status))
        n += 1
        next_at += 1 / rate
        stop.wait(max(0.0, next_at - time.perf_counter()))


def with_writes(url, base, levels, requests_per_client, rate):
    """Ask latency without writes, then with a writer at `rate` documents/s."""
    import threading

    rows = []
    for clients in levels:
        requests = max(20, clients * requests_per_client)
        quiet = load_python(url, clients, requests)
        stop, writes = threading.Event(), []
        thread = threading.Thread(target=writer, args=(base, rate, stop, writes))
        thread.start()
        busy = load_python(url, clients, requests)
        stop.set()
        thread.join()
        latencies = sorted(t for t, _ in writes)
        rows.append({
            "clients": clients, "requests": requests,
            "quiet": quiet["latencyPercentiles"], "busy": busy["latencyPercentiles"],
            "quiet_codes": quiet["statusCodeDistribution"], "busy_codes": busy["statusCodeDistribution"],
            "writes": len(writes), "write_codes": sorted({str(s) for _, s in writes}),
            "write_p50": percentile(latencies, 0.5) if latencies else None,
            "write_max": latencies[-1] if latencies else None,
        })
        print(f"writes: {rows[-1]}", file=sys.stderr)
    print(f"POST /v1/ask latency (ms) without and with a writer adding {rate} documents/s")
    print()
    print("| clients | asks | p50 | p95 | p99 | p50 writing | p95 writing | p99 writing | p99 ratio | writes (statuses) | write p50 / max ms |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for r in rows:
        q, b = r["quiet"], r["busy"]
        print(f"| {r['clients']} | {r['requests']} | {q['p50'] * 1000:.0f} | {q['p95'] * 1000:.0f} | "
              f"{q['p99'] * 1000:.0f} | {b['p50'] * 1000:.0f} | {b['p95'] * 1000:.0f} | "
              f"{b['p99'] * 1000:.0f} | {b['p99'] / q['p99']:.2f} | {r['writes']} "
              f"({', '.join(r['write_codes'])}) | {r['write_p50'] * 1000:.0f} / {r['write_max'] * 1000:.0f} |")
    return rows


def serve_once(lector, index, extra, clients, requests, nice):
    """Starts a server with `extra` flags, warms it up, runs the load; (row, /metrics text)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(nice + [str(lector), "serve", "--index", str(index),
                                      "--addr", f"127.0.0.1:{port}"] + extra,
                              stdout=subprocess.DEVNULL)
    try:
        wait_healthy(base, server)
        load_python(base + "/v1/ask", 1, 3)
        result = row(clients, load_python(base + "/v1/ask", clients, requests))
        with urllib.request.urlopen(base + "/metrics", timeout=60) as response:
            metrics = response.read().decode()
    finally:
        server.terminate()
        server.wait(timeout=60)
    return result, metrics


def log_bytes(directory):
    return sum(f.stat().st_size for f in Path(directory).glob("queries-*.jsonl"))


def logging_side_by_side(lector, index, tmp, clients, requests, rounds, nice):
    import statistics
    rps = {"off": [], "on": []}
    asks_logged, logged_bytes, metrics = 0, 0, ""
    for r in range(rounds):
        for side in ("off", "on") if r % 2 == 0 else ("on", "off"):
            log = tmp / f"log-{r}"
            extra = ["--log-queries", str(log), "--redact"] if side == "on" else []
            result, text = serve_once(lector, index, extra, clients, requests, nice)
            if result["non_200"] or result["client_errors"]:
                sys.exit(f"failed requests with the log {side}: {result}")
            rps[side].append(result["rps"])
            if side == "on":
                asks_logged += requests + 3
                logged_bytes += log_bytes(log)
                metrics = text
            print(f"round {r + 1} log {side}: {result['rps']:.2f} requests/s", file=sys.stderr)
    bounded = tmp / "log-bounded"
    serve_once(lector, index, ["--log-queries", str(bounded), "--log-file-bytes", "4096",
                               "--log-files", "3"], clients, requests, nice)
    off, on = statistics.median(rps["off"]), statistics.median(rps["on"])
    print(f"clients: {clients}; requests per run: {requests}; rounds: {rounds}; cpus: {os.cpu_count()}")
    print()
    print("| query log | median requests/s | runs |")
    print("| --- | ---: | --- |")
    print(f"| off | {off:.2f} | {', '.join(f'{v:.2f}' for v in rps['off'])} |")
    print(f"| on (--redact) | {on:.2f} | {', '.join(f'{v:.2f}' for v in rps['on'])} |")
    print()
    # Paired by round: the machine's speed drifts between rounds more than logging costs.
    ratios = sorted(a / b for a, b in zip(rps["on"], rps["off"]))
    ratio = statistics.median(ratios)
    print(f"on / off, median of the per-round ratios: {ratio:.3f} (cost {100 * (1 - ratio):.1f}% of "
          f"throughput; rounds {', '.join(f'{r:.3f}' for r in ratios)}); ratio of the medians: {on / off:.3f}")
    print(f"log: {logged_bytes / asks_logged:.0f} bytes per ask")
    files = sorted(bounded.glob("queries-*.jsonl"))
    total = sum(f.stat().st_size for f in files)
    print(f"bounded run (4 KiB files, 3 kept): {len(files)} files, {total} bytes (bound 12288 + one line)")
    print()
    for line in metrics.splitlines():
        if line.startswith(("lector_answers_total", "lector_query_log_lines_total",
                            "lector_answer_confidence_count", "lector_ask_stage_seconds_sum")):
            print("   ", line)


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
    ap.add_argument("--uploads", help="peak memory under these numbers of concurrent uploads, e.g. 8,32")
    ap.add_argument("--upload-mb", type=int, default=64, help="size of each upload (the limit), MiB")
    ap.add_argument("--writes", action="store_true",
                    help="ask latency without, then with, a writer adding documents")
    ap.add_argument("--write-rate", type=float, default=2.0, help="documents written per second")
    ap.add_argument("--no-build", action="store_true", help="use target/release/lector as it is")
    ap.add_argument("--logging", action="store_true",
                    help="throughput with the query log off and on, side by side")
    ap.add_argument("--rounds", type=int, default=5, help="--logging: rounds of off/on")
    ap.add_argument("--lector", help="the lector binary [default: target/release/lector]")
    ap.add_argument("--index", help="serve a copy of this index instead of the sample corpus's")
    ap.add_argument("--serve-arg", action="append", default=[], help="passed to lector serve")
    args = ap.parse_args()
    nice = ["nice", "-n", "19"] if args.nice else []
    levels = [int(c) for c in args.concurrency.split(",")]

    if not args.no_build:
        run(nice + ["cargo", "build", "--release", "--locked", "-p", "lector-cli"], cwd=ROOT)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    lector = Path(args.lector) if args.lector else target / "release" / "lector"
    # The writes, uploads and logging measurements use Python clients of their own.
    client = "python" if args.writes or args.uploads or args.logging else args.client
    oha_bin = oha(nice) if client == "oha" else None
    if client == "oha":
        send = lambda c, n: load(oha_bin, url, c, n, nice)
    elif client == "wrk":
        send = lambda c, n: load_wrk(url, c, args.seconds, nice) if n > 3 else load_python(url, c, n)
    else:
        send = lambda c, n: load_python(url, c, n)

    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        if args.index:
            shutil.copytree(args.index, index, ignore=shutil.ignore_patterns("write.lock"))
        else:
            run([str(lector), "index", "add", str(ROOT / "samples" / "squad-v1.1-sample.json"),
                 "--index", str(index)], stdout=subprocess.DEVNULL)
        if args.uploads:
            rows = uploads(lector, index, [int(n) for n in args.uploads.split(",")],
                           args.upload_mb * MIB, nice)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=2))
            return
        if args.logging:
            logging_side_by_side(lector, index, Path(tmp), levels[0],
                                 max(20, levels[0] * args.requests_per_client), args.rounds, nice)
            return
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        url = base + "/v1/ask"
        server = subprocess.Popen(nice + [str(lector), "serve", "--index", str(index),
                                          "--addr", f"127.0.0.1:{port}"] + args.serve_arg)
        try:
            wait_healthy(base, server)
            send(1, 3)  # warm-up
            if args.writes:
                rows = with_writes(url, base, levels, args.requests_per_client, args.write_rate)
                if args.json:
                    Path(args.json).write_text(json.dumps(rows, indent=2))
                return
            rows = []
            for clients in levels:
                requests = max(20, clients * args.requests_per_client)
                rows.append(row(clients, send(clients, requests)))
                print(f"{clients} clients done: {rows[-1]}", file=sys.stderr)
        finally:
            server.terminate()
            server.wait(timeout=60)

    print(f"client: {client}; cpus: {os.cpu_count()}; load average after the run: {os.getloadavg()}")
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

#!/usr/bin/env python3
"""Compares lector's vector search (crates/lector-index/examples/ann.rs) with faiss on the same data.

    python3 bench/ann_faiss.py --random 100000 --dim 384
    python3 bench/ann_faiss.py --clustered 100000 --dim 384 --repeat 3
    python3 bench/ann_faiss.py --vectors embeddings.npy [--queries queries.npy]
    python3 bench/ann_faiss.py --clustered 100000 --dim 384 --no-hnsw --repeat 3

The first run creates a virtual environment under ~/.cache/lector/bench-faiss with faiss-cpu and
numpy and re-runs itself there. Both libraries get the same normalised float32 .npy files (written
to --workdir), the same HNSW parameters (M, efConstruction, efSearch, inner product) and the same
thread count. Exact search is the whole query batch on both sides: faiss's IndexFlatIP (a BLAS matrix
product) and lector's exact_top_k_batch (register-tiled, AVX-512 or AVX2); lector's one-query-at-a-time
scan, as a server runs it, is printed beside. --no-hnsw measures exact search only. With --vectors and no --queries, --nq rows are held out as queries.
With --repeat R every figure is the median of R runs. --clustered draws the mixture described in
crates/lector-index/tests/vector.rs.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import cpu

VENV = Path.home() / ".cache" / "lector" / "bench-faiss"
REPO = Path(__file__).resolve().parent.parent


def ensure_venv():
    """Re-executes this script inside the benchmark venv, creating it on first use."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {VENV} (faiss-cpu, numpy)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "faiss-cpu", "numpy"], check=True)
    os.execv(str(python), [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--vectors", help="float32 .npy of shape (n, dim)")
    source.add_argument("--random", type=int, metavar="N", help="N uniform unit vectors")
    source.add_argument("--clustered", type=int, metavar="N", help="N vectors of the clustered mixture")
    p.add_argument("--queries", help="float32 .npy of queries (with --vectors)")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--nq", type=int, default=1000, help="number of queries to draw or hold out")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--ef-construction", type=int, default=200)
    p.add_argument("--ef", default="16,32,64,128,256", help="efSearch values, comma-separated")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeat", type=int, default=1, help="runs per side; figures are medians")
    p.add_argument("--workdir", default=str(VENV / "data"), help="where the .npy files are written")
    p.add_argument("--no-hnsw", action="store_true", help="measure exact search only")
    p.add_argument("--json", action="store_true", help="print the medians as JSON")
    return p.parse_args()


def normalized(x):
    import numpy as np

    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1, norms)


def clustered(n, nq, dim, rng):
    """The mixture of tests/vector.rs: n/1000 unit centres + a shared 64-d subspace + 0.3 x noise."""
    import numpy as np

    rank = 64
    centres = normalized(rng.standard_normal((max(1, n // 1000), dim)))
    basis = rng.standard_normal((rank, dim)).astype(np.float32) / np.sqrt(dim * rank)

    def draw(count):
        out = np.empty((count, dim), dtype=np.float32)
        for s in range(0, count, 10000):
            c = min(10000, count - s)
            points = centres[rng.integers(0, len(centres), c)]
            points += (0.3 / np.sqrt(dim)) * rng.standard_normal((c, dim)).astype(np.float32)
            points += rng.standard_normal((c, rank)).astype(np.float32) @ basis
            out[s : s + c] = normalized(points)
        return out

    return draw(n), draw(nq)


def data(args):
    import numpy as np

    rng = np.random.default_rng(args.seed)
    if args.vectors:
        base = normalized(np.load(args.vectors))
        if args.queries:
            queries = normalized(np.load(args.queries))
        else:
            held = rng.choice(len(base), size=args.nq, replace=False)
            mask = np.ones(len(base), dtype=bool)
            mask[held] = False
            base, queries = np.ascontiguousarray(base[mask]), base[held]
        return base, queries, f"file {args.vectors}"
    if args.clustered:
        return (*clustered(args.clustered, args.nq, args.dim, rng), "clustered")
    n = args.random or 10000
    return normalized(rng.standard_normal((n, args.dim))), normalized(rng.standard_normal((args.nq, args.dim))), "random"


def run_lector(args, base_path, query_path):
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "lector-index", "--example", "ann"], cwd=REPO, check=True
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    cmd = [
        str(target / "release" / "examples" / "ann"),
        "--vectors", str(base_path), "--queries", str(query_path),
        "--m", str(args.m), "--ef-construction", str(args.ef_construction), "--ef", args.ef,
        "--k", str(args.k), "--threads", str(args.threads), "--json",
    ] + (["--no-hnsw"] if args.no_hnsw else [])  # fmt: skip
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    report = json.loads(out.strip().splitlines()[-1])
    hnsw = report.get("hnsw", {"build_s": 0.0, "runs": []})
    return {
        "flat": {"build_s": 0.0, **report["flat"], "recall": 1.0},
        "hnsw": {"build_s": hnsw["build_s"], "runs": {r["ef"]: r for r in hnsw["runs"]}},
    }


def qps(index, queries, k, threads, faiss):
    faiss.omp_set_num_threads(threads)
    start = time.perf_counter()
    _, ids = index.search(queries, k)
    return len(queries) / (time.perf_counter() - start), ids


def recall(found, truth):
    k = truth.shape[1]
    return sum(len(set(f) & set(t)) for f, t in zip(found.tolist(), truth.tolist())) / (k * len(truth))


def run_faiss(args, base, queries):
    import faiss

    dim, k, efs = base.shape[1], args.k, searched_efs(args)
    flat = faiss.IndexFlatIP(dim)
    flat.add(base)
    qps_1, _ = qps(flat, queries, k, 1, faiss)
    qps_all, truth = qps(flat, queries, k, args.threads, faiss)
    report = {"flat": {"build_s": 0.0, "qps_1": qps_1, "qps_all": qps_all, "recall": 1.0}}
    if not efs:
        return {**report, "hnsw": {"build_s": 0.0, "runs": {}}}
    hnsw = faiss.IndexHNSWFlat(dim, args.m, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = args.ef_construction
    faiss.omp_set_num_threads(args.threads)
    start = time.perf_counter()
    hnsw.add(base)
    build_s = time.perf_counter() - start
    runs = {}
    for ef in efs:
        hnsw.hnsw.efSearch = ef
        q1, _ = qps(hnsw, queries, k, 1, faiss)
        qa, found = qps(hnsw, queries, k, args.threads, faiss)
        runs[ef] = {"ef": ef, "qps_1": q1, "qps_all": qa, "recall": recall(found, truth)}
    return {**report, "hnsw": {"build_s": build_s, "runs": runs}}


def searched_efs(args):
    """The HNSW search beams to measure (none with --no-hnsw)."""
    return [] if args.no_hnsw else [int(e) for e in args.ef.split(",")]


def median_of(reports):
    """One report whose every number is the median over `reports`."""

    def merge(values):
        if isinstance(values[0], dict):
            return {key: merge([v[key] for v in values]) for key in values[0]}
        return statistics.median(values)

    return merge(reports)


def rows(lector, faiss_report, efs):
    yield "flat", lector["flat"], faiss_report["flat"], None
    for ef in efs:
        yield f"hnsw ef={ef}", lector["hnsw"]["runs"][ef], faiss_report["hnsw"]["runs"][ef], None
    if efs:
        yield "hnsw build", None, None, (lector["hnsw"]["build_s"], faiss_report["hnsw"]["build_s"])


def print_table(lector, faiss_report, efs, threads):
    ratio = lambda a, b: f"{a / b:6.2f}" if b else "     -"  # noqa: E731
    print(f"{'':14} {'QPS 1 thread':>28} {f'QPS {threads} threads':>28} {'recall@10':>16}")
    print(f"{'':14} {'lector':>9} {'faiss':>9} {'ratio':>8} {'lector':>9} {'faiss':>9} {'ratio':>8} {'lector':>8} {'faiss':>7}")
    for name, lec, fai, build in rows(lector, faiss_report, efs):
        if build:
            print(f"{name:14} lector {build[0]:.1f} s, faiss {build[1]:.1f} s, lector/faiss {ratio(*build).strip()}")
            continue
        print(
            f"{name:14} {lec['qps_1']:9.0f} {fai['qps_1']:9.0f} {ratio(lec['qps_1'], fai['qps_1']):>8}"
            f" {lec['qps_all']:9.0f} {fai['qps_all']:9.0f} {ratio(lec['qps_all'], fai['qps_all']):>8}"
            f" {lec['recall']:8.4f} {fai['recall']:7.4f}"
        )


def main():
    ensure_venv()
    import numpy as np

    args = parse_args()
    base, queries, source = data(args)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    base_path, query_path = workdir / "base.npy", workdir / "queries.npy"
    np.save(base_path, base)
    np.save(query_path, queries)
    efs = searched_efs(args)
    print(f"CPU: {cpu.line()}", file=sys.stderr)
    print(
        f"{source}: {len(base)} x {base.shape[1]}, {len(queries)} queries, M {args.m}, "
        f"efConstruction {args.ef_construction}, {args.threads} threads, {args.repeat} run(s) each",
        file=sys.stderr,
    )
    lector_runs, faiss_runs = [], []
    for r in range(args.repeat):
        # Alternate the order so slow drifts in machine load hit both sides alike.
        order = [("lector", lambda: run_lector(args, base_path, query_path)), ("faiss", lambda: run_faiss(args, base, queries))]
        for name, run in order if r % 2 == 0 else order[::-1]:
            result = run()
            (lector_runs if name == "lector" else faiss_runs).append(result)
            print(f"run {r + 1}/{args.repeat} {name}: flat {result['flat']['qps_1']:.0f} QPS on 1 thread, "
                  f"HNSW build {result['hnsw']['build_s']:.1f} s", file=sys.stderr)
    lector, faiss_report = median_of(lector_runs), median_of(faiss_runs)
    if args.json:
        print(json.dumps({"source": source, "cpu": cpu.describe(), "n": len(base), "dim": base.shape[1], "threads": args.threads,
                          "repeat": args.repeat, "lector": lector, "faiss": faiss_report}))  # fmt: skip
    else:
        print_table(lector, faiss_report, efs, args.threads)
        single = lector["flat"]
        print(f"lector's exact scan one query at a time: {single['single_qps_1']:.0f} QPS on 1 thread, "
              f"{single['single_qps_all']:.0f} on {args.threads}")


if __name__ == "__main__":
    main()

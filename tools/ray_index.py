#!/usr/bin/env python3
"""Batch indexing on a Ray cluster: lector stays the worker, Ray only schedules it.

    python tools/ray_index.py CORPUS... --out DIR|STORE-URL|store [--store-file FILE] [--shards N] [--address auto]
                              [--lector PATH] [--work DIR] [--cpus-per-shard 1] [--json]
                              [-- INDEX-ADD-OPTION...]

The corpus is JSON lines files (lector's, or BEIR's `{_id, title, text}`), SQuAD `.json` files and
folders. The files are split into N shards of consecutive documents (lines, or SQuAD articles), so
that every document keeps its id; folders are not copied: each of N tasks walks them and reads its
own run of their files (`lector index add FOLDER... --shard K/N`), with the ids one process would
give them. Each shard is indexed by `lector index add` into WORK/shard-K (or WORK/folders-K) as a
Ray task (the options after `--`, e.g. `--dense`, go to every one), and the shard indexes are then
merged into DIR with `lector index merge`, which gives the index one process would have built
(same ids, same scores) in one commit. DIR must not exist yet.

With `--out redis://HOST:PORT/NAME` (a Redis store, see docs/redis.md) every task adds its shard to
the store itself and nothing is merged: writes are idempotent per document id and shards hold
different documents, so the tasks write side by side. A store with a password is never named on a
command line (where `ps` shows it) nor passed to Ray (which keeps task arguments): give
`--out store --store-file FILE`, FILE holding the URL on the shared volume (readable by its owner
only), or `--out store` with the URL in `$LECTOR_STORE`, which the driver writes to such a file in
the work folder (removed at the end). Tasks get the file's path, read the URL and hand it to lector
through `$LECTOR_STORE`. A URL with a password given to `--out` is refused.

Every Ray node must see the work folder, the folders indexed and the lector binary at the same
paths (a shared volume, as for read-only replicas): tasks write their shard index there, and the
merge reads it on the machine that runs this driver. The work folder (default: DIR.work beside DIR) is removed after a
successful merge unless --keep-work; after a failure it stays, and running the same command
again re-indexes only what changed (lector skips documents it already holds).

Prints, per shard as it finishes, its documents and seconds, then a summary table (or JSON with
--json). Exits 1 when a shard or the merge fails, naming it, with lector's message.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def split_jsonl(path, shards, out_dirs, part):
    """Writes the non-empty lines of `path` to the shards in consecutive blocks."""
    with open(path, "rb") as f:
        total = sum(1 for line in f if line.strip())
    outs = [open(d / f"{part}.jsonl", "wb") for d in out_dirs]
    try:
        with open(path, "rb") as f:
            k = 0
            for line in f:
                if not line.strip():
                    continue
                outs[k * shards // max(total, 1)].write(line.rstrip(b"\r\n") + b"\n")
                k += 1
    finally:
        for out in outs:
            out.close()


def split_squad(path, shards, out_dirs, part):
    """Writes the articles of the SQuAD file `path` to the shards in consecutive blocks."""
    with open(path, encoding="utf-8") as f:
        dataset = json.load(f)
    articles = dataset.get("data")
    if not isinstance(articles, list):
        raise SystemExit(f"{path}: not a SQuAD file (no `data` list of articles)")
    if any(not a.get("title") for a in articles):
        # Untitled articles are named by their position in the file, which a split would change.
        raise SystemExit(f"{path}: every article needs a title to keep its documents' ids when split")
    for k, out_dir in enumerate(out_dirs):
        block = articles[k * len(articles) // shards : (k + 1) * len(articles) // shards]
        if block:
            with open(out_dir / f"{part}.json", "w", encoding="utf-8") as out:
                json.dump({"version": dataset.get("version", ""), "data": block}, out, ensure_ascii=False)


def split(corpus, shards, work):
    """The non-empty shard input folders under `work`, each with its part of every corpus file."""
    dirs = [work / f"input-{k}" for k in range(shards)]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    for n, path in enumerate(corpus):
        # A numbered name per input, so that two inputs called the same never collide.
        part = f"{n:04d}-{path.stem}"
        if path.suffix == ".jsonl":
            split_jsonl(path, shards, dirs, part)
        elif path.suffix == ".json":
            split_squad(path, shards, dirs, part)
        else:
            raise SystemExit(f"{path}: expected a .jsonl or SQuAD .json file")
    # A corpus smaller than the shard count leaves some shards empty: they are not indexed.
    for d in dirs:
        for f in d.iterdir():
            if f.stat().st_size == 0:
                f.unlink()
    return [d for d in dirs if any(d.iterdir())]


def is_store(out):
    return out == "store" or out.startswith(("redis://", "rediss://"))


def has_password(url):
    """Whether a store URL carries credentials (`redis://:PASSWORD@host`, `redis://user:pw@host`)."""
    authority = url.split("://", 1)[-1].split("/", 1)[0]
    return "@" in authority


def read_store_file(path):
    """The store URL held in `path` (its first line)."""
    with open(path) as f:
        return f.readline().strip()


def index_shard(lector, inputs, index, options, cpus, store_file=None):
    """Runs `lector index add INPUTS... --index INDEX OPTIONS...` (into the store whose URL
    `store_file` holds instead, given to lector through $LECTOR_STORE, when there is one); its
    JSON report, seconds and stderr's end."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(cpus))
    place = ["--index", index]
    if store_file:
        env["LECTOR_STORE"], place = read_store_file(store_file), []
    started = time.monotonic()
    proc = subprocess.run(
        [lector, "index", "add", *inputs, *place, "--json", *options],
        capture_output=True,
        text=True,
        env=env,
    )
    seconds = time.monotonic() - started
    report = json.loads(proc.stdout) if proc.returncode == 0 else None
    return {"index": index, "rc": proc.returncode, "report": report, "seconds": seconds, "stderr": proc.stderr[-4000:]}


def shard_jobs(dirs, folders, shards, work):
    """(inputs, index, extra options) of every task: the split files' shards, then the folders'."""
    jobs = [([str(p) for p in sorted(d.iterdir())], work / f"shard-{k}", []) for k, d in enumerate(dirs)]
    if folders:
        for k in range(1, shards + 1):
            jobs.append(([str(f) for f in folders], work / f"folders-{k}", ["--shard", f"{k}/{shards}"]))
    return jobs


def shard_documents(report):
    """The documents a shard's `index add --json` read (in a store, `documents` is the store's total)."""
    return report["added"] + report["replaced"] + report["unchanged"]


def run_shards(ray, lector, jobs, options, cpus, store_file):
    """Indexes every shard as a Ray task; their results in shard order, printing each as it ends."""
    task = ray.remote(num_cpus=cpus, max_retries=1)(index_shard)
    pending = {
        task.remote(lector, inputs, str(index), extra + options, cpus, store_file): k
        for k, (inputs, index, extra) in enumerate(jobs)
    }
    results = [None] * len(jobs)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        k = pending.pop(done[0])
        results[k] = ray.get(done[0])
        r = results[k]
        what = f"{shard_documents(r['report'])} documents" if r["rc"] == 0 else f"FAILED (exit {r['rc']})"
        print(f"shard {k + 1}/{len(jobs)}: {what} in {r['seconds']:.1f} s", file=sys.stderr, flush=True)
    return results


def merge(lector, shards, out):
    started = time.monotonic()
    proc = subprocess.run([lector, "index", "merge", *shards, "--out", str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"lector index merge failed: {proc.stderr.strip()}")
    return time.monotonic() - started, stats(lector, ["--index", str(out)])


def stats(lector, place, env=None):
    """`lector index stats --json` of PLACE (or of $LECTOR_STORE in `env`); {} when it fails."""
    proc = subprocess.run([lector, "index", "stats", *place, "--json"], capture_output=True, text=True, env=env)
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def main():
    argv = sys.argv[1:]
    options = []
    if "--" in argv:
        cut = argv.index("--")
        argv, options = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="+", type=Path, help=".jsonl or SQuAD .json files, folders")
    parser.add_argument("--out", required=True, help="the merged index (must not exist), a Redis store URL without a password, or `store` (see --store-file)")
    parser.add_argument("--store-file", type=Path, help="with --out store: a file holding the store URL (default: $LECTOR_STORE)")
    parser.add_argument("--shards", type=int, default=2, help="shards, one Ray task each (default 2)")
    parser.add_argument("--address", default="auto", help="the Ray cluster (default auto: the one started with `ray start`)")
    parser.add_argument("--lector", default=shutil.which("lector") or "lector", help="the lector binary (default: on PATH)")
    parser.add_argument("--work", type=Path, help="shard inputs and indexes (default DIR.work)")
    parser.add_argument("--cpus-per-shard", type=int, default=1, help="CPUs Ray reserves per task, and lector's threads")
    parser.add_argument("--keep-work", action="store_true", help="keep the work folder after merging")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    if args.shards < 1 or args.cpus_per_shard < 1:
        parser.error("--shards and --cpus-per-shard must be at least 1")
    store = args.out if is_store(args.out) else None
    out = Path(args.out)
    if store is None and out.exists():
        parser.error(f"{out} exists: the merged index must be new")
    if store and not args.work:
        parser.error("--out STORE-URL needs --work DIR for the shards' inputs")
    if store and store != "store" and has_password(store):
        parser.error("--out: a store URL with a password would show in `ps` and Ray: give --out store "
                     "with --store-file FILE or $LECTOR_STORE instead")
    if store == "store" and not (args.store_file or os.environ.get("LECTOR_STORE")):
        parser.error("--out store needs --store-file FILE or $LECTOR_STORE")
    lector = str(Path(args.lector).resolve()) if os.sep in args.lector else args.lector
    work = (args.work or out.with_name(out.name + ".work")).resolve()

    import ray  # imported late: --help and argument errors work without Ray installed

    started = time.monotonic()
    corpus = [p.resolve() for p in args.corpus]
    folders = [p for p in corpus if p.is_dir()]
    dirs = split([p for p in corpus if not p.is_dir()], args.shards, work)
    jobs = shard_jobs(dirs, folders, args.shards, work)
    url, store_file, written = None, None, None
    if store == "store" and args.store_file:
        store_file = str(args.store_file.resolve())
        url = read_store_file(store_file)
    elif store:
        url = os.environ["LECTOR_STORE"] if store == "store" else store
        # The tasks read the URL from a file on the shared volume, never from their arguments.
        work.mkdir(parents=True, exist_ok=True)
        written = work / "store-url"
        fd = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(url + "\n")
        store_file = str(written)
    ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    try:
        results = run_shards(ray, lector, jobs, options, args.cpus_per_shard, store_file)
    finally:
        ray.shutdown()
        if written is not None:
            written.unlink(missing_ok=True)
    failed = [r for r in results if r["rc"] != 0]
    for r in failed:
        print(f"{r['index']}: lector index add failed:\n{r['stderr'].strip()}", file=sys.stderr)
    if failed:
        raise SystemExit(f"{len(failed)} of {len(results)} shards failed; the work folder {work} is kept for a rerun")
    indexing = time.monotonic() - started
    if store:
        merge_seconds, totals = 0.0, stats(lector, [], dict(os.environ, LECTOR_STORE=url))
    else:
        merge_seconds, totals = merge(lector, [r["index"] for r in results], out)
    if not args.keep_work:
        shutil.rmtree(work)
    summary = {
        "index": totals.get("store", str(out)),
        "shards": len(results),
        "documents": totals.get("documents"),
        "passages": totals.get("passages"),
        "shard_seconds": [round(r["seconds"], 3) for r in results],
        "split_and_index_seconds": round(indexing, 3),
        "merge_seconds": round(merge_seconds, 3),
        "documents_per_second": round((totals.get("documents") or 0) / (indexing + merge_seconds), 1),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for key, value in summary.items():
            print(f"{key:<24} {value}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One long document in each store, for docs/sizing.md: a 1,000-page PDF made from SQuAD v1.1
train paragraphs (about 450 words a page, one deflated content stream per page) is indexed into
an index directory and into a Redis store (tools/setup-redis.sh, on a free loopback port, stopped
by its pid). Prints the passages, the directory's bytes on disk, Redis's `used_memory` growth and
the time of each `lector index add`, as a table or JSON.

A PDF's metadata holds a list of page starts (`pages`) and its sections: every passage of a Redis
store carried its document's whole metadata and a filter tag per list element before, O(pages^2)
per document; this measures what one long document costs now.

    python3 bench/long_document.py [--lector target/release/lector] [--pages 1000] [--json]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sizing import DATA, ROOT, free_port, run, used_memory  # noqa: E402
from cpu import line as cpu_line  # noqa: E402
from pdf_objects import escape, pdf_of  # noqa: E402


def long_pdf(pages):
    """A PDF of `pages` pages of SQuAD train paragraphs (ASCII only, about 450 words each)."""
    paragraphs = (p["context"] for a in json.loads((DATA / "squad" / "train-v1.1.json").read_text())["data"]
                  for p in a["paragraphs"])
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", None,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for _ in range(pages):
        words = []
        while len(words) < 450:
            words += next(paragraphs).encode("ascii", "ignore").decode().split()
        lines = [" ".join(words[i:i + 14]) for i in range(0, len(words), 14)]
        content = "BT /F1 10 Tf 12 TL 50 750 Td " + " ".join(f"({escape(l)}) ' " for l in lines) + "ET"
        stream = zlib.compress(content.encode(), 9)
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % len(objects))
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    return pdf_of(objects)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lector", default=str(ROOT / "target" / "release" / "lector"))
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    launcher = run(["bash", str(ROOT / "tools" / "setup-redis.sh")]).strip().splitlines()[-1]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pdf = work / "long.pdf"
        pdf.write_bytes(long_pdf(args.pages))
        port = free_port()
        redis = subprocess.Popen([launcher, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", tmp],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    used_memory(port)
                    break
                except OSError:
                    time.sleep(0.05)
            before = used_memory(port)
            started = time.time()
            run([args.lector, "index", "add", str(pdf), "--store", f"redis://127.0.0.1:{port}/long"])
            redis_seconds = time.time() - started
            redis_bytes = used_memory(port) - before
        finally:
            redis.terminate()
            redis.wait()
        index = work / "index"
        started = time.time()
        run([args.lector, "index", "add", str(pdf), "--index", str(index)])
        index_seconds = time.time() - started
        stats = json.loads(run([args.lector, "index", "stats", "--index", str(index), "--json"]))
        disk = sum(p.stat().st_size for p in index.rglob("*") if p.is_file())
    n = stats["passages"]
    result = {"cpu": cpu_line(), "pages": args.pages,
              "passages": n, "disk_bytes": disk, "index_seconds": index_seconds,
              "redis_bytes": redis_bytes, "redis_seconds": redis_seconds,
              "disk_per_passage": disk / n, "redis_per_passage": redis_bytes / n}
    if args.json:
        print(json.dumps(result))
        return
    print(f"CPU: {result['cpu']}; one {args.pages}-page PDF, {n} passages (BM25)")
    print("| store | bytes | per passage | index add |")
    print("| --- | --: | --: | --: |")
    print(f"| index directory (disk) | {disk:,} | {disk / n:,.0f} | {index_seconds:.1f} s |")
    print(f"| Redis (`used_memory` growth) | {redis_bytes:,} | {redis_bytes / n:,.0f} | {redis_seconds:.1f} s |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measures Rust PDF text extractors against a reference, per file and overall (docs/pdf-extraction.md).

Run from the repository root:

    cargo build --release --manifest-path bench/pdf_extract/probe/Cargo.toml \
        --target-dir /tmp/pdfprobe-target
    python3 bench/pdf_extract/measure.py --probe /tmp/pdfprobe-target/release/pdf-probe

Needs `pdftotext` (Debian's poppler-utils), the reference, and optionally PyPI's `pypdf`, a second
extractor shown for comparison. The samples are `pdf-samples/` in the shared data
($LECTOR_DATA_DIR, else ../shared/data beside the checkout).

Metric: token recall, the fraction of the reference's word tokens (a multiset of lowercased
`\\w+` runs) that the candidate also yields; "page recall" counts a token only on its own page, so
it also checks the page boundaries; "pair recall" is the same over pairs of adjacent tokens, so
words run together or read out of order (two columns interleaved) lower it. Each candidate runs
in its own process under a time limit, so a panic (exit 101), a crash or a hang is recorded
rather than stopping the run. For the failure behaviour only, every sample is also cut to its
first half (a truncated file), and copies of the small ones are mutated at random (seeded).
"""

import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CRATES = ["pdf-extract", "lopdf", "lector"]
TOKEN = re.compile(r"\w+")


def data_dir() -> Path:
    env = os.environ.get("LECTOR_DATA_DIR")
    if env:
        return Path(env)
    return (Path(__file__).resolve().parents[2] / ".." / "shared" / "data").resolve()


def tokens(text: str) -> collections.Counter:
    return collections.Counter(t.lower() for t in TOKEN.findall(text))


def bigrams(text: str) -> collections.Counter:
    words = [t.lower() for t in TOKEN.findall(text)]
    return collections.Counter(zip(words, words[1:]))


def overlap(ref: collections.Counter, cand: collections.Counter) -> int:
    return sum(min(n, cand[t]) for t, n in ref.items())


def reference_pages(pdf: Path):
    """pdftotext's pages (it ends each page with a form feed), or None when it fails."""
    run = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, timeout=60)
    if run.returncode != 0:
        return None
    pages = run.stdout.decode("utf-8", "replace").split("\f")
    return pages[:-1] if pages and pages[-1].strip() == "" else pages


def pypdf_pages(pdf: Path):
    try:
        import logging

        import pypdf

        logging.getLogger("pypdf").setLevel(logging.ERROR)
    except ImportError:
        return None, 0.0
    start = time.perf_counter()
    try:
        reader = pypdf.PdfReader(str(pdf))
        if reader.is_encrypted:
            reader.decrypt("")
        pages = [p.extract_text() or "" for p in reader.pages]
    except Exception as e:  # noqa: BLE001 - any failure is a result here
        return f"error: {type(e).__name__}", time.perf_counter() - start
    return pages, time.perf_counter() - start


def run_probe(probe: str, crate: str, pdf: Path, limit: float):
    """{'pages', 'error', 'secs'} or {'outcome': 'panic'|'hang'|'crash'}."""
    try:
        run = subprocess.run([probe, crate, str(pdf)], capture_output=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"outcome": "hang"}
    if run.returncode == 101:
        msg = run.stderr.decode("utf-8", "replace").strip().splitlines()
        return {"outcome": "panic", "message": next((l for l in msg if "panicked" in l), "")[:160]}
    if run.returncode != 0:
        return {"outcome": f"crash (exit {run.returncode})"}
    out = json.loads(run.stdout)
    out["outcome"] = "error" if out["error"] else "ok"
    return out


def recalls(ref_pages, pages):
    ref_doc = tokens("\n".join(ref_pages))
    total = sum(ref_doc.values())
    doc = overlap(ref_doc, tokens("\n".join(pages)))
    paged = 0
    for i, ref in enumerate(ref_pages):
        paged += overlap(tokens(ref), tokens(pages[i] if i < len(pages) else ""))
    ref_pairs = bigrams("\n".join(ref_pages))
    pairs = overlap(ref_pairs, bigrams("\n".join(pages))) / max(1, sum(ref_pairs.values()))
    return total, doc, paged, pairs, sum(ref_pairs.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe", required=True, help="the built pdf-probe binary")
    ap.add_argument("--limit", type=float, default=30.0, help="seconds per file and crate")
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--mutations", type=int, default=400,
                    help="randomly mutated copies (1 to 20 bytes changed) run for failure behaviour")
    args = ap.parse_args()
    samples = data_dir() / "pdf-samples"
    pdfs = sorted(samples.rglob("*.pdf"))
    if not pdfs:
        sys.exit(f"no PDFs under {samples}")
    rows = []
    names = CRATES + ["pypdf"]
    totals = {c: {"words": 0, "doc": 0, "paged": 0, "pages": 0, "secs": 0.0, "pairs": 0.0, "npairs": 0} for c in names}
    for pdf in pdfs:
        ref = reference_pages(pdf)
        row = {"file": str(pdf.relative_to(samples)), "ref_pages": len(ref) if ref else None}
        words = sum(tokens("\n".join(ref)).values()) if ref else 0
        row["ref_words"] = words
        results = {c: run_probe(args.probe, c, pdf, args.limit) for c in CRATES}
        pp, secs = pypdf_pages(pdf)
        results["pypdf"] = (
            {"outcome": "ok", "pages": pp, "secs": secs}
            if isinstance(pp, list)
            else {"outcome": pp or "missing", "secs": secs}
        )
        for c in names:
            r = results[c]
            cell = {"outcome": r["outcome"], "pages": len(r.get("pages") or [])}
            if "secs" in r:
                cell["secs"] = r["secs"]
            if r["outcome"] == "ok" and ref:
                total, doc, paged, pairs, npairs = recalls(ref, r["pages"])
                cell.update(doc=doc, paged=paged, pairs=pairs)
                t = totals[c]
                t["pairs"] += pairs * npairs
                t["npairs"] += npairs
                t["words"] += total
                t["doc"] += doc
                t["paged"] += paged
                t["pages"] += len(r["pages"])
                t["secs"] += r["secs"]
            elif ref:
                totals[c]["words"] += words
                totals[c]["npairs"] += max(0, words - 1)
            if r.get("error"):
                cell["error"] = r["error"][:120]
            if r.get("message"):
                cell["error"] = r["message"]
            row[c] = cell
        rows.append(row)

    # Failure behaviour on truncated copies (the first half of each file's bytes).
    truncated = {c: collections.Counter() for c in CRATES}
    with tempfile.TemporaryDirectory() as tmp:
        for pdf in pdfs:
            cut = Path(tmp) / pdf.name
            data = pdf.read_bytes()
            cut.write_bytes(data[: len(data) // 2])
            for c in CRATES:
                r = run_probe(args.probe, c, cut, args.limit)
                o = r["outcome"]
                if o == "ok":
                    o = "text" if any(p.strip() for p in r["pages"]) else "no text"
                truncated[c][o] += 1

    # Failure behaviour on mutated copies of the small samples (seeded, so reruns match).
    mutated = {c: collections.Counter() for c in CRATES}
    rng = random.Random(38)
    small = [p for p in pdfs if p.stat().st_size < 200_000]
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.mutations):
            data = bytearray(rng.choice(small).read_bytes())
            for _ in range(rng.randint(1, 20)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            cut = Path(tmp) / "mutated.pdf"
            cut.write_bytes(data)
            for c in CRATES:
                mutated[c][run_probe(args.probe, c, cut, args.limit)["outcome"]] += 1

    print("| file | pages | ref words | " + " | ".join(f"{c} recall / page / pairs | {c} ms" for c in names) + " |")
    print("| --- | ---: | ---: | " + " | ".join("---: | ---:" for _ in names) + " |")
    for row in rows:
        cells = []
        for c in names:
            cell = row[c]
            ms = f"{cell['secs'] * 1000:.1f}" if "secs" in cell else ""
            if "doc" in cell and row["ref_words"]:
                rec = f"{cell['doc'] / row['ref_words']:.3f} / {cell['paged'] / row['ref_words']:.3f} / {cell['pairs']:.3f}"
            elif "doc" in cell:
                rec = f"- ({cell['pages']} pages, no ref words)"
            else:
                rec = cell["outcome"] + (f": {cell['error']}" if cell.get("error") else "")
            cells.append(f"{rec} | {ms}")
        pages = row["ref_pages"] if row["ref_pages"] is not None else "ref failed"
        print(f"| {row['file']} | {pages} | {row['ref_words']} | " + " | ".join(cells) + " |")
    print()
    print("| crate | ref words | recall | page recall | pair recall | pages | seconds | pages/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in names:
        t = totals[c]
        rate = t["pages"] / t["secs"] if t["secs"] else 0
        print(
            f"| {c} | {t['words']} | {t['doc'] / t['words']:.4f} | {t['paged'] / t['words']:.4f} | "
            f"{t['pairs'] / max(1, t['npairs']):.4f} | "
            f"{t['pages']} | {t['secs']:.3f} | {rate:.0f} |"
        )
    print()
    print("truncated copies (first half of the bytes):")
    for c in CRATES:
        print(f"  {c}: " + ", ".join(f"{k} {v}" for k, v in sorted(truncated[c].items())))
    print(f"mutated copies ({args.mutations}, 1 to 20 random bytes changed):")
    for c in CRATES:
        print(f"  {c}: " + ", ".join(f"{k} {v}" for k, v in sorted(mutated[c].items())))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "totals": totals,
                                               "truncated": {c: dict(v) for c, v in truncated.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

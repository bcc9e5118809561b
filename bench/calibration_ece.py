#!/usr/bin/env python3
"""Held-out calibration of lector's answer confidence: expected calibration error (ECE) before and after the
confidence map `lector calibrate` fits, on questions the map never saw.

    python3 bench/calibration_ece.py [--questions 1500] [--k 5] [--methods isotonic,platt] [--skip-subjqa]
                                     [--lector target/release/lector] [--build] [--json]

Each experiment fits on one part of the data (`lector calibrate --squad FIT --index DIR`, which stores the map in
DIR/calibration.json) and checks the stored map on a disjoint part (`lector calibrate --squad HELDOUT --index DIR
--evaluate`, which refits nothing). ECE: 10 equal-width confidence bins, weighted by their counts; an answer is
right when it matches a gold answer exactly after SQuAD normalisation. "raw" is the candidate's score taken as a
probability, "calibrated" the map's confidence.

- SQuAD v1.1 dev, split by article: questions of the first half of the articles fit, those of the second half
  are held out (about --questions of each half: every s-th paragraph, so every article is represented). Read twice: each question in its gold paragraph alone,
  and as `lector ask --k K` answers it, from the top K passages retrieved (BM25) from an index of every dev
  paragraph (both halves).
- SubjQA, split by review (bench/subjqa_split.py; run here when ~/.cache/lector/subjqa-split is missing): the
  training part fits, the held-out part is checked, each question in its review (gold paragraph); half the
  questions are unanswerable (a span given to one is wrong). About --questions of each part, sampled the same way.

Data: $LECTOR_DATA_DIR, else ../shared/data beside the repository. The binary: --lector, default
target/release/lector, built with `cargo build --release -p lector-cli` when missing or with --build.
Plain Python 3, no dependencies.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data_dir():
    return os.environ.get("LECTOR_DATA_DIR") or os.path.join(ROOT, "..", "shared", "data")


def lector_binary(args):
    path = args.lector or os.path.join(ROOT, "target", "release", "lector")
    if args.build or not os.path.exists(path):
        subprocess.run(["nice", "cargo", "build", "--release", "-p", "lector-cli"], cwd=ROOT, check=True)
    return path


def run_json(binary, argv):
    """`lector ARGV --json`, its stdout parsed; stderr passes through (progress, warnings)."""
    started = time.time()
    out = subprocess.run(["nice", binary, *argv, "--json"], stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(out.stdout), time.time() - started


def write_squad(path, version, articles):
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": version, "data": articles}, f, ensure_ascii=False)


def thin(articles, max_questions):
    """Every s-th paragraph (counted across articles), s chosen so about `max_questions` questions remain:
    a sample spread over every article (or domain), not the first few."""
    total = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
    stride = max(1, -(-total // max_questions))
    kept, seen = [], 0
    for article in articles:
        paragraphs = []
        for p in article["paragraphs"]:
            if seen % stride == 0:
                paragraphs.append(p)
            seen += 1
        if paragraphs:
            kept.append({**article, "paragraphs": paragraphs})
    return kept


def write_part(source, out_path, max_questions, articles=slice(None)):
    """The chosen articles of a SQuAD file, thinned to about `max_questions`, written to `out_path`."""
    with open(source, encoding="utf-8") as f:
        squad = json.load(f)
    write_squad(out_path, squad.get("version", "1.1"), thin(squad["data"][articles], max_questions))
    return out_path


def split_by_article(source, out_dir, max_questions):
    """The articles of a SQuAD file in two halves, each thinned, written as FIT and HELDOUT files."""
    with open(source, encoding="utf-8") as f:
        half = len(json.load(f)["data"]) // 2
    return (write_part(source, os.path.join(out_dir, "squad-fit.json"), max_questions, slice(None, half)),
            write_part(source, os.path.join(out_dir, "squad-heldout.json"), max_questions, slice(half, None)))


def count_questions(path):
    with open(path, encoding="utf-8") as f:
        return sum(len(p["qas"]) for a in json.load(f)["data"] for p in a["paragraphs"])


def experiment(binary, name, index, fit, heldout, limit, method, k):
    """Fits on FIT, evaluates on HELDOUT; one result row."""
    passages = ["--retrieve", str(k)] if k else []
    common = ["--index", index, "--limit", str(limit), *passages]
    fitted, fit_seconds = run_json(binary, ["calibrate", "--squad", fit, *common, "--confidence", method])
    checked, check_seconds = run_json(binary, ["calibrate", "--squad", heldout, *common, "--evaluate"])
    c = checked["confidence"]
    return {
        "data": name,
        "passages": f"top {k} retrieved" if k else "gold paragraph",
        "method": method,
        "fit_questions": fitted["calibration"]["questions"],
        "fit_answers": fitted["confidence"]["answers"],
        "fit_ece_raw": fitted["confidence"]["ece_raw"],
        "fit_ece_cross_validated": fitted["confidence"]["ece_cross_validated"],
        "heldout_questions": checked["questions"],
        "heldout_answers": c["answers"],
        "heldout_accuracy": c["right"] / max(c["answers"], 1),
        "heldout_ece_raw": c["ece_raw"],
        "heldout_ece_calibrated": c["ece_calibrated"],
        "seconds": round(fit_seconds + check_seconds, 1),
    }


def subjqa_split():
    split = os.path.expanduser(os.path.join("~", ".cache", "lector", "subjqa-split"))
    if not os.path.exists(os.path.join(split, "heldout.json")):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "subjqa_split.py")], check=True)
    return os.path.join(split, "train.json"), os.path.join(split, "heldout.json")


def print_table(rows):
    header = ["data", "passages", "method", "fit q", "held-out q", "answers", "accuracy", "ECE raw",
              "ECE calibrated", "fit CV ECE", "s"]
    lines = [[r["data"], r["passages"], r["method"], str(r["fit_questions"]), str(r["heldout_questions"]),
              str(r["heldout_answers"]), f"{r['heldout_accuracy']:.3f}", f"{r['heldout_ece_raw']:.4f}",
              f"{r['heldout_ece_calibrated']:.4f}",
              "-" if r["fit_ece_cross_validated"] is None else f"{r['fit_ece_cross_validated']:.4f}",
              f"{r['seconds']:.0f}"] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("| " + " | ".join("-" * w for w in widths) + " |")
    for line in lines:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=1500, help="questions per part (fit, held out)")
    parser.add_argument("--k", type=int, default=5, help="passages retrieved per question (0: skip)")
    parser.add_argument("--methods", default="isotonic", help="comma-separated: isotonic, platt")
    parser.add_argument("--skip-subjqa", action="store_true")
    parser.add_argument("--lector", help="the lector binary [default: target/release/lector]")
    parser.add_argument("--build", action="store_true", help="build the release binary first")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    args = parser.parse_args()
    binary = lector_binary(args)
    methods = [m for m in args.methods.split(",") if m]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        dev = os.path.join(data_dir(), "squad", "dev-v1.1.json")
        fit, heldout = split_by_article(dev, tmp, args.questions)
        print(f"SQuAD v1.1 dev by article: {count_questions(fit)} questions to fit, {count_questions(heldout)} "
              f"held out (every s-th paragraph of each half; at most {args.questions} read)", file=sys.stderr)
        index = os.path.join(tmp, "squad-index")
        subprocess.run(["nice", binary, "index", "add", dev, "--index", index], check=True,
                       stdout=subprocess.DEVNULL)
        for k in [0] + ([args.k] if args.k else []):
            for method in methods:
                rows.append(experiment(binary, "SQuAD v1.1 dev", index, fit, heldout, args.questions, method, k))
                print(json.dumps(rows[-1]), file=sys.stderr)
        if not args.skip_subjqa:
            train, held = subjqa_split()
            train = write_part(train, os.path.join(tmp, "subjqa-fit.json"), args.questions)
            held = write_part(held, os.path.join(tmp, "subjqa-heldout.json"), args.questions)
            print(f"SubjQA by review: {count_questions(train)} questions to fit, {count_questions(held)} held out",
                  file=sys.stderr)
            subjqa_index = os.path.join(tmp, "subjqa-index")
            subprocess.run(["nice", binary, "index", "add", held, "--index", subjqa_index], check=True,
                           stdout=subprocess.DEVNULL)
            for method in methods:
                rows.append(experiment(binary, "SubjQA", subjqa_index, train, held, args.questions, method, 0))
                print(json.dumps(rows[-1]), file=sys.stderr)
    print_table(rows)
    if args.json:
        for row in rows:
            print(json.dumps(row))


if __name__ == "__main__":
    main()

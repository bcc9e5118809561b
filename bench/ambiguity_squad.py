#!/usr/bin/env python3
"""How often lector flags an answer as ambiguous on SQuAD v1.1 dev, and how accurate flagged and unflagged
answers are.

    python3 bench/ambiguity_squad.py [--fit-questions 1500] [--questions 2500] [--k 5] [--ambiguity-odds 3]
                                     [--lector target/release/lector] [--build]

The flag needs calibrated confidences, so the map is fitted on one half of the articles and the flag measured on
the other: SQuAD v1.1 dev is split by article (as bench/calibration_ece.py splits it); the first half's
paragraphs are indexed and `lector calibrate --retrieve K` fits the threshold and the isotonic map on the
passages the pipeline really retrieves for about --fit-questions of its questions; the second half's paragraphs
go in a second index, which gets that calibration.json, and `lector eval odqa` asks about --questions of its
questions (BM25, top K). Printed: the flag rate and the exact match of flagged and unflagged answers, each with
its bootstrap interval, as eval odqa reports them.

Data: $LECTOR_DATA_DIR, else ../shared/data beside the repository. Plain Python 3, no dependencies.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calibration_ece import count_questions, data_dir, lector_binary, run_json, write_part  # noqa: E402


def index(binary, squad, directory):
    subprocess.run(["nice", binary, "index", "add", squad, "--index", directory], check=True,
                   stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit-questions", type=int, default=1500, help="questions the map is fitted on")
    parser.add_argument("--questions", type=int, default=2500, help="held-out questions asked")
    parser.add_argument("--k", type=int, default=5, help="passages retrieved and read per question")
    parser.add_argument("--ambiguity-odds", default="3")
    parser.add_argument("--lector", help="the lector binary [default: target/release/lector]")
    parser.add_argument("--build", action="store_true", help="build the release binary first")
    args = parser.parse_args()
    binary = lector_binary(args)
    dev = os.path.join(data_dir(), "squad", "dev-v1.1.json")
    with open(dev, encoding="utf-8") as f:
        half = len(json.load(f)["data"]) // 2
    with tempfile.TemporaryDirectory() as tmp:
        fit = write_part(dev, os.path.join(tmp, "fit.json"), args.fit_questions, slice(None, half))
        heldout = write_part(dev, os.path.join(tmp, "heldout.json"), args.questions, slice(half, None))
        fit_index, heldout_index = os.path.join(tmp, "fit-index"), os.path.join(tmp, "heldout-index")
        index(binary, fit, fit_index)
        fitted, _ = run_json(binary, ["calibrate", "--squad", fit, "--index", fit_index,
                                      "--retrieve", str(args.k)])
        print(f"map fitted on {fitted['confidence']['answers']} answers of {count_questions(fit)} questions "
              f"(first half of the articles)", file=sys.stderr)
        index(binary, heldout, heldout_index)
        shutil.copy(os.path.join(fit_index, "calibration.json"), heldout_index)
        out, seconds = run_json(binary, ["eval", "odqa", "--squad", heldout, "--index", heldout_index,
                                         "--k", str(args.k), "--ambiguity-odds", args.ambiguity_odds])
    interval = lambda f: f"{f['mean']:.1f} [{f['low']:.1f}, {f['high']:.1f}]"  # noqa: E731
    print(f"{out['questions']} held-out questions (second half of the articles), k = {args.k}, "
          f"ambiguity odds {args.ambiguity_odds}, {seconds:.0f} s")
    print(f"flagged ambiguous: {out['ambiguous_answers']} answers, {interval(out['ambiguous'])}%")
    print(f"exact match, flagged:   {interval(out['exact_match_ambiguous'])}")
    print(f"exact match, unflagged: {interval(out['exact_match_unambiguous'])}")
    print(f"exact match, all:       {interval(out['exact_match'])}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Reference ROUGE scores and tokens from Google's rouge-score 0.1.2, for lector's parity tests.

    rouge_reference.py score [--stem] ITEMS.jsonl
        ITEMS.jsonl holds {"id", "prediction", "references": [...]} per line. Prints one JSON
        line per item: {"id": ..., "rouge1": [p, r, f], "rouge2": ..., "rougeL": ...,
        "rougeLsum": ...}, from RougeScorer.score_multi(references, prediction).

    rouge_reference.py tokens [--stem] TEXTS.jsonl
        TEXTS.jsonl holds one JSON string per line. Prints, per line, the JSON list of tokens
        that rouge-score's default tokenizer gives (NLTK's PorterStemmer() with --stem).

Floats are printed with Python's repr, so they read back exactly.
"""

import argparse
import json
import sys
from importlib import metadata

from rouge_score import rouge_scorer, tokenizers

ROUGE_TYPES = ["rouge1", "rouge2", "rougeL", "rougeLsum"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["score", "tokens"])
    parser.add_argument("path")
    parser.add_argument("--stem", action="store_true")
    args = parser.parse_args()

    version = metadata.version("rouge-score")
    if version != "0.1.2":
        sys.exit(f"rouge-score 0.1.2 expected, found {version}")

    out = []
    with open(args.path, encoding="utf-8") as lines:
        if args.mode == "score":
            scorer = rouge_scorer.RougeScorer(ROUGE_TYPES, use_stemmer=args.stem)
            for line in lines:
                if not line.strip():
                    continue
                item = json.loads(line)
                scores = scorer.score_multi(item["references"], item["prediction"])
                row = {"id": item["id"]}
                for rouge_type in ROUGE_TYPES:
                    s = scores[rouge_type]
                    row[rouge_type] = [float(s.precision), float(s.recall), float(s.fmeasure)]
                out.append(json.dumps(row))
        else:
            tokenizer = tokenizers.DefaultTokenizer(use_stemmer=args.stem)
            for line in lines:
                if line.strip():
                    out.append(json.dumps(tokenizer.tokenize(json.loads(line))))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

"""Reference BERTScore from the real `bert-score` package (0.3.13), for lector's parity tests and benchmark.

Usage (inside the environment of tools/setup-hf.sh, which installs bert-score):
    PY=$(bash tools/setup-hf.sh | tail -1)
    $PY tools/bertscore_reference.py ITEMS.jsonl --model DIR --layer N [--idf] [--baseline FILE]
                                     [--tokenizer slow|fast] [--threads 2] [--out OUT.json]

ITEMS.jsonl is the input of `lector eval bertscore`: one `{"id"?: .., "candidate": "...",
"references": ["...", ...]}` (or `"reference": "..."`) per line. The package is called exactly as a user
would: `bert_score.score(cands, refs, model_type=DIR, num_layers=N, idf=..., batch_size=64, device="cpu")`,
with every item's references as a list (so a candidate scores the maximum over its references), and with
`rescale_with_baseline=True, baseline_path=FILE, lang="en"` when --baseline is given.

--tokenizer: `slow` is the package's default (`use_fast_tokenizer=False`: the Python tokenizer, from
vocab.txt / vocab.json + merges.txt); `fast` (`use_fast_tokenizer=True`) reads tokenizer.json, which is all
a checkpoint fetched by `lector models pull embedder` has. lector always reads tokenizer.json but adds
RoBERTa's prefix space as the package's slow path does.

A checkpoint without tokenizer_config.json (the registry's all-MiniLM-L6-v2) leaves the tokenizer's
model_max_length unset, and the package's `truncation=True` then fails (OverflowError in tokenizers); the
model is then read from a temporary directory of links to its files plus a tokenizer_config.json with
`model_max_length` = the model's positions (512 for all-MiniLM-L6-v2, as on its hub page), where lector
truncates too. The output says so in `model_max_length_added`.

OUT.json (default: stdout) records the settings, the versions, the seconds spent, and per item
`{"id", "precision", "recall", "f1"}` (NaN written as null).
"""

import argparse
import importlib.metadata
import json
import math
import os
import sys
import tempfile
import time


def read_items(path):
    items = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            d = json.loads(line)
            refs = d["references"] if "references" in d else [d["reference"]]
            item_id = d.get("id")
            items.append({"id": str(number) if item_id is None else str(item_id), "candidate": d["candidate"], "references": refs})
    return items


def with_model_max_length(model_dir, temp_root):
    """`model_dir`, or a linked copy of it with a tokenizer_config.json giving model_max_length."""
    if os.path.exists(os.path.join(model_dir, "tokenizer_config.json")):
        return model_dir, None
    config = json.load(open(os.path.join(model_dir, "config.json"), encoding="utf-8"))
    positions = config["max_position_embeddings"]
    if config.get("model_type") in ("roberta", "xlm-roberta"):
        positions -= config.get("pad_token_id", 1) + 1  # positions start after padding_idx
    linked = os.path.join(temp_root, os.path.basename(os.path.normpath(model_dir)))
    os.mkdir(linked)
    for name in os.listdir(model_dir):
        os.symlink(os.path.abspath(os.path.join(model_dir, name)), os.path.join(linked, name))
    with open(os.path.join(linked, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"model_max_length": positions}, f)
    return linked, positions


def finite(x):
    x = float(x)
    return None if math.isnan(x) else x


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("items")
    parser.add_argument("--model", required=True, help="checkpoint directory")
    parser.add_argument("--layer", type=int, required=True, help="num_layers: 0 is the embedding output")
    parser.add_argument("--idf", action="store_true")
    parser.add_argument("--baseline", help="baseline file (LAYER,P,R,F) for rescale_with_baseline")
    parser.add_argument("--tokenizer", choices=["slow", "fast"], default="slow")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out")
    args = parser.parse_args()

    import torch
    import transformers
    from bert_score import score

    torch.set_num_threads(args.threads)
    items = read_items(args.items)
    temp = tempfile.TemporaryDirectory()
    model_dir, added = with_model_max_length(args.model, temp.name)
    start = time.perf_counter()
    (p, r, f) = score(
        [i["candidate"] for i in items],
        [i["references"] for i in items],
        model_type=model_dir,
        num_layers=args.layer,
        idf=args.idf,
        batch_size=64,
        nthreads=0,  # the idf counts without a process pool: the same numbers
        device="cpu",
        lang="en" if args.baseline else None,
        rescale_with_baseline=bool(args.baseline),
        baseline_path=args.baseline,
        use_fast_tokenizer=args.tokenizer == "fast",
    )
    seconds = time.perf_counter() - start
    out = {
        "package": "bert-score " + importlib.metadata.version("bert-score"),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "model": os.path.basename(os.path.normpath(args.model)),
        "layer": args.layer,
        "idf": args.idf,
        "baseline": os.path.basename(args.baseline) if args.baseline else None,
        "tokenizer": args.tokenizer,
        "model_max_length_added": added,
        "items_file": os.path.basename(args.items),
        "seconds": round(seconds, 3),
        "scores": [
            {"id": i["id"], "precision": finite(a), "recall": finite(b), "f1": finite(c)}
            for i, a, b, c in zip(items, p.tolist(), r.tolist(), f.tolist())
        ],
    }
    # One item per line: fixtures stay readable and their diffs small.
    scores = out.pop("scores")
    head = json.dumps(out, indent=1, ensure_ascii=False)
    lines = ",\n".join("  " + json.dumps(s, ensure_ascii=False) for s in scores)
    text = head[:-2] + ',\n "scores": [\n' + lines + "\n ]\n}"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f_out:
            f_out.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()

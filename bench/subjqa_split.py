#!/usr/bin/env python3
"""Splits SubjQA (../shared/data/subjqa/*.train.squad2.json) into a training part and a held-out part, by review.

    python3 bench/subjqa_split.py [--data DIR] [--out DIR] [--json]

The source's dev split duplicates its train split, so we hold out part of the data ourselves. One paragraph is
one review, and a review goes wholly to one side, with all of its questions: it is held out when
int(sha256(domain + "\\n" + context), 16) % 100 < 20, where domain is the file's name before the first dot
(books, electronics, grocery, movies, restaurants, tripadvisor). Fixed and deterministic: no seed, nothing tuned,
and it does not depend on file order. About 20% of the reviews (and so roughly 20% of the questions) are held out.

Writes, into --out (default ~/.cache/lector/subjqa-split):
  train.json, heldout.json      SQuAD v2.0 layout (`version` "v2.0"), one article per domain titled by the
                                domain name, paragraphs in source order; questions keep their id, question,
                                answers (text, answer_start) and is_impossible unchanged
  heldout-<domain>.json         the held-out part of one domain alone (same layout, one article)
and prints, per domain and in total, reviews / questions / answerable / unanswerable for both parts; it checks
that no context appears in both parts (also across domains) and that every question id is unique.

Contexts are kept byte for byte, including the "ANSWERNOTFOUND" token that ends every SubjQA review: the data
ships it (in the source the unanswerable questions point at it), and removing it would change the contexts the
readers see against the published setting. Keeping the text as-is also keeps every answer_start valid. Answer
offsets that do not match their text are counted (and reported) but not altered.

Input files: --data DIR (default $LECTOR_DATA_DIR, else ../shared/data relative to the repository root) /subjqa/.
Plain Python 3, no dependencies.
"""
import argparse
import glob
import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELDOUT_PERCENT = 20


def held_out(domain, context):
    h = hashlib.sha256((domain + "\n" + context).encode("utf-8")).hexdigest()
    return int(h, 16) % 100 < HELDOUT_PERCENT


def squad(articles):
    return {"version": "v2.0", "data": articles}


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def counts(paragraphs):
    qas = [qa for p in paragraphs for qa in p["qas"]]
    unans = sum(1 for qa in qas if qa.get("is_impossible", not qa["answers"]))
    return {"reviews": len(paragraphs), "questions": len(qas), "answerable": len(qas) - unans,
            "unanswerable": unans}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data = os.environ.get("LECTOR_DATA_DIR") or os.path.join(ROOT, "..", "shared", "data")
    ap.add_argument("--data", default=data, help="data folder holding subjqa/")
    ap.add_argument("--out", default=os.path.join("~", ".cache", "lector", "subjqa-split"))
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = ap.parse_args()
    out = os.path.expanduser(args.out)

    files = sorted(glob.glob(os.path.join(args.data, "subjqa", "*.train.squad2.json")))
    if not files:
        sys.exit(f"no subjqa/*.train.squad2.json under {args.data} (set --data or LECTOR_DATA_DIR)")
    train_articles, heldout_articles = [], []
    per_domain = {}
    ids = set()
    side_of_context = {}
    bad_offsets = 0
    for path in files:
        domain = os.path.basename(path).split(".")[0]
        with open(path, encoding="utf-8") as f:
            src = json.load(f)
        tr, ho = [], []
        for article in src["data"]:
            for para in article["paragraphs"]:
                ctx = para["context"]
                side = "heldout" if held_out(domain, ctx) else "train"
                prev = side_of_context.setdefault(ctx, side)
                if prev != side:
                    sys.exit(f"context in both parts ({domain}): {ctx[:80]!r}")
                for qa in para["qas"]:
                    if qa["id"] in ids:
                        sys.exit(f"duplicate question id {qa['id']} ({domain})")
                    ids.add(qa["id"])
                    for a in qa["answers"]:
                        if ctx[a["answer_start"]:a["answer_start"] + len(a["text"])] != a["text"]:
                            bad_offsets += 1
                (ho if side == "heldout" else tr).append(para)
        train_articles.append({"title": domain, "paragraphs": tr})
        heldout_articles.append({"title": domain, "paragraphs": ho})
        per_domain[domain] = {"train": counts(tr), "heldout": counts(ho)}

    # the check, again from what is written: no context in both parts
    train_ctx = {p["context"] for a in train_articles for p in a["paragraphs"]}
    held_ctx = {p["context"] for a in heldout_articles for p in a["paragraphs"]}
    overlap = train_ctx & held_ctx
    if overlap:
        sys.exit(f"{len(overlap)} contexts in both parts")

    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "train.json"), squad(train_articles))
    write_json(os.path.join(out, "heldout.json"), squad(heldout_articles))
    for art in heldout_articles:
        write_json(os.path.join(out, f"heldout-{art['title']}.json"), squad([art]))

    total = {part: counts([p for a in arts for p in a["paragraphs"]])
             for part, arts in (("train", train_articles), ("heldout", heldout_articles))}
    report = {"out": out, "rule": f"sha256(domain + '\\n' + context) % 100 < {HELDOUT_PERCENT} -> heldout",
              "domains": per_domain, "total": total, "contexts_in_both_parts": 0,
              "answer_offsets_not_matching_text": bad_offsets}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"SubjQA split by review ({report['rule']}), written to {out}")
    head = f"{'domain':<12} | {'part':<7} | {'reviews':>7} | {'questions':>9} | {'answerable':>10} | " \
           f"{'unanswerable':>12}"
    print(head)
    print("-" * len(head))
    rows = list(per_domain.items()) + [("total", total)]
    for domain, parts in rows:
        for part in ("train", "heldout"):
            c = parts[part]
            print(f"{domain:<12} | {part:<7} | {c['reviews']:>7} | {c['questions']:>9} | {c['answerable']:>10} | "
                  f"{c['unanswerable']:>12}")
    print(f"contexts in both parts: 0; answer offsets not matching their text: {bad_offsets}")


if __name__ == "__main__":
    main()

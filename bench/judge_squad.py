#!/usr/bin/env python3
"""`lector eval judge` on SQuAD v1.1 dev: how far a judge agrees with EM/F1-derived labels, how much the order of
a pair sways it, and how often its replies cannot be read.

    python3 bench/judge_squad.py [--lector target/release/lector] [--n 200] [--seed 0] [--work DIR]
                                 [--smollm2-n N] [--skip-smollm2] [--concurrency 4]

1. Items. `--n` answerable questions drawn (seeded) from ../shared/data/squad/dev-v1.1.json, each given one
   candidate answer, a third of each kind:
   - right: one of its gold answers;
   - partial: a gold answer with words dropped (a contiguous part of it kept) or with the 2-4 words that follow it
     in the paragraph added;
   - wrong: another question's gold answer of the same rough type (number, name, other), or a random 2-6 word
     span of the paragraph away from every gold answer.
   Labels come from SQuAD EM/F1 of the candidate (official normalisation, best gold): EM 1 -> correct,
   F1 >= 0.5 -> partially_correct, else incorrect; so a "partial" candidate can be labelled incorrect when the
   added words swamp it. Pairwise items pair the candidate with another of a different kind for the same question
   (a tenth pair two right answers), in random order, labelled A / B / tie by F1.
2. Judges:
   (a) a scripted judge: a Python http.server speaking the OpenAI chat-completions protocol that judges by token
       overlap (lower-cased words, punctuation stripped, articles kept, unlike the labels' normalisation):
       overlap F1 with the best reference >= 0.8 correct, >= 0.4 partially correct, else incorrect; pairwise the
       higher overlap wins, a difference under 0.05 is a tie, and a difference under 0.25 goes to the answer
       shown first (a scripted position bias); one reply in 25 (chosen by a hash of the prompt) is malformed.
       It checks the pipeline end to end; its kappa is not a judge's quality.
   (b) SmolLM2-135M-Instruct (the registry's GGUF) on the CPU, greedy, at most 32 new tokens.
   Each judges the pointwise (correctness) items and the pairwise items (both orders). Replies are cached under
   the work directory, so a rerun is cheap; the scripted judge is run twice to show the second run asks nothing.
3. Prints kappa with its 95% bootstrap interval, agreement, position bias, order-dependent rate, unparseable
   rate, verbosity r, requests, tokens and seconds per run.

Needs the shared data and a release binary with `eval judge` (nice cargo build --release -p lector-cli).
"""

import argparse
import collections
import hashlib
import json
import os
import random
import re
import string
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def data_dir():
    env = os.environ.get("LECTOR_DATA_DIR")
    return Path(env) if env else ROOT.parent / "shared" / "data"


# --- SQuAD's official normalisation and scores (evaluate-v1.1.py) ---------------------------------------------

def normalize_answer(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1_score(prediction, gold):
    p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def best_scores(candidate, golds):
    em = max(float(normalize_answer(candidate) == normalize_answer(g)) for g in golds)
    return em, max(f1_score(candidate, g) for g in golds)


def label_of(em, f1):
    if em == 1.0:
        return "correct"
    return "partially_correct" if f1 >= 0.5 else "incorrect"


# --- Items --------------------------------------------------------------------------------------------------------

def load_questions():
    squad = json.loads((data_dir() / "squad" / "dev-v1.1.json").read_text())
    questions = []
    for article in squad["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                golds = [a["text"] for a in qa["answers"]]
                starts = [a["answer_start"] for a in qa["answers"]]
                questions.append({"id": qa["id"], "question": qa["question"], "context": para["context"],
                                  "golds": golds, "starts": starts})
    return questions


def answer_type(text):
    if re.search(r"\d", text) or re.search(r"\b(one|two|three|four|five|six|seven|eight|nine|ten|hundred|thousand|million)\b", text.lower()):
        return "number"
    return "name" if text[:1].isupper() else "other"


def partial_of(q, rng):
    gold, start = q["golds"][0], q["starts"][0]
    words = gold.split()
    if len(words) >= 2 and rng.random() < 0.5:
        keep = rng.randint(1, len(words) - 1)
        part = words[:keep] if rng.random() < 0.5 else words[-keep:]
        return " ".join(part)
    after = q["context"][start + len(gold):].split()
    extra = after[: rng.randint(2, 4)]
    if not extra:
        before = q["context"][:start].split()
        return " ".join(before[-3:] + [gold])
    return " ".join([gold] + extra)


def wrong_of(q, by_type, rng):
    if rng.random() < 0.5:
        pool = by_type[answer_type(q["golds"][0])]
        for _ in range(50):
            other = rng.choice(pool)
            if other["id"] != q["id"] and best_scores(other["golds"][0], q["golds"])[1] == 0.0:
                return other["golds"][0]
    words = q["context"].split()
    gold_words = {w for g in q["golds"] for w in normalize_answer(g).split()}
    for _ in range(100):
        n = rng.randint(2, 6)
        i = rng.randrange(0, max(1, len(words) - n))
        span = " ".join(words[i:i + n]).strip(string.punctuation + " ")
        if span and not (set(normalize_answer(span).split()) & gold_words):
            return span
    return "I do not know"


def build_items(n, seed):
    rng = random.Random(seed)
    questions = load_questions()
    by_type = collections.defaultdict(list)
    for q in questions:
        by_type[answer_type(q["golds"][0])].append(q)
    chosen = rng.sample(questions, n)
    kinds = ["right", "partial", "wrong"] * (n // 3 + 1)
    rng.shuffle(kinds)
    pointwise, pairwise = [], []
    for i, q in enumerate(chosen):
        candidates = {"right": rng.choice(q["golds"]), "partial": partial_of(q, rng), "wrong": wrong_of(q, by_type, rng)}
        kind = kinds[i]
        answer = candidates[kind]
        em, f1 = best_scores(answer, q["golds"])
        pointwise.append({"id": q["id"], "question": q["question"], "references": q["golds"], "answer": answer,
                          "label": label_of(em, f1), "kind": kind, "em": em, "f1": f1})
        if i % 10 == 9:
            other_kind, other = "right", rng.choice(q["golds"])
        else:
            other_kind = rng.choice([k for k in candidates if k != kind])
            other = candidates[other_kind]
        (a, ka), (b, kb) = (answer, kind), (other, other_kind)
        if rng.random() < 0.5:
            (a, ka), (b, kb) = (b, kb), (a, ka)
        fa, fb = best_scores(a, q["golds"])[1], best_scores(b, q["golds"])[1]
        label = "tie" if abs(fa - fb) < 1e-9 else ("A" if fa > fb else "B")
        pairwise.append({"id": q["id"], "question": q["question"], "references": q["golds"], "answer_a": a,
                         "answer_b": b, "label": label, "kinds": [ka, kb], "f1_a": fa, "f1_b": fb})
    return pointwise, pairwise


# --- The scripted judge -------------------------------------------------------------------------------------------

def overlap_tokens(text):
    return "".join(c for c in text.lower() if c not in set(string.punctuation)).split()


def overlap_f1(candidate, references):
    best = 0.0
    for ref in references:
        c, r = collections.Counter(overlap_tokens(candidate)), collections.Counter(overlap_tokens(ref))
        same = sum((c & r).values())
        if same:
            p, q = same / sum(c.values()), same / sum(r.values())
            best = max(best, 2 * p * q / (p + q))
    return best


def field(prompt, label):
    for line in prompt.splitlines():
        if line.startswith(label + ": "):
            return line[len(label) + 2:]
    return None


def references_of(prompt):
    one = field(prompt, "Reference answer")
    if one is not None:
        return [one]
    lines = prompt.splitlines()
    if "Reference answers:" not in lines:
        return []
    refs = []
    for line in lines[lines.index("Reference answers:") + 1:]:
        if not line.startswith("- "):
            break
        refs.append(line[2:])
    return refs


def scripted_reply(prompt):
    if int(hashlib.md5(prompt.encode()).hexdigest(), 16) % 25 == 0:
        return "Hmm, hard to say."
    refs = references_of(prompt)
    candidate = field(prompt, "Candidate answer")
    if candidate is not None:
        f1 = overlap_f1(candidate, refs)
        verdict = "correct" if f1 >= 0.8 else ("partially correct" if f1 >= 0.4 else "incorrect")
        return f"Verdict: {verdict}\nReason: token overlap {f1:.2f}"
    a, b = field(prompt, "Answer A"), field(prompt, "Answer B")
    fa, fb = overlap_f1(a, refs), overlap_f1(b, refs)
    if abs(fa - fb) < 0.05:
        verdict = "tie"
    elif abs(fa - fb) < 0.25:
        verdict = "A"  # the scripted position bias: a close call goes to the answer shown first
    else:
        verdict = "A" if fa > fb else "B"
    return f"Verdict: {verdict}\nReason: overlap {fa:.2f} against {fb:.2f}"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        text = scripted_reply(prompt)
        reply = json.dumps({
            "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def start_scripted_judge():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


# --- Runs ---------------------------------------------------------------------------------------------------------

def judge(lector, items, mode, cache, extra):
    cmd = [str(lector), "eval", "judge", str(items), "--mode", mode, "--json", "--cache", str(cache)] + extra
    print("+", " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def describe(name, s):
    a = s.get("agreement") or {}
    k = a.get("kappa")
    kappa = f"{k['mean']:.3f} [{k['low']:.3f}, {k['high']:.3f}]" if k else "undefined"
    line = (f"{name}: kappa {kappa} over {a.get('compared', 0)} of {a.get('labelled', 0)} labelled, "
            f"agreement {100 * a.get('accuracy', 0):.1f}%, unparseable {100 * s['unparseable_rate']:.1f}% "
            f"({s['unparseable_replies']}/{s['replies']} replies)")
    pb = s.get("position_bias")
    if pb:
        line += (f", position bias {100 * pb['position_bias']:.1f}% (first shown wins twice, of "
                 f"{pb['parsed_pairs']} parsed pairs), order-dependent {100 * pb['order_dependent_rate']:.1f}%")
    r = s.get("verbosity_r")
    lr = s.get("label_verbosity_r")
    line += f", verbosity r {r if r is None else round(r, 3)} (labels {lr if lr is None else round(lr, 3)})"
    c = s["cost"]
    line += (f"; verdicts {json.dumps(s['verdicts'])}; {c['requests']} requests, {c['cached']} cached, "
             f"{c['prompt_tokens']} prompt + {c['generated_tokens']} generated tokens, {s['seconds']:.1f} s")
    print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lector", default=str(ROOT / "target" / "release" / "lector"))
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", help="directory for items, caches and outputs [default: a new temporary one]")
    ap.add_argument("--smollm2-n", type=int, help="judge only the first N items with SmolLM2 [default: all]")
    ap.add_argument("--skip-smollm2", action="store_true")
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight to the scripted judge")
    args = ap.parse_args()

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="judge-squad-"))
    work.mkdir(parents=True, exist_ok=True)
    pointwise, pairwise = build_items(args.n, args.seed)
    files = {}
    for name, rows in (("pointwise", pointwise), ("pairwise", pairwise)):
        files[name] = work / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    kinds = collections.Counter(r["kind"] for r in pointwise)
    labels = collections.Counter(r["label"] for r in pointwise)
    pair_labels = collections.Counter(r["label"] for r in pairwise)
    print(f"{args.n} SQuAD v1.1 dev questions (seed {args.seed}) in {work}: candidates {dict(kinds)}; "
          f"labels {dict(labels)}; pair labels {dict(pair_labels)}")

    server, url = start_scripted_judge()
    scripted = ["--endpoint", url, "--api-model", "overlap-judge", "--concurrency", str(args.concurrency)]
    for mode, name in (("correctness", "pointwise"), ("pairwise", "pairwise")):
        cache = work / "cache-scripted"
        describe(f"scripted judge, {mode}", judge(args.lector, files[name], mode, cache, scripted))
        again = judge(args.lector, files[name], mode, cache, scripted)
        print(f"  second run: {again['cost']['requests']} requests, {again['cost']['cached']} cached")
    server.shutdown()

    if args.skip_smollm2:
        return
    smol = ["--max-new-tokens", "32", "--concurrency", "1"]
    for mode, name in (("correctness", "pointwise"), ("pairwise", "pairwise")):
        path = files[name]
        if args.smollm2_n:
            path = work / f"{name}-first{args.smollm2_n}.jsonl"
            path.write_text("".join(files[name].read_text().splitlines(keepends=True)[: args.smollm2_n]))
        summary = judge(args.lector, path, mode, work / "cache-smollm2", smol)
        (work / f"smollm2-{mode}.json").write_text(json.dumps(summary, indent=2))
        describe(f"SmolLM2-135M-Instruct, {mode}", summary)


if __name__ == "__main__":
    main()

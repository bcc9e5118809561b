#!/usr/bin/env python3
"""Benchmark: reader training speed, `lector train reader` against PyTorch + transformers, side by side.

Same checkpoint (default models/reader-minilm-squad, loaded as float32 on both sides), same questions (the first
--questions of --train, written once to a temporary SQuAD file that both sides read), same max_seq_len /
doc_stride / batch size, both on --threads threads. Prints training windows/s (the median of the per-step rates
and the overall rate, after --warmup-steps-skip steps), the ratio lector/torch, and the CPU (model name and
whether it has avx512f; avx512_bf16 and amx_bf16 too, which matter for bf16).

    PY=$(bash tools/setup-hf.sh | tail -1)
    $PY bench/train_speed.py [--lector target/release/lector] [--model models/reader-minilm-squad]
                             [--train FILE] [--questions 256] [--max-seq-len 384] [--doc-stride 128]
                             [--batch-size 16] [--steps 12] [--warmup-steps-skip 2] [--precision f32|bf16]
                             [--threads 2] [--only torch|lector] [--rounds 3] [--json]

The two sides take turns over --rounds rounds (the order reversed every other round, bench/rounds.py), so that
load from other jobs lands on both; each side's row is its median round, with every round's spread and ratio.

lector side: runs
    lector train reader --model DIR --train FILE --out TMP --max-seq-len N --doc-stride S --batch-size B
                        --max-steps K --seed 1 --threads T [--precision bf16]
with RAYON_NUM_THREADS=T and reads TMP/train-log.jsonl (one object per optimiser step: step, loss, lr,
examples_per_s, windows, elapsed_s). A step's rate is its `windows` over the difference of `elapsed_s` with the
previous step (the first logged step: its own elapsed_s).

PyTorch side (the transformers question-answering example's way): tokenizer(question, context,
truncation="only_second", max_length, stride, return_overflowing_tokens, return_offsets_mapping); a window
whose span does not hold the answer targets [CLS]; windows shuffled (seed 1) and cut into batches of
--batch-size, each padded to its longest window (dynamic padding, like lector). model.train() (dropout on),
AdamW lr 3e-5 with a linear decay, the model's own start/end cross-entropy, clip_grad_norm_(1.0);
torch.set_num_threads(T); --precision bf16 runs forward and loss under torch.autocast("cpu", dtype=bfloat16).
A step's time covers padding the batch, forward, backward, clipping and the optimiser step; model loading and
tokenisation are outside it.

Needs the environment of tools/setup-hf.sh for the PyTorch side (the lector side alone needs plain Python).
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

from cpu import describe as cpu_describe, line as cpu_line
from rounds import alternate, summary, table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get("LECTOR_DATA_DIR") or os.path.join(ROOT, "..", "shared", "data")


def first_questions(path, n):
    """The first n questions of a SQuAD file, as a SQuAD file (same layout, paragraphs cut to those questions)."""
    with open(path, encoding="utf-8") as f:
        src = json.load(f)
    data, left = [], n
    for article in src["data"]:
        paras = []
        for para in article["paragraphs"]:
            if left <= 0:
                break
            qas = para["qas"][:left]
            left -= len(qas)
            paras.append({"context": para["context"], "qas": qas})
        if paras:
            data.append({"title": article.get("title", ""), "paragraphs": paras})
        if left <= 0:
            break
    if left > 0:
        sys.exit(f"{path} has fewer than {n} questions")
    return {"version": src.get("version", "1.1"), "data": data}


def rates(steps, skip):
    """steps: [(windows, seconds)] per step. Median of per-step windows/s and overall, after `skip` steps."""
    kept = steps[skip:]
    if not kept:
        sys.exit(f"no steps left after skipping {skip} warm-up steps (got {len(steps)})")
    per = [w / s for w, s in kept if s > 0]
    tot_w = sum(w for w, _ in kept)
    tot_s = sum(s for _, s in kept)
    return {"windows_per_s_median": statistics.median(per), "windows_per_s_overall": tot_w / tot_s,
            "measured_steps": len(kept), "measured_windows": tot_w, "measured_s": tot_s}


# ---------------------------------------------------------------------------------------------------- PyTorch


def torch_windows(tokenizer, squad, max_len, stride):
    """Training windows, as the transformers QA example's prepare_train_features builds them."""
    questions, contexts, answers = [], [], []
    for article in squad["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                questions.append(qa["question"].lstrip())
                contexts.append(para["context"])
                answers.append(qa["answers"][0] if qa.get("answers") else None)
    pad_right = tokenizer.padding_side == "right"
    assert pad_right, "question-first windows expected"
    enc = tokenizer(questions, contexts, truncation="only_second", max_length=max_len, stride=stride,
                    return_overflowing_tokens=True, return_offsets_mapping=True, padding=False)
    windows = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        ids = enc["input_ids"][i]
        cls = ids.index(tokenizer.cls_token_id)
        seq = enc.sequence_ids(i)
        ans = answers[enc["overflow_to_sample_mapping"][i]]
        start_pos = end_pos = cls
        if ans is not None:
            s_char = ans["answer_start"]
            e_char = s_char + len(ans["text"])
            ts = 0
            while seq[ts] != 1:
                ts += 1
            te = len(ids) - 1
            while seq[te] != 1:
                te -= 1
            if offsets[ts][0] <= s_char and offsets[te][1] >= e_char:
                ctx_end = te
                while ts <= ctx_end and offsets[ts][0] <= s_char:
                    ts += 1
                start_pos = ts - 1
                while offsets[te][1] >= e_char:
                    te -= 1
                end_pos = te + 1
        w = {"input_ids": ids, "attention_mask": enc["attention_mask"][i],
             "start_positions": start_pos, "end_positions": end_pos}
        if "token_type_ids" in enc:
            w["token_type_ids"] = enc["token_type_ids"][i]
        windows.append(w)
    return windows


def run_torch(args, squad):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch
        import transformers
        from transformers import AutoModelForQuestionAnswering, AutoTokenizer
    except ImportError as e:
        sys.exit(f"the PyTorch side needs torch + transformers ({e}): run it with the interpreter that "
                 f"`bash tools/setup-hf.sh | tail -1` prints, or pass --only lector")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    transformers.logging.set_verbosity_error()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForQuestionAnswering.from_pretrained(args.model, dtype=torch.float32)
    model.train()
    windows = torch_windows(tokenizer, squad, args.max_seq_len, args.doc_stride)
    order = list(range(len(windows)))
    random.Random(1).shuffle(order)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    sched = transformers.get_linear_schedule_with_warmup(opt, num_warmup_steps=0, num_training_steps=args.steps)
    bf16 = args.precision == "bf16"
    steps, log, padded_lens = [], [], []
    pos = 0
    t_start = time.perf_counter()
    for step in range(args.steps):
        if pos + args.batch_size > len(order):  # next epoch, reshuffled
            random.Random(1 + step).shuffle(order)
            pos = 0
        feats = [windows[j] for j in order[pos:pos + args.batch_size]]
        pos += args.batch_size
        t0 = time.perf_counter()
        batch = tokenizer.pad(feats, padding="longest", return_tensors="pt")
        padded_lens.append(int(batch["input_ids"].shape[1]))
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        dt = time.perf_counter() - t0
        steps.append((len(feats), dt))
        log.append({"step": step, "loss": round(loss.item(), 4), "windows": len(feats), "seconds": round(dt, 3),
                    "padded_len": padded_lens[-1], "elapsed_s": round(time.perf_counter() - t_start, 3)})
        if not args.json:
            print(f"  torch  step {step:>3}: loss {loss.item():.4f}, {len(feats)} windows x {padded_lens[-1]} "
                  f"tokens, {len(feats) / dt:.2f} windows/s", file=sys.stderr)
    out = rates(steps, args.warmup_steps_skip)
    out.update({"windows_total": len(windows), "mean_padded_len": statistics.mean(padded_lens),
                "torch": torch.__version__, "transformers": transformers.__version__, "log": log})
    return out


# ----------------------------------------------------------------------------------------------------- lector


def run_lector(args, train_file, tmp):
    binary = args.lector
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        sys.exit(f"lector binary not found or not executable: {binary} "
                 f"(build it: cargo build --release -p lector-cli, or pass --lector PATH; --only torch skips it)")
    out_dir = os.path.join(tempfile.mkdtemp(dir=tmp), "lector-out")  # a fresh run each round
    cmd = [binary, "train", "reader", "--model", args.model, "--train", train_file, "--out", out_dir,
           "--max-seq-len", str(args.max_seq_len), "--doc-stride", str(args.doc_stride),
           "--batch-size", str(args.batch_size), "--max-steps", str(args.steps), "--seed", "1",
           "--threads", str(args.threads)]
    if args.precision == "bf16":
        cmd += ["--precision", "bf16"]
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    if not args.json:
        print("  lector: " + " ".join(cmd), file=sys.stderr)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-15:]
        sys.exit(f"lector train reader failed (exit {proc.returncode}):\n  " + "\n  ".join(tail))
    log_path = os.path.join(out_dir, "train-log.jsonl")
    if not os.path.isfile(log_path):
        sys.exit(f"lector exited 0 but wrote no train-log.jsonl in its --out folder {out_dir}")
    log = []
    with open(log_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"train-log.jsonl line {n} is not JSON ({e}): {line[:120]}")
            if "step" in rec:  # ignore any non-step record (e.g. an epoch summary)
                log.append(rec)
    if not log:
        sys.exit("train-log.jsonl holds no step records")
    log.sort(key=lambda r: r["step"])
    missing = [k for k in ("windows", "elapsed_s") if k not in log[0]]
    if missing:
        sys.exit(f"train-log.jsonl records lack {missing}: {log[0]}")
    steps, prev = [], 0.0
    for rec in log:
        steps.append((rec["windows"], rec["elapsed_s"] - prev))
        prev = rec["elapsed_s"]
    out = rates(steps, args.warmup_steps_skip)
    out.update({"steps_logged": len(log), "process_wall_s": wall, "log": log})
    if not args.json:
        for rec, (w, s) in zip(log, steps):
            print(f"  lector step {rec['step']:>3}: loss {rec.get('loss', float('nan')):.4f}, {w} windows, "
                  f"{w / s if s > 0 else float('nan'):.2f} windows/s", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lector", default=os.path.join(ROOT, "target", "release", "lector"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "reader-minilm-squad"))
    ap.add_argument("--train", default=os.path.join(DATA, "squad", "train-v1.1.json"))
    ap.add_argument("--questions", type=int, default=256, help="the first N questions of --train")
    ap.add_argument("--max-seq-len", type=int, default=384)
    ap.add_argument("--doc-stride", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup-steps-skip", type=int, default=2)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=["torch", "lector"], help="run one side only")
    ap.add_argument("--rounds", type=int, default=3,
                    help="turns each side takes, alternating (bench/rounds.py; default 3)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    if args.steps <= args.warmup_steps_skip:
        sys.exit("--steps must exceed --warmup-steps-skip")
    if not os.path.isdir(args.model):
        sys.exit(f"no checkpoint folder {args.model}")
    if args.only != "torch" and not os.path.isfile(args.lector):  # fail before the slow PyTorch side
        sys.exit(f"lector binary not found: {args.lector} (build it: cargo build --release -p lector-cli, "
                 f"or pass --lector PATH; --only torch runs the PyTorch side alone)")

    squad = first_questions(args.train, args.questions)
    cpu = cpu_describe()
    result = {"cpu": cpu, "settings": {k: getattr(args, k) for k in (
        "model", "questions", "max_seq_len", "doc_stride", "batch_size", "steps", "warmup_steps_skip",
        "precision", "threads")}, "sides": {}}
    result["settings"]["train"] = os.path.basename(args.train)
    with tempfile.TemporaryDirectory(prefix="lector-train-speed-") as tmp:
        train_file = os.path.join(tmp, "train.json")
        with open(train_file, "w", encoding="utf-8") as f:
            json.dump(squad, f, ensure_ascii=False)
        runners = {"lector": lambda: run_lector(args, train_file, tmp), "torch": lambda: run_torch(args, squad)}
        chosen = {name: run for name, run in runners.items() if args.only in (None, name)}

        def turn(name):
            side = chosen[name]()
            return dict(side, rate=side["windows_per_s_median"])

        # The sides take turns, so that load from other jobs lands on both; each side's figures
        # are those of its median round.
        runs = alternate({name: (lambda name=name: turn(name)) for name in chosen}, max(1, args.rounds))
        for name, turns in runs.items():
            result["sides"][name] = sorted(turns, key=lambda t: t["rate"])[len(turns) // 2]
        if len(chosen) == 2:
            result["rounds"] = summary(runs, "torch")
    sides = result["sides"]
    if "lector" in sides and "torch" in sides:
        result["ratio_lector_over_torch"] = {
            "median": sides["lector"]["windows_per_s_median"] / sides["torch"]["windows_per_s_median"],
            "overall": sides["lector"]["windows_per_s_overall"] / sides["torch"]["windows_per_s_overall"]}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    s = result["settings"]
    print(f"training speed, {os.path.basename(os.path.normpath(s['model']))}, first {s['questions']} questions of "
          f"{s['train']}, max_seq_len {s['max_seq_len']}, stride {s['doc_stride']}, batch {s['batch_size']}, "
          f"{s['steps']} steps (first {s['warmup_steps_skip']} skipped), {s['precision']}, {s['threads']} threads")
    print(f"CPU: {cpu_line(cpu)}")
    print(f"{'side':<8} | {'windows/s (median)':>18} | {'windows/s (overall)':>19} | {'ratio lector/torch':>18}")
    print("-" * 74)
    for name in ("lector", "torch"):
        if name not in sides:
            continue
        r = sides[name]
        ratio = ""
        if "ratio_lector_over_torch" in result and name == "lector":
            ratio = f"{result['ratio_lector_over_torch']['median']:.2f}x"
        print(f"{name:<8} | {r['windows_per_s_median']:>18.2f} | {r['windows_per_s_overall']:>19.2f} | {ratio:>18}")
    if "rounds" in result:
        print(f"\nover {args.rounds} alternating rounds (windows/s, median of the steps):\n")
        print(table(result["rounds"], "windows/s", "torch"))
    if "torch" in sides:
        t = sides["torch"]
        print(f"torch: {t['windows_total']} windows from {s['questions']} questions, mean padded length "
              f"{t['mean_padded_len']:.1f}; torch {t['torch']}, transformers {t['transformers']}")


if __name__ == "__main__":
    main()

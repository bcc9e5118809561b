#!/usr/bin/env python3
"""Benchmark: `lector read` vs the Hugging Face question-answering pipeline (torch, CPU) side by side.

Same checkpoint (models/reader-minilm-squad), same first N SQuAD v1.1 dev questions, same threads (2), the
pipeline at the batch size given (its fastest on this machine is found with --batch-sizes). The sides take
turns over --rounds rounds, the order reversed every other round (bench/rounds.py), and each side's min /
median / max, the ratio of medians, the per-round ratios and the load at each start are printed; also
prints questions/s (model loading excluded on both sides), peak RSS, the answer agreement and the ratio.
Then GFLOP/s side by side (bench/gflops.py): both readers' achieved GFLOP/s, with FLOPs counted from the model's
shapes and the real token counts, against a plain matrix product of the model's linear shapes on this machine
(candle's `Tensor::matmul`, lector's one-`gemm`-per-thread, torch's `linear`), all on 2 threads.

    python3 bench/reader_speed.py [--limit 2000] [--batch-sizes 1,8,32] [--rounds 3] [--no-gflops]
                                  [--precisions f32,bf16] [--peer-precisions f32,bf16] [--lector BIN]
                                  [--ort f32,int8]

`--precisions` runs lector once per listed `--precision` in every round (bf16: bfloat16 products, see the
README); each is compared with the pipeline, answers and speed. `--peer-precisions f32,bf16` also runs the
pipeline under torch's CPU autocast to bfloat16; answers are compared with the float32 pipeline, speed with the
fastest pipeline run of any batch size and precision. `--lector BIN` skips the release build.

`--ort f32,int8` adds ONNX Runtime peers (tools/ort_qa.py): the checkpoint exported to ONNX, in float32 and
dynamically quantized to int8 (QInt8 weights), under the same pipeline, batch size (the first of
--batch-sizes) and threads; their answers are compared with the float32 pipeline's. Every side's EM/F1 is
printed (the official v1.1 rules, on the questions run).

The pipeline side runs in the environment of tools/setup-hf.sh (transformers<5, torch CPU); with --ort, of
tools/setup-ort.sh (the same, plus onnx and onnxruntime).
Under `LECTOR_SIMD=avx2` the pipeline is capped at AVX2 as well (bench/cpu.py: ATen, MKL, oneDNN), so both
sides run what an AVX2-only CPU runs; the CPU line printed first says so.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import cpu
import rounds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "squad", "dev-v1.1.json")
MODEL = os.path.join(ROOT, "models", "reader-minilm-squad")


def peak_rss_mb(cmd, env=None):
    """Runs cmd under /usr/bin/time; returns (stdout+stderr, peak RSS in MB)."""
    proc = subprocess.run(["/usr/bin/time", "-f", "MAXRSS %M"] + cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed:\n{proc.stderr[-2000:]}")
    out = proc.stdout + proc.stderr
    return out, int(re.search(r"MAXRSS (\d+)", out).group(1)) / 1024


def run_lector(lector, limit, out, precision):
    text, rss = peak_rss_mb([lector, "read", "--squad", DATA, "--limit", str(limit), "--out", out,
                             "--precision", precision],
                            env=dict(os.environ, RAYON_NUM_THREADS="2"))
    return float(re.search(r"\(([\d.]+) questions/s\)", text).group(1)), rss


def run_pipeline(python, limit, batch, out, precision, runtime="torch"):
    autocast = ["--autocast-bf16"] if precision == "bf16" else []
    text, rss = peak_rss_mb([python, os.path.join(ROOT, "tools", "hf_qa_reference.py"), "--model", MODEL, "--data", DATA,
                             "--limit", str(limit), "--batch-size", str(batch), "--threads", "2", "--out", out,
                             "--no-eval", "--quiet", "--runtime", runtime] + autocast)
    summary = json.loads(text[text.index("{"):text.rindex("}") + 1])
    return float(summary["questions_per_s"]), rss


def em_f1(preds):
    """The official SQuAD v1.1 EM / F1 of `preds` on the questions it answers."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import hf_qa_reference

    with open(DATA, encoding="utf-8") as f:
        result = hf_qa_reference.score_predictions(json.load(f), preds)
    return result["exact_match"], result["f1"]


def weighted_gflops(rows, key):
    """GFLOP/s over one pass through the four linear layers (each shape weighted by its FLOPs)."""
    flop = sum(r["k"] * r["n"] for r in rows)
    return flop / sum(r["k"] * r["n"] / r[key] for r in rows)


def report_gflops(python, target, limit, secs, best_batch):
    """Prints the achieved GFLOP/s of both readers next to plain matrix products on the same machine."""
    gflops_py = os.path.join(ROOT, "bench", "gflops.py")
    run = lambda cmd, env=None: subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    batch = int(best_batch.split("=")[1].split()[0])
    work = json.loads(run([python, gflops_py, "count", "--limit", str(limit), "--batch-size", str(batch)]))
    torch_rows = [json.loads(line) for line in run([python, gflops_py, "matmul", "--threads", "2"]).splitlines()]
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "lector-models", "--example", "matmul_speed"],
                   check=True, cwd=ROOT)
    candle_rows = [json.loads(line) for line in
                   run([os.path.join(target, "release", "examples", "matmul_speed"), MODEL],
                       env=dict(os.environ, RAYON_NUM_THREADS="2")).splitlines()]
    print(f"\nGFLOP/s, 2 threads: {work['gflop']:.0f} GFLOP for {limit} questions ({work['windows']} windows, "
          f"{work['tokens']} tokens; the pipeline pads to {work['padded_tokens']} tokens, {work['executed_gflop']:.0f} GFLOP)")
    print(f"  lector reader                        {work['gflop'] / secs['lector']:6.1f}")
    print(f"  {best_batch + ', useful / executed':35s}  {work['gflop'] / secs[best_batch]:6.1f} / "
          f"{work['executed_gflop'] / secs[best_batch]:.1f}")
    print(f"  plain matmul, the model's four linear shapes at {candle_rows[0]['m']} tokens:")
    print(f"    candle Tensor::matmul              {weighted_gflops(candle_rows, 'candle_gflops'):6.1f}")
    print(f"    gemm, one product per thread       {weighted_gflops(candle_rows, 'gemm_per_thread_gflops'):6.1f}")
    print(f"    torch linear                       {weighted_gflops(torch_rows, 'torch_gflops'):6.1f}")
    for c, t in zip(candle_rows, torch_rows):
        print(f"    {c['layer']:9s} ({c['k']}x{c['n']}): candle {c['candle_gflops']:6.1f}, "
              f"gemm per thread {c['gemm_per_thread_gflops']:6.1f}, torch {t['torch_gflops']:6.1f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--batch-sizes", default="8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-gflops", action="store_true", help="skip the GFLOP/s report")
    parser.add_argument("--precisions", default="f32", help="lector's --precision values to run, e.g. f32,bf16")
    parser.add_argument("--peer-precisions", default="f32", help="the pipeline's precisions, e.g. f32,bf16")
    parser.add_argument("--lector", help="use this lector binary instead of building the release one")
    parser.add_argument("--ort", default="", help="ONNX Runtime peers to add: f32, int8 or f32,int8")
    args = parser.parse_args()
    capped = cpu.cap_peers()
    print(f"CPU: {cpu.line()}", flush=True)
    precisions = args.precisions.split(",")
    peer_precisions = args.peer_precisions.split(",")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    lector = args.lector or os.path.join(target, "release", "lector")
    if not args.lector:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "lector-cli"], check=True, cwd=ROOT)
    ort = [r for r in args.ort.split(",") if r]
    if ort and capped:
        print("note: ONNX Runtime has no switch for its instruction sets: its rows use every extension of this CPU")
    setup = "setup-ort.sh" if ort else "setup-hf.sh"
    python = subprocess.run(["bash", os.path.join(ROOT, "tools", setup)], check=True, capture_output=True,
                            text=True).stdout.strip().splitlines()[-1]
    ours, answers = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        def pipeline_side(name, batch, peer, runtime="torch"):
            def run():
                out = os.path.join(tmp, f"{name}.json")
                qps, rss = run_pipeline(python, args.limit, batch, out, peer, runtime)
                print(f"{name}: {qps:.1f} q/s, peak RSS {rss:.0f} MB", flush=True)
                with open(out) as f:
                    answers[name] = json.load(f)
                return {"rate": qps, "rss": rss}
            return run

        def lector_side(precision):
            def run():
                out = os.path.join(tmp, f"lector-{precision}.json")
                qps, rss = run_lector(lector, args.limit, out, precision)
                print(f"lector {precision}: {qps:.1f} q/s, peak RSS {rss:.0f} MB", flush=True)
                with open(out) as f:
                    ours[precision] = json.load(f)
                return {"rate": qps, "rss": rss}
            return run

        sides = {}
        for batch in [int(b) for b in args.batch_sizes.split(",")]:
            for peer in peer_precisions:
                name = f"pipeline bs={batch}" + (" bf16" if peer == "bf16" else "")
                sides[name] = pipeline_side(name, batch, peer)
        ort_batch = int(args.batch_sizes.split(",")[0])
        for precision in ort:
            name = f"onnxruntime {precision} bs={ort_batch}"
            sides[name] = pipeline_side(name, ort_batch, "f32", "onnx" if precision == "f32" else "onnx-int8")
        for precision in precisions:
            sides[f"lector {precision}"] = lector_side(precision)
        # The sides take turns, the order reversed every other round (bench/rounds.py).
        runs = rounds.alternate(sides, args.rounds)
        results = {name: [(r["rate"], r["rss"]) for r in rs] for name, rs in runs.items()}
        fastest = lambda names: max(names, key=lambda k: statistics.median(q for q, _ in results[k]))
        pipelines = [k for k in results if k.startswith("pipeline")]
        best_peer = fastest(pipelines)
        # The float32 pipeline is the reference for answers (and for the GFLOP/s report).
        best_batch = fastest([k for k in pipelines if not k.endswith("bf16")] or pipelines)
        theirs = answers[best_batch]
        answers.update({f"lector {p}": ours[p] for p in precisions})
    med = {k: statistics.median(q for q, _ in v) for k, v in results.items()}
    print(f"\n{args.limit} questions")
    for k, v in med.items():
        print(f"  {k:20s} median {v:6.1f} q/s, peak RSS {max(r for _, r in results[k]):.0f} MB")
    print(f"\n{args.rounds} alternating rounds, load average at each start; ratios against {best_batch}:")
    print(rounds.table(rounds.summary(runs, best_batch), "q/s", best_batch))
    for precision in precisions:
        same = sum(ours[precision][k] == theirs[k] for k in theirs)
        print(f"lector {precision}: answers equal to the pipeline's ({best_batch}) {same}/{len(theirs)}; "
              f"ratio lector / fastest float32 pipeline ({best_batch}): "
              f"{med[f'lector {precision}'] / med[best_batch]:.2f}x; "
              f"/ fastest pipeline ({best_peer}): {med[f'lector {precision}'] / med[best_peer]:.2f}x")
    print(f"\nanswers and accuracy (SQuAD v1.1 dev, first {args.limit} questions, official rules):")
    print("| side | answers equal to the float32 pipeline's | EM | F1 |\n| --- | --- | --- | --- |")
    for name, preds in answers.items():
        same = sum(preds.get(k) == theirs[k] for k in theirs)
        em, f1 = em_f1(preds)
        print(f"| {name} | {same}/{len(theirs)} | {em:.2f} | {f1:.2f} |")
    if not args.no_gflops:
        seconds = {k: args.limit / v for k, v in med.items()}
        seconds["lector"] = seconds[f"lector {precisions[0]}"]
        report_gflops(python, target, args.limit, seconds, best_batch)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: lector's GGUF generator vs llama.cpp (llama-cpp-python built from source) on the same file.

SmolLM2-135M-Instruct Q4_1 (the registry's generator), the same prompt of P tokens and G generated tokens
(greedy, end-of-text ignored), the same threads on both sides. Measures prompt processing (one pass over
the prompt) and generation (G single-token steps) in tokens/s, best of R repeats after a warm-up, alternating
the two programs for several rounds; prints the medians and lector/llama.cpp ratios.

    python3 bench/gen_speed.py [--threads 2] [--prompt 256] [--generate 64] [--repeats 3] [--rounds 3]

lector's side is `cargo run --release -p lector-generate --example gen_speed` (RAYON_NUM_THREADS=threads);
llama.cpp's side runs in the environment tools/setup-llama-cpp.sh builds (n_threads = n_threads_batch = threads).
"""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PEER = r"""
import json, sys, time
import llama_cpp
path, prompt_len, generated, repeats, threads = sys.argv[1], *map(int, sys.argv[2:6])
TEXT = ("Super Bowl 50 was an American football game to determine the champion of the National "
"Football League (NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos "
"defeated the National Football Conference (NFC) champion Carolina Panthers 24-10 to earn their third Super "
"Bowl title. ")
# n_batch covers the whole context: llama-cpp-python keeps n_batch rows of scores, read below by position.
n_ctx = prompt_len + generated + 8
llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=max(512, n_ctx), n_ubatch=max(512, n_ctx),
                      n_threads=threads, n_threads_batch=threads, verbose=False)
prompt = llm.tokenize((TEXT * (prompt_len // 40 + 1)).encode(), add_bos=False, special=False)[:prompt_len]
best_pp = best_tg = 0.0
for _ in range(repeats + 1):  # the first round warms up
    llm.reset()
    start = time.perf_counter()
    llm.eval(prompt)
    pp = len(prompt) / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(generated):
        llm.eval([int(llm.scores[llm.n_tokens - 1].argmax())])
    tg = generated / (time.perf_counter() - start)
    if _ > 0:
        best_pp, best_tg = max(best_pp, pp), max(best_tg, tg)
print(json.dumps({"prompt_tokens": len(prompt), "generated_tokens": generated,
                  "prompt_tokens_per_s": best_pp, "generated_tokens_per_s": best_tg,
                  "version": llama_cpp.__version__}))
"""


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--generate", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    py = subprocess.run(["bash", "tools/setup-llama-cpp.sh"], check=True, capture_output=True, text=True,
                        cwd=ROOT).stdout.strip().splitlines()[-1]
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "lector-generate", "--example", "gen_speed"],
                   check=True, cwd=ROOT)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    lector = os.path.join(target, "release", "examples", "gen_speed")
    cache = os.environ.get("LECTOR_CACHE_DIR", os.path.expanduser("~/.cache/lector/models"))
    gguf = os.path.join(cache, "smollm2-135m-instruct-q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(gguf):
        subprocess.run(["cargo", "run", "--release", "-q", "-p", "lector-cli", "--", "models", "pull", "generator"],
                       check=True, cwd=ROOT)
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    sizes = [str(args.prompt), str(args.generate), str(args.repeats)]
    results = {"lector": [], "llama.cpp": []}
    for _ in range(args.rounds):
        results["lector"].append(run([lector, gguf, *sizes], env=env))
        results["llama.cpp"].append(run([py, "-c", PEER, gguf, *sizes, str(args.threads)]))
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("prompt_tokens_per_s", "generated_tokens_per_s")}
           for k, v in results.items()}
    print(f"model {os.path.basename(gguf)}, threads {args.threads}, prompt {args.prompt} tokens, "
          f"generate {args.generate} tokens, best of {args.repeats}, median of {args.rounds} rounds")
    print(f"{'':12} {'prompt tok/s':>14} {'generate tok/s':>15}")
    for k in ("lector", "llama.cpp"):
        print(f"{k:12} {med[k]['prompt_tokens_per_s']:14.1f} {med[k]['generated_tokens_per_s']:15.1f}")
    for m, name in (("prompt_tokens_per_s", "prompt processing"), ("generated_tokens_per_s", "generation")):
        print(f"ratio lector/llama.cpp, {name}: {med['lector'][m] / med['llama.cpp'][m]:.2f}x")
    print(json.dumps({"rounds": results}))


if __name__ == "__main__":
    main()

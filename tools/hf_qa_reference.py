#!/usr/bin/env python3
"""Runs the Hugging Face `question-answering` pipeline (transformers, torch, CPU, float32) over a SQuAD file.

This is the reference that lector's extractive reader is tested and benchmarked against. Run it with the
interpreter that `tools/setup-hf.sh` prints:

    PY=$(bash tools/setup-hf.sh | tail -1)
    $PY tools/hf_qa_reference.py --model models/reader-minilm-squad \
        --data ../shared/data/squad/dev-v1.1.json --limit 500 \
        --out /tmp/pred.json --details /tmp/details.json [--handle-impossible-answer] [--batch-size 1]

Outputs
  --out PRED.json       {qid: answer}  (official SQuAD prediction format; "" when the pipeline returns the
                        empty no-answer, which only happens with --handle-impossible-answer)
  --details DETAILS.json {qid: {"answer", "score", "start", "end"}} = the pipeline's top answer (start/end are
                        character offsets into the context, end exclusive). With --handle-impossible-answer also
                        "null_score" (the pipeline's min over windows of p_start(CLS) * p_end(CLS)) and
                        "best_span" {"answer","score","start","end"}: the best non-null answer (what the
                        pipeline returns with handle_impossible_answer=False), so a consumer can apply its own
                        null threshold.
  --na-prob-out NA.json  optional: {qid: null_score} for the official v2.0 script's --na-prob-file.

How the null score is obtained: the pipeline computes it inside `postprocess` (select_starts_ends returns the
running minimum over the windows) and only exposes it as the score of the appended "" answer. This script wraps
`transformers.pipelines.question_answering.select_starts_ends` to record the value it returns for the last
window of each example (that is exactly the `min_null_score` used for the "" answer), and calls the original
`postprocess` a second time with handle_impossible_answer=False to get the best non-null answer (post-processing
only; no second model forward). `--check-null K` verifies the null score against a plain pipeline call with top_k=100 (the "" entry
has that score, or ranks below the 100 listed)
on the first K questions.

It prints questions/s (wall time of the pipeline calls, excluding model load) and EM/F1 computed with
tools/squad_official.py (the official v1.1 / v2.0 logic, by the dataset's version) on the evaluated questions
(the file restricted to them, so --limit runs are scored on those questions only).
"""
import argparse
import json
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="HF model folder (config.json, model.safetensors, tokenizer.json)")
    p.add_argument("--data", required=True, help="SQuAD json (v1.1 or v2.0)")
    p.add_argument("--limit", type=int, default=0, help="first N questions in file order (0 = all)")
    p.add_argument("--out", help="PRED.json {qid: answer}")
    p.add_argument("--details", help="DETAILS.json {qid: {answer, score, start, end[, null_score, best_span]}}")
    p.add_argument("--na-prob-out", help="optional {qid: null_score} (needs --handle-impossible-answer)")
    p.add_argument("--handle-impossible-answer", action="store_true")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-seq-len", type=int, default=None, help="pipeline default: min(model_max_length, 384)")
    p.add_argument("--doc-stride", type=int, default=None, help="pipeline default: min(max_seq_len // 2, 128)")
    p.add_argument("--max-question-len", type=int, default=64, help="pipeline default 64 (ignored by fast tokenizers)")
    p.add_argument("--max-answer-len", type=int, default=15, help="pipeline default 15")
    p.add_argument("--check-null", type=int, default=0,
                   help="verify the recorded null_score against top_k=100 calls on the first K questions")
    p.add_argument("--autocast-bf16", action="store_true",
                   help="run under torch.autocast('cpu', bfloat16): linear layers in bfloat16 (speed comparisons only)")
    p.add_argument("--runtime", choices=["torch", "onnx", "onnx-int8"], default="torch",
                   help="onnx / onnx-int8: the model exported to ONNX (int8: dynamic quantization, QInt8 weights) "
                        "and run on ONNX Runtime under the same pipeline (tools/ort_qa.py, tools/setup-ort.sh)")
    p.add_argument("--per-channel", action="store_true", help="onnx-int8: one weight scale per output channel")
    p.add_argument("--no-eval", action="store_true", help="skip EM/F1")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args()


def load_questions(path, limit):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    items = []
    for article in data["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                items.append({"id": qa["id"], "question": qa["question"], "context": para["context"]})
    if limit and limit > 0:
        items = items[:limit]
    return data, items


def restrict_dataset(data, qids):
    """The dataset with only the given questions (structure kept), for scoring --limit runs."""
    keep = set(qids)
    out = {"version": data.get("version"), "data": []}
    for article in data["data"]:
        paras = []
        for para in article["paragraphs"]:
            qas = [qa for qa in para["qas"] if qa["id"] in keep]
            if qas:
                paras.append({"context": para["context"], "qas": qas})
        if paras:
            out["data"].append({"title": article.get("title"), "paragraphs": paras})
    return out


def score_predictions(data, preds):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import squad_official as so

    sub = restrict_dataset(data, preds.keys())
    if str(data.get("version")) == "1.1":
        return so.evaluate_v1(sub["data"], preds)
    na_probs = {k: 0.0 for k in preds}
    return so.evaluate_v2(sub["data"], preds, na_probs, 1.0, False)


def as_answer(res):
    if isinstance(res, list):
        res = res[0] if res else {"answer": "", "score": 0.0, "start": 0, "end": 0}
    return {"answer": res["answer"], "score": float(res["score"]), "start": int(res["start"]), "end": int(res["end"])}


def main():
    args = parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("MKL_NUM_THREADS", str(args.threads))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

    import torch
    torch.set_num_threads(args.threads)
    import transformers
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, pipeline
    import transformers.pipelines.question_answering as qa_mod

    transformers.logging.set_verbosity_error()
    data, items = load_questions(args.data, args.limit)

    t_load = time.perf_counter()
    model = AutoModelForQuestionAnswering.from_pretrained(args.model, dtype=torch.float32)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    runtime = {}
    if args.runtime != "torch":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import ort_qa

        model, onnx_file, ort_version = ort_qa.pipeline_model(model, tokenizer, args.model, args.runtime,
                                                              args.threads, args.per_channel)
        runtime = {"onnx_file": onnx_file, "onnxruntime": ort_version}
    qa = pipeline("question-answering", model=model, tokenizer=tokenizer, device=-1)
    load_s = time.perf_counter() - t_load

    # --- capture the null score and the best non-null answer (see module docstring)
    state = {"null": None}
    orig_select = qa_mod.select_starts_ends

    def select_wrapper(*a, **kw):
        out = orig_select(*a, **kw)
        state["null"] = out[3]
        return out

    qa_mod.select_starts_ends = select_wrapper
    orig_post = qa.postprocess
    extra = []  # one entry per postprocess call, in call order (= input order)

    def post_wrapper(model_outputs, **kw):
        state["null"] = None
        res = orig_post(model_outputs, **kw)
        rec = {}
        if kw.get("handle_impossible_answer"):
            rec["null_score"] = float(state["null"])
            kw2 = dict(kw, handle_impossible_answer=False)
            rec["best_span"] = as_answer(orig_post(model_outputs, **kw2))
        extra.append(rec)
        return res

    qa.postprocess = post_wrapper

    params = {"max_question_len": args.max_question_len, "max_answer_len": args.max_answer_len,
              "handle_impossible_answer": args.handle_impossible_answer}
    if args.max_seq_len is not None:
        params["max_seq_len"] = args.max_seq_len
    if args.doc_stride is not None:
        params["doc_stride"] = args.doc_stride

    inputs = [{"question": it["question"], "context": it["context"]} for it in items]
    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast_bf16):
        if args.batch_size <= 1:
            results = [qa(question=x["question"], context=x["context"], **params) for x in inputs]
        else:
            results = qa(question=[x["question"] for x in inputs], context=[x["context"] for x in inputs],
                         batch_size=args.batch_size, num_workers=0, **params)
    if isinstance(results, dict):
        results = [results]
    wall = time.perf_counter() - t0
    assert len(results) == len(items) == len(extra), (len(results), len(items), len(extra))

    preds, details = {}, {}
    for it, res, rec in zip(items, results, extra):
        d = as_answer(res)
        d.update(rec)
        details[it["id"]] = d
        preds[it["id"]] = d["answer"]

    qps = len(items) / wall if wall > 0 else float("nan")
    summary = {"questions": len(items), "wall_s": round(wall, 3), "questions_per_s": round(qps, 3),
               "model_load_s": round(load_s, 3), "batch_size": args.batch_size, "threads": args.threads,
               "torch": torch.__version__, "transformers": transformers.__version__, "params": params,
               "runtime": args.runtime, **runtime}

    # --- optional self-check of the null-score capture
    if args.check_null:
        qa_mod.select_starts_ends = orig_select
        qa.postprocess = orig_post
        bad, diff_top = 0, 0
        for it in items[: args.check_null]:
            full = qa(question=it["question"], context=it["context"], top_k=100, **params)
            full = full if isinstance(full, list) else [full]
            d = details[it["id"]]
            spans = [a for a in full if not (a["answer"] == "" and a["start"] == 0 and a["end"] == 0)]
            # top_k changes the scores: more candidates per window (2*top_k+10) get merged by text, so the
            # top answer's score (rarely the answer itself) can differ from the top_k=1 call. Counted, not failed.
            ref = d["best_span"] if args.handle_impossible_answer else d
            if spans and spans[0]["answer"] != ref["answer"]:
                diff_top += 1
            if args.handle_impossible_answer:
                nulls = [a for a in full if a["answer"] == "" and a["start"] == 0 and a["end"] == 0]
                found = any(abs(a["score"] - d["null_score"]) <= 1e-12 * max(1.0, a["score"]) for a in nulls)
                # with 100 answers listed the null may rank below them: then it must not beat the last one
                cut_ok = len(full) == 100 and not nulls and d["null_score"] <= full[-1]["score"]
                if not (found or cut_ok):
                    bad += 1
                    print("check-null mismatch", it["id"], d, full[:3], file=sys.stderr)
        summary["check_null"] = {"checked": min(args.check_null, len(items)), "null_mismatches": bad,
                                 "top_answer_differs_at_top_k_100": diff_top}

    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(preds, f, ensure_ascii=False, indent=0)
            f.write("\n")
    if args.details:
        with open(args.details, "w", encoding="utf-8") as f:
            json.dump(details, f, ensure_ascii=False, indent=1)
            f.write("\n")
    if args.na_prob_out:
        with open(args.na_prob_out, "w", encoding="utf-8") as f:
            json.dump({k: v.get("null_score", 0.0) for k, v in details.items()}, f)
            f.write("\n")

    if not args.no_eval:
        summary["eval"] = score_predictions(data, preds)
    print(json.dumps(summary, indent=None if args.quiet else 2))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Records PyTorch's loss, gradients and AdamW trajectory on the tiny random QA checkpoints, as fixtures for
lector-train's parity tests (lector's loss and every gradient, and the weights after 10 steps, must agree).

    PY=$(bash tools/setup-hf.sh | tail -1)
    $PY tools/train_reference.py [--out crates/lector-train/tests/fixtures]
                                 [--models crates/lector-models/tests/fixtures]

For each of tiny-bert, tiny-distilbert, tiny-roberta, tiny-xlm-roberta (read from --models, made by
tools/make_tiny_checkpoints.py), writes --out/<name>/:
  batches.json          {"batches": [B0, B1]}, each 4 rows of a fixed (question, context) pair as the
                        checkpoint's own tokenizer post-processes it (special tokens added), right-padded with the
                        config's pad_token_id to the longest row of the batch: input_ids, token_type_ids (as the
                        tokenizer gives them; all zeros for RoBERTa/XLM-R, and written as zeros for DistilBERT,
                        whose model takes none), attention_mask, start_positions, end_positions (seeded random
                        positions among the real tokens, start <= end; one row per batch targets 0, the CLS).
  expected.safetensors  float32: `loss` [1] (B0, initial weights); `grad.<param>` (d loss / d param, B0,
                        initial weights, before any clipping); `after.<param>` (every parameter after 10 AdamW
                        steps, step s on B[s % 2]); and for debugging `steps.loss` [10] (the loss each step
                        back-propagated), `steps.lr` [10] (the lr each step used), `steps.grad_norm` [10] (the
                        total L2 gradient norm before clipping, as clip_grad_norm_ returns it).

The model: AutoModelForQuestionAnswering (float32), model.eval() so no dropout acts. token_type_ids are passed
to BERT, RoBERTa and XLM-R (zeros for the last two), not to DistilBERT (its forward takes none).
The loss (what lector implements):
    neg = (1 - attention_mask) * 1e9;  s = start_logits - neg;  e = end_logits - neg
    loss = (cross_entropy(s, start_positions) + cross_entropy(e, end_positions)) / 2      (mean over rows)
The optimiser: torch.optim.AdamW(lr 1e-3, betas (0.9, 0.999), eps 1e-8), weight decay 0.01 except for
parameters whose name ends with "bias" or contains "LayerNorm" or "layer_norm" (0.0);
transformers.get_linear_schedule_with_warmup(num_warmup_steps=3, num_training_steps=10), so step 0 uses lr 0.
Each step: zero_grad, backward, clip_grad_norm_(1.0), opt.step(), sched.step().

Deterministic: one torch thread, fixed texts, random.Random(SEED) for the targets; the script runs the whole
computation twice in-process and checks the two results are bit-identical, and two runs of the script give
byte-identical files.
"""
import argparse
import json
import os
import random
import sys

SEED = 20240620
STEPS = 10
LR = 1e-3
WEIGHT_DECAY = 0.01
WARMUP = 3
CLIP = 1.0
NAMES = ["tiny-bert", "tiny-distilbert", "tiny-roberta", "tiny-xlm-roberta"]

# (question, context): two batches of four; short, so rows are ~11..24 tokens and lengths differ in each batch
PAIRS = [
    [
        ("Who wrote it?", "Anna wrote the book."),
        ("Which city?", "The city of Bonn lies on the Rhine."),
        ("When did it open?", "The library opened in 1883."),
        ("What color is the sky?", "The sky is blue on a clear day."),
    ],
    [
        ("Where is the museum?", "The museum is near the old church."),
        ("Who won?", "Denver won the game."),
        ("How many students were there?", "There were twelve students."),
        ("What did he give?", "He gave money for a new hall."),
    ],
]


def no_decay(name):
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name


def make_batches(name, tokenizer, config, rng):
    pad = config.pad_token_id
    batches = []
    for bi, pairs in enumerate(PAIRS):
        rows = []
        for q, c in pairs:
            enc = tokenizer(q, c, return_token_type_ids=True, return_attention_mask=True)
            ids = list(enc["input_ids"])
            tt = list(enc["token_type_ids"])
            if name == "tiny-distilbert":
                tt = [0] * len(ids)
            assert ids[0] == tokenizer.cls_token_id, (name, ids)
            rows.append((ids, tt))
        width = max(len(ids) for ids, _ in rows)
        lens = [len(ids) for ids, _ in rows]
        assert min(lens) < width, (name, bi, lens)  # at least one padded row
        b = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "start_positions": [],
             "end_positions": []}
        cls_row = 1 if bi == 0 else 2
        for r, (ids, tt) in enumerate(rows):
            n = len(ids)
            b["input_ids"].append(ids + [pad] * (width - n))
            b["token_type_ids"].append(tt + [0] * (width - n))
            b["attention_mask"].append([1] * n + [0] * (width - n))
            if r == cls_row:
                s = e = 0
            else:
                s, e = sorted((rng.randrange(n), rng.randrange(n)))
            b["start_positions"].append(s)
            b["end_positions"].append(e)
        batches.append(b)
    return batches


def run(model_dir, name, batches):
    """Loss + grads at the initial weights on B0, then the 10-step AdamW trajectory. Returns {key: tensor}."""
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import AutoModelForQuestionAnswering

    torch.manual_seed(SEED)
    model = AutoModelForQuestionAnswering.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()  # dropout off
    takes_tt = name != "tiny-distilbert"
    tb = []
    for b in batches:
        t = {k: torch.tensor(v, dtype=torch.long) for k, v in b.items()}
        tb.append(t)

    def loss_on(t):
        kw = {"input_ids": t["input_ids"], "attention_mask": t["attention_mask"]}
        if takes_tt:
            kw["token_type_ids"] = t["token_type_ids"]
        out = model(**kw)
        neg = (1 - t["attention_mask"]).to(torch.float32) * 1e9
        s = out.start_logits - neg
        e = out.end_logits - neg
        return (F.cross_entropy(s, t["start_positions"]) + F.cross_entropy(e, t["end_positions"])) / 2

    params = list(model.named_parameters())
    res = {}
    model.zero_grad(set_to_none=True)
    loss = loss_on(tb[0])
    loss.backward()
    res["loss"] = loss.detach().reshape(1).clone()
    for n, p in params:
        g = p.grad if p.grad is not None else torch.zeros_like(p)  # an unused parameter: zero gradient
        res["grad." + n] = g.detach().clone()

    groups = [
        {"params": [p for n, p in params if not no_decay(n)], "weight_decay": WEIGHT_DECAY},
        {"params": [p for n, p in params if no_decay(n)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)
    sched = transformers.get_linear_schedule_with_warmup(opt, num_warmup_steps=WARMUP,
                                                         num_training_steps=STEPS)
    losses, lrs, norms = [], [], []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = loss_on(tb[step % 2])
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses.append(loss.item())
        norms.append(float(norm))
    for n, p in params:
        res["after." + n] = p.detach().clone()
    res["steps.loss"] = torch.tensor(losses, dtype=torch.float32)
    res["steps.lr"] = torch.tensor(lrs, dtype=torch.float32)
    res["steps.grad_norm"] = torch.tensor(norms, dtype=torch.float32)
    for k, v in res.items():
        assert v.dtype == torch.float32, k
        res[k] = v.contiguous()
    return res


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def folder_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(root, "crates", "lector-train", "tests", "fixtures"))
    ap.add_argument("--models", default=os.path.join(root, "crates", "lector-models", "tests", "fixtures"),
                    help="folder holding the tiny checkpoints (tools/make_tiny_checkpoints.py)")
    args = ap.parse_args()

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    import safetensors
    import tokenizers
    import transformers
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoTokenizer

    transformers.logging.set_verbosity_error()
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__, "safetensors": safetensors.__version__}
    summary = {"versions": versions, "models": {}}
    for name in NAMES:
        src = os.path.join(args.models, name)
        tokenizer = AutoTokenizer.from_pretrained(src)
        config = AutoConfig.from_pretrained(src)
        batches = make_batches(name, tokenizer, config, random.Random(f"{SEED}-{name}"))
        res = run(src, name, batches)
        again = run(src, name, batches)
        for k in res:
            assert torch.equal(res[k], again[k]), f"{name}: {k} differs between two runs"
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        write_json(os.path.join(d, "batches.json"), {"batches": batches})
        # one metadata key only: safetensors writes its metadata map in hash order, which varies per run
        save_file(dict(sorted(res.items())), os.path.join(d, "expected.safetensors"), metadata={"format": "pt"})
        for k, v in res.items():
            assert torch.isfinite(v).all(), (name, k)
        summary["models"][name] = {
            "bytes": folder_size(d),
            "row_lengths": [[sum(m) for m in b["attention_mask"]] for b in batches],
            "loss": round(res["loss"].item(), 6),
            "steps_loss": [round(x, 4) for x in res["steps.loss"].tolist()],
            "params": sum(1 for k in res if k.startswith("grad.")),
        }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    sys.exit(main())

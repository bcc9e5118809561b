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

The retrieval heads (lector's `train embedder` and `train reranker` losses), with the same optimiser, schedule
and expected.safetensors keys (the parameters being the head's: see below):
  --out/<name>-embedder/ for tiny-bert and tiny-roberta: the encoder of the QA checkpoint (model.base_model, so
                        no qa_outputs and no pooler; parameter names keep the `bert.`/`roberta.` prefix), mean
                        pooling over real tokens, L2 normalisation, then lector's MultipleNegativesRankingLoss:
                            scores = q @ p.T * SCALE + mask;  loss = cross_entropy(scores, arange(n))
                        where column i < n is question i's positive, the columns after them hard negatives, and
                        mask[i][j] = -1e9 where j != i holds question i's own paragraph (`texts` equal).
                        batches.json {"scale": 20.0, "batches": [B0, B1]}, each B: `questions`, `question_types`,
                        `passages`, `passage_types` (unpadded token id lists; types as the tokenizer gives them
                        for one text), `texts` (an identity per passage column: equal texts, equal ids).
  --out/tiny-bert-rerank/ : BertForSequenceClassification (one label) from the tiny-bert-rerank checkpoint;
                        per question one softmax over its (question, passage) pairs' logits, the positive first:
                            loss = mean over questions of -log_softmax(logits[group])[0]
                        batches.json {"batches": [B0, B1]}, each B: `input_ids`, `token_type_ids` (unpadded
                        pairs as tokenizer(question, passage) gives them), `group_sizes`.
Rows are right-padded with the config's pad_token_id for PyTorch (attention_mask 0 there).

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
EMBEDDER_NAMES = ["tiny-bert", "tiny-roberta"]
RERANKER_NAME = "tiny-bert-rerank"
SCALE = 20.0

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

# Embedder batches: (question, positive paragraph) per row, then hard negatives (paragraph texts). In B0 two
# questions share a paragraph; in B1 a hard negative is another question's positive: both exercise the mask.
EMBEDDER_BATCHES = [
    {
        "questions": [
            ("Who wrote the book?", "Anna wrote the book in 1901."),
            ("Which river flows through Bonn?", "The city of Bonn lies on the Rhine."),
            ("When did Anna write it?", "Anna wrote the book in 1901."),
        ],
        "negatives": ["The library opened in 1883.", "The museum is near the old church."],
    },
    {
        "questions": [
            ("Who won the game?", "Denver won the game."),
            ("How many students were there?", "There were twelve students in the hall."),
            ("What did he give?", "He gave money for a new hall."),
        ],
        "negatives": ["The sky is blue on a clear day.", "He gave money for a new hall."],
    },
]

# Reranker batches: groups of (question, [positive, negatives...]); group sizes differ in B1.
RERANKER_BATCHES = [
    [
        ("Which river flows through Bonn?",
         ["The city of Bonn lies on the Rhine.", "The museum is near the old church.", "Paris lies on the Seine."]),
        ("Who won the game?", ["Denver won the game.", "The sky is blue on a clear day.", "Anna wrote the book."]),
    ],
    [
        ("When did the library open?", ["The library opened in 1883.", "There were twelve students."]),
        ("What did he give?", ["He gave money for a new hall.", "Denver won the game.",
                               "The museum is near the old church.", "The city of Bonn lies on the Rhine."]),
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

    return trajectory(list(model.named_parameters()), [lambda t=t: loss_on(t) for t in tb])


def trajectory(params, losses):
    """Loss and raw gradients of losses[0]() at the initial weights, then STEPS AdamW steps, step s on
    losses[s % 2](), over the named parameters `params`. Returns {key: float32 tensor}."""
    import torch
    import transformers

    res = {}
    for _, p in params:
        p.grad = None
    loss = losses[0]()
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
    losses_seen, lrs, norms = [], [], []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = losses[step % 2]()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_([p for _, p in params], CLIP)
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses_seen.append(loss.item())
        norms.append(float(norm))
    for n, p in params:
        res["after." + n] = p.detach().clone()
    res["steps.loss"] = torch.tensor(losses_seen, dtype=torch.float32)
    res["steps.lr"] = torch.tensor(lrs, dtype=torch.float32)
    res["steps.grad_norm"] = torch.tensor(norms, dtype=torch.float32)
    for k, v in res.items():
        assert v.dtype == torch.float32, k
        res[k] = v.contiguous()
    return res


def padded(rows, pad):
    """Right-pads token id lists: (ids, attention_mask) as long tensors."""
    import torch
    width = max(len(r) for r in rows)
    ids = [r + [pad] * (width - len(r)) for r in rows]
    mask = [[1] * len(r) + [0] * (width - len(r)) for r in rows]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)


def make_embedder_batches(tokenizer):
    def enc(text):
        e = tokenizer(text, return_token_type_ids=True)
        return list(e["input_ids"]), list(e["token_type_ids"])

    batches = []
    for spec in EMBEDDER_BATCHES:
        columns = [c for _, c in spec["questions"]] + spec["negatives"]
        ids_of = {}
        b = {"questions": [], "question_types": [], "passages": [], "passage_types": [],
             "texts": [ids_of.setdefault(c, len(ids_of)) for c in columns]}
        for q, _ in spec["questions"]:
            ids, tt = enc(q)
            b["questions"].append(ids)
            b["question_types"].append(tt)
        for c in columns:
            ids, tt = enc(c)
            b["passages"].append(ids)
            b["passage_types"].append(tt)
        batches.append(b)
    return batches


def run_embedder(model_dir, name, batches, config):
    """The embedder loss on the QA checkpoint's encoder (see the module doc)."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForQuestionAnswering

    torch.manual_seed(SEED)
    model = AutoModelForQuestionAnswering.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    encoder = model.base_model
    prefix = model.base_model_prefix

    def embed(rows, types):
        ids, mask = padded(rows, config.pad_token_id)
        tt, _ = padded(types, 0)
        hidden = encoder(input_ids=ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
        m = mask.to(torch.float32).unsqueeze(-1)
        return F.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)

    def loss_on(b):
        q = embed(b["questions"], b["question_types"])
        p = embed(b["passages"], b["passage_types"])
        n, texts = len(b["questions"]), b["texts"]
        mask = torch.tensor([[-1e9 if j != i and texts[j] == texts[i] else 0.0 for j in range(len(texts))]
                             for i in range(n)], dtype=torch.float32)
        scores = q @ p.T * SCALE + mask
        return F.cross_entropy(scores, torch.arange(n))

    params = [(f"{prefix}.{n}", p) for n, p in encoder.named_parameters()]
    return trajectory(params, [lambda b=b: loss_on(b) for b in batches])


def make_reranker_batches(tokenizer):
    batches = []
    for groups in RERANKER_BATCHES:
        b = {"input_ids": [], "token_type_ids": [], "group_sizes": []}
        for question, passages in groups:
            b["group_sizes"].append(len(passages))
            for passage in passages:
                e = tokenizer(question, passage, return_token_type_ids=True)
                b["input_ids"].append(list(e["input_ids"]))
                b["token_type_ids"].append(list(e["token_type_ids"]))
        batches.append(b)
    return batches


def run_reranker(model_dir, batches, config):
    """The reranker loss: one softmax per question over its pairs' logits, the positive first."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(SEED)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()

    def loss_on(b):
        ids, mask = padded(b["input_ids"], config.pad_token_id)
        tt, _ = padded(b["token_type_ids"], 0)
        logits = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits.squeeze(-1)
        terms, offset = [], 0
        for size in b["group_sizes"]:
            terms.append(-F.log_softmax(logits[offset:offset + size], dim=0)[0])
            offset += size
        return torch.stack(terms).mean()

    return trajectory(list(model.named_parameters()), [lambda b=b: loss_on(b) for b in batches])


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
    def emit(key, folder, batches_json, compute):
        """Runs `compute` twice (the results must be bit-identical) and writes the fixture folder."""
        res, again = compute(), compute()
        for k in res:
            assert torch.equal(res[k], again[k]), f"{key}: {k} differs between two runs"
            assert torch.isfinite(res[k]).all(), (key, k)
        d = os.path.join(args.out, folder)
        os.makedirs(d, exist_ok=True)
        write_json(os.path.join(d, "batches.json"), batches_json)
        # one metadata key only: safetensors writes its metadata map in hash order, which varies per run
        save_file(dict(sorted(res.items())), os.path.join(d, "expected.safetensors"), metadata={"format": "pt"})
        summary["models"][key] = {
            "bytes": folder_size(d),
            "loss": round(res["loss"].item(), 6),
            "steps_loss": [round(x, 4) for x in res["steps.loss"].tolist()],
            "steps_grad_norm": [round(x, 4) for x in res["steps.grad_norm"].tolist()],
            "params": sum(1 for k in res if k.startswith("grad.")),
        }
        return summary["models"][key]

    for name in NAMES:
        src = os.path.join(args.models, name)
        tokenizer = AutoTokenizer.from_pretrained(src)
        config = AutoConfig.from_pretrained(src)
        batches = make_batches(name, tokenizer, config, random.Random(f"{SEED}-{name}"))
        entry = emit(name, name, {"batches": batches}, lambda: run(src, name, batches))
        entry["row_lengths"] = [[sum(m) for m in b["attention_mask"]] for b in batches]
    for name in EMBEDDER_NAMES:
        src = os.path.join(args.models, name)
        config = AutoConfig.from_pretrained(src)
        batches = make_embedder_batches(AutoTokenizer.from_pretrained(src))
        emit(f"{name} embedder", f"{name}-embedder", {"scale": SCALE, "batches": batches},
             lambda: run_embedder(src, name, batches, config))
    src = os.path.join(args.models, RERANKER_NAME)
    config = AutoConfig.from_pretrained(src)
    batches = make_reranker_batches(AutoTokenizer.from_pretrained(src))
    emit(f"{RERANKER_NAME} reranker", RERANKER_NAME, {"batches": batches},
         lambda: run_reranker(src, batches, config))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    sys.exit(main())

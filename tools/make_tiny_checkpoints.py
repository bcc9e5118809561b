#!/usr/bin/env python3
"""Makes the tiny, randomly initialised question-answering checkpoints used by lector-models' architecture
parity tests, deterministically, with their expected outputs.

    PY=$(bash tools/setup-hf.sh | tail -1)
    $PY tools/make_tiny_checkpoints.py [--out crates/lector-models/tests/fixtures] [--squad FILE]

Writes, under --out:
  tiny-bert/          BertForQuestionAnswering, float32 model.safetensors, WordPiece (uncased) tokenizer
  tiny-bert-f16/      the same weights saved as float16 safetensors (expected.json computed from the f16 weights
                      upcast to float32, which is what a float32 runtime gets)
  tiny-bert-pth/      the same weights as pytorch_model.bin (safe_serialization=False); expected == tiny-bert
  tiny-bert-nohead/   a BertModel without the qa_outputs head (for the "not a QA checkpoint" error test)
  tiny-distilbert/    DistilBertForQuestionAnswering, WordPiece (uncased) tokenizer (the same vocab as tiny-bert)
  tiny-roberta/       RobertaForQuestionAnswering, byte-level BPE tokenizer
  tiny-xlm-roberta/   XLMRobertaForQuestionAnswering, Unigram (SentencePiece-style, Metaspace) tokenizer
Each QA folder has expected.json: for 3 fixed (question, context) pairs, every window the pipeline builds
(max_seq_len 64, doc_stride 16): input_ids / token_type_ids / attention_mask / offsets / p_mask and the model's
float32 start/end logits, plus the pipeline's answers (max_answer_len 15): top answer, and with
handle_impossible_answer=True the top answer and the null score. The top-level input_ids/token_type_ids/
attention_mask/start_logits/end_logits of a case are those of its first window.

Everything is seeded or counted: torch.manual_seed per model; the WordPiece and Unigram vocabularies are built
from plain substring counts over a fixed, ordered text list (the tokenizers trainers for those two break ties in
hash-map order); the byte-level BPE uses the tokenizers BpeTrainer, which is reproducible. The script checks
that building each tokenizer twice gives the same tokenizer.json, and two runs give byte-identical files.
Sizes: hidden 32, 2 layers, 4 heads, intermediate 64, vocab ~1-2k: each folder well under 1 MB.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

MAX_SEQ_LEN = 64
DOC_STRIDE = 16
MAX_ANSWER_LEN = 15
SEED = 20240607
INIT_RANGE = 0.2  # larger than the usual 0.02 so the random logits are not all nearly equal

PAIRS = [
    {
        "name": "simple",
        "question": "Which river flows through the city?",
        "context": "The city of Bonn lies on the Rhine. It was the capital of West Germany from 1949 to 1990.",
    },
    {
        "name": "unicode",
        "question": "Who founded the Café Odéon in Zürich?",
        "context": "Das Café Odéon in Zürich was founded by Josef Schottenhaml in 1911. Its naïve façade, "
                   "famous among Ærøskøbing tourists, shows \u201csmart quotes\u201d, the kanji \u6771\u4eac, "
                   "an em dash \u2014 and a rocket \U0001F680.",
    },
    {
        "name": "two_windows",
        "question": "When did the university open its first library?",
        "context": "The university was founded in 1842 by a group of priests who wanted to educate the sons of "
                   "local farmers. Its first building, a small wooden hall, burned down in 1879, and the "
                   "students moved into tents for a whole winter. The first library opened in 1883, after a "
                   "donation from a wealthy merchant whose name is still carved above the main door. Today "
                   "the campus has twelve libraries, a museum of natural history and an observatory on the "
                   "hill north of the lake.",
    },
]


def train_texts(squad_path, limit_paragraphs=800):
    with open(squad_path, encoding="utf-8") as f:
        data = json.load(f)
    texts = []
    for article in data["data"]:
        for para in article["paragraphs"]:
            texts.append(para["context"])
            texts.extend(qa["question"] for qa in para["qas"])
            if len(texts) >= limit_paragraphs * 6:
                break
    # the fixed pairs are included so their words are in the vocabularies
    for p in PAIRS:
        texts.append(p["question"])
        texts.append(p["context"])
    return texts


# ------------------------------------------------------------------------------------------- tokenizers

def make_wordpiece(texts, vocab_size=2000, max_piece_len=10):
    """An uncased BERT WordPiece tokenizer. The tokenizers WordPieceTrainer breaks count ties in hash-map order
    (the vocabulary differs between processes), so the vocabulary is built here from plain counts instead:
    every character (and "##"+character) seen, then the word-initial substrings and "##"+inner substrings
    (<= max_piece_len chars, count >= 3) with the largest count * length. Ids: specials, characters, pieces
    sorted. (WordPiece is greedy longest-match: ids do not change how text is split.)"""
    from collections import Counter
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, decoders

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                            lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    words = Counter()
    for text in texts:
        for word, _ in pre.pre_tokenize_str(normalizer.normalize_str(text)):
            words[word] += 1
    counts = Counter()
    for w, c in words.items():
        n = len(w)
        for i in range(n):
            for j in range(i + 1, min(n, i + max_piece_len) + 1):
                counts[w[i:j] if i == 0 else "##" + w[i:j]] += c
    alphabet = sorted(p for p in counts if len(p) == 1 or (p.startswith("##") and len(p) == 3))
    multi = sorted((p for p in counts if p not in set(alphabet) and counts[p] >= 3),
                   key=lambda p: (-counts[p] * len(p.replace("##", "")), p))
    learned = sorted(multi[: vocab_size - len(specials) - len(alphabet)])
    order = specials + alphabet + learned
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(order)}, unk_token="[UNK]",
                                     max_input_chars_per_word=100))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(specials)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def make_bytelevel_bpe(texts):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, decoders, trainers

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.RobertaProcessing(sep=("</s>", tok.token_to_id("</s>")),
                                                      cls=("<s>", tok.token_to_id("<s>")),
                                                      trim_offsets=True, add_prefix_space=False)
    return tok


def make_unigram(texts, vocab_size=1500, max_piece_len=8):
    """A SentencePiece-style Unigram tokenizer (Metaspace, NFKC). The tokenizers UnigramTrainer is not
    deterministic (its EM sums in hash-map order), so the model is built here from plain counts instead:
    pieces = every character seen + the substrings (<= max_piece_len chars, count >= 3) of the pre-tokenized
    words with the largest count * length; score = log(count / total). Good enough for a random-weights fixture
    and exactly reproducible."""
    import math
    from collections import Counter
    from tokenizers import Tokenizer, Regex, models, normalizers, pre_tokenizers, processors, decoders

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    pre = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    counts = Counter()
    for text in texts:
        for word, _ in pre.pre_tokenize_str(normalizer.normalize_str(text)):
            n = len(word)
            for i in range(n):
                for j in range(i + 1, min(n, i + max_piece_len) + 1):
                    counts[word[i:j]] += 1
    chars = sorted(p for p in counts if len(p) == 1)
    multi = sorted((p for p in counts if len(p) > 1 and counts[p] >= 3), key=lambda p: (-counts[p] * len(p), p))
    pieces = chars + multi[: vocab_size - len(specials) - len(chars) - 1]
    total = float(sum(counts[p] for p in pieces))
    scored = sorted(((p, math.log(counts[p] / total)) for p in pieces), key=lambda x: (-x[1], x[0]))
    vocab = [(t, 0.0) for t in specials] + scored
    tok = Tokenizer(models.Unigram(vocab, unk_id=specials.index("<unk>"), byte_fallback=False))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.add_special_tokens(specials + ["<mask>"])
    tok.post_processor = processors.RobertaProcessing(sep=("</s>", tok.token_to_id("</s>")),
                                                      cls=("<s>", tok.token_to_id("<s>")),
                                                      trim_offsets=True, add_prefix_space=True)
    return tok


def tok_hash(tok):
    return hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()


def make_tokenizers(texts):
    out = {}
    for name, fn in [("wordpiece", make_wordpiece), ("bpe", make_bytelevel_bpe), ("unigram", make_unigram)]:
        a = fn(texts)
        b = fn(texts)
        if tok_hash(a) != tok_hash(b):
            sys.exit(f"{name} tokenizer training is not deterministic")
        out[name] = a
    return out


def wrap(kind, tok):
    from transformers import (BertTokenizerFast, DistilBertTokenizerFast, RobertaTokenizerFast,
                              XLMRobertaTokenizerFast)

    if kind in ("bert", "distilbert"):
        cls = BertTokenizerFast if kind == "bert" else DistilBertTokenizerFast
        return cls(tokenizer_object=tok, do_lower_case=True, strip_accents=None, tokenize_chinese_chars=True,
                   unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]",
                   mask_token="[MASK]", model_max_length=128)
    if kind == "roberta":
        return RobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                    cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                    add_prefix_space=False, trim_offsets=True, model_max_length=128)
    if kind == "xlm-roberta":
        return XLMRobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                       cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                       model_max_length=128)
    raise ValueError(kind)


# ------------------------------------------------------------------------------------------- models

def make_model(kind, vocab_size, tokenizer):
    import torch
    from transformers import (BertConfig, BertForQuestionAnswering, BertForSequenceClassification, BertModel,
                              DistilBertConfig,
                              DistilBertForQuestionAnswering, RobertaConfig, RobertaForQuestionAnswering,
                              XLMRobertaConfig, XLMRobertaForQuestionAnswering)

    torch.manual_seed(SEED)
    common = dict(vocab_size=vocab_size, initializer_range=INIT_RANGE)
    if kind in ("bert", "bert-nohead", "bert-rerank"):
        cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                         max_position_embeddings=128, type_vocab_size=2, pad_token_id=tokenizer.pad_token_id,
                         **common)
        if kind == "bert-rerank":
            cfg.num_labels = 1
            return BertForSequenceClassification(cfg)
        return BertForQuestionAnswering(cfg) if kind == "bert" else BertModel(cfg, add_pooling_layer=True)
    if kind == "distilbert":
        cfg = DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=128,
                               pad_token_id=tokenizer.pad_token_id, **common)
        return DistilBertForQuestionAnswering(cfg)
    if kind in ("roberta", "xlm-roberta"):
        C, M = (RobertaConfig, RobertaForQuestionAnswering) if kind == "roberta" else \
            (XLMRobertaConfig, XLMRobertaForQuestionAnswering)
        cfg = C(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=130, type_vocab_size=1, pad_token_id=tokenizer.pad_token_id,
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **common)
        return M(cfg)
    raise ValueError(kind)


# ------------------------------------------------------------------------------------------- expected outputs

def _cls_prob(logits, p_mask, attention_mask):
    """p(position 0) of the pipeline's masked float32 softmax over one window."""
    import numpy as np

    x = np.asarray(logits, dtype=np.float32)
    allowed = (1 - np.asarray(p_mask)) & np.asarray(attention_mask)
    x = np.where(allowed == 0, np.float32(-10000.0), x)
    e = np.exp(x - x.max())
    return (e / e.sum())[0]


def to_list(t):
    return [float(x) for x in t.reshape(-1).tolist()]


def expected_for(model, tokenizer, versions):
    import numpy as np
    import torch
    from transformers import pipeline

    model.eval()
    qa = pipeline("question-answering", model=model, tokenizer=tokenizer, device=-1)
    cases = []
    for pair in PAIRS:
        enc = tokenizer(text=pair["question"], text_pair=pair["context"], padding="do_not_pad",
                        truncation="only_second", max_length=MAX_SEQ_LEN, stride=DOC_STRIDE,
                        return_token_type_ids=True, return_overflowing_tokens=True, return_offsets_mapping=True,
                        return_special_tokens_mask=True)
        windows = []
        for i in range(len(enc["input_ids"])):
            ids = enc["input_ids"][i]
            seq_ids = enc.sequence_ids(i)
            p_mask = [0 if s == 1 else 1 for s in seq_ids]
            for j, t in enumerate(ids):
                if t == tokenizer.cls_token_id:
                    p_mask[j] = 0
            feed = {k: torch.tensor([enc[k][i]]) for k in tokenizer.model_input_names}
            with torch.no_grad():
                out = model(**feed)
            w = {
                "input_ids": ids,
                "token_type_ids": enc["token_type_ids"][i],
                "attention_mask": enc["attention_mask"][i],
                "offsets": [list(o) for o in enc["offset_mapping"][i]],
                "sequence_ids": seq_ids,
                "word_ids": enc.word_ids(i),
                "p_mask": p_mask,
                "tokens": enc.tokens(i),
                "start_logits": to_list(out.start_logits),
                "end_logits": to_list(out.end_logits),
            }
            windows.append(w)
        params = dict(max_seq_len=MAX_SEQ_LEN, doc_stride=DOC_STRIDE, max_answer_len=MAX_ANSWER_LEN)
        top = qa(question=pair["question"], context=pair["context"], **params)
        top3 = qa(question=pair["question"], context=pair["context"], top_k=3, **params)
        # the null score: recorded from select_starts_ends' running minimum (the value the pipeline gives the
        # appended "" answer), as in tools/hf_qa_reference.py
        import transformers.pipelines.question_answering as qa_mod
        orig_select, seen = qa_mod.select_starts_ends, []

        def select_wrapper(*a, **kw):
            out = orig_select(*a, **kw)
            seen.append(out[3])
            return out

        qa_mod.select_starts_ends = select_wrapper
        try:
            imp_top = qa(question=pair["question"], context=pair["context"], handle_impossible_answer=True,
                         **params)
        finally:
            qa_mod.select_starts_ends = orig_select
        assert len(seen) == len(windows)
        null_score = float(seen[-1])
        # cross-check from the logits: min over windows of softmax(start)[0] * softmax(end)[0] with the mask
        ref = min(float(_cls_prob(w["start_logits"], w["p_mask"], w["attention_mask"]) *
                        _cls_prob(w["end_logits"], w["p_mask"], w["attention_mask"])) for w in windows)
        assert abs(ref - null_score) <= 1e-6 * max(ref, 1e-30) + 1e-12, (ref, null_score)

        def clean(a):
            return {"answer": a["answer"], "score": float(a["score"]), "start": int(a["start"]),
                    "end": int(a["end"])}

        first = windows[0]
        case = {
            "name": pair["name"],
            "question": pair["question"],
            "context": pair["context"],
            "n_windows": len(windows),
            "input_ids": first["input_ids"],
            "attention_mask": first["attention_mask"],
            "start_logits": first["start_logits"],
            "end_logits": first["end_logits"],
            "windows": windows,
            "pipeline": clean(top),
            "pipeline_top3": [clean(a) for a in (top3 if isinstance(top3, list) else [top3])],
            "pipeline_impossible": dict(clean(imp_top), null_score=null_score),
        }
        if "token_type_ids" in tokenizer.model_input_names:
            case["token_type_ids"] = first["token_type_ids"]
        # margin between the best and second-best answer: parity tests need it to be clearly non-zero
        if isinstance(top3, list) and len(top3) > 1:
            case["top1_top2_score_gap"] = float(top3[0]["score"] - top3[1]["score"])
        cases.append(case)
    return {
        "note": "Generated by tools/make_tiny_checkpoints.py. Pipeline: transformers question-answering, torch "
                "CPU float32, max_seq_len 64, doc_stride 16, max_answer_len 15. 'pipeline' = top_k 1; "
                "'pipeline_top3' = top_k 3 (scores differ from top_k 1: more candidates per window are merged "
                "by text); 'pipeline_impossible' = handle_impossible_answer=True, top_k 1, with null_score "
                "(min over windows of p_start(CLS)*p_end(CLS)). Logits are per window, float32, unpadded, "
                "fed with tokenizer.model_input_names only.",
        "versions": versions,
        "params": {"max_seq_len": MAX_SEQ_LEN, "doc_stride": DOC_STRIDE, "max_answer_len": MAX_ANSWER_LEN},
        "model_input_names": list(tokenizer.model_input_names),
        "cls_token_id": tokenizer.cls_token_id,
        "cases": cases,
    }


RERANK_CASES = [
    ("Which team won Super Bowl 50?", [
        "Super Bowl 50 was an American football game. The Denver Broncos defeated the Carolina Panthers 24-10.",
        "The game was played on February 7, 2016, at Levi's Stadium in Santa Clara, California.",
        "Café “Zürich” served 寿司 — and 🙂 emoji — to the fans.",
    ]),
    # a passage longer than the 128 positions: truncated (longest_first) to 128 tokens
    ("Where was the game played?", [" ".join(["The stadium hosted the game in the bay area of California."] * 20)]),
]


def rerank_expected(model, tokenizer, versions):
    """Scores of each (question, passage) pair, as a reranker computes them: truncation=True (longest_first)
    at the model's 128 positions, padded batch, the classifier's one logit."""
    import torch
    cases = []
    for question, passages in RERANK_CASES:
        enc = tokenizer([question] * len(passages), passages, padding=True, truncation=True, max_length=128,
                        return_tensors="pt")
        with torch.no_grad():
            scores = model(**enc).logits[:, 0]
        lengths = enc["attention_mask"].sum(1)
        cases.append({"question": question, "passages": passages, "scores": to_list(scores),
                      "input_ids": [ids[:n].tolist() for ids, n in zip(enc["input_ids"], lengths)]})
    return {"versions": versions, "max_length": 128, "cases": cases}


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def folder_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="crates/lector-models/tests/fixtures")
    data = os.environ.get("LECTOR_DATA_DIR") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")
    ap.add_argument("--squad", default=os.path.join(data, "squad", "dev-v1.1.json"),
                    help="SQuAD json whose contexts/questions train the tiny tokenizers")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    torch.set_num_threads(args.threads)
    import tokenizers
    import transformers
    from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification, AutoTokenizer

    transformers.logging.set_verbosity_error()
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__}

    texts = train_texts(args.squad)
    toks = make_tokenizers(texts)
    os.makedirs(args.out, exist_ok=True)
    sizes = {}

    def save(dirname, model, tokenizer, **kw):
        d = os.path.join(args.out, dirname)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        model.save_pretrained(d, **kw)
        tokenizer.save_pretrained(d)
        return d

    specs = [("bert", "tiny-bert", "wordpiece"), ("distilbert", "tiny-distilbert", "wordpiece"),
             ("roberta", "tiny-roberta", "bpe"), ("xlm-roberta", "tiny-xlm-roberta", "unigram")]
    for kind, dirname, tk in specs:
        from tokenizers import Tokenizer
        tokenizer = wrap(kind, Tokenizer.from_str(toks[tk].to_str()))
        model = make_model(kind, len(tokenizer), tokenizer)
        d = save(dirname, model, tokenizer)
        # expected outputs from what was saved (reloaded), as a consumer sees it
        m2 = AutoModelForQuestionAnswering.from_pretrained(d, dtype=torch.float32)
        t2 = AutoTokenizer.from_pretrained(d)
        write_json(os.path.join(d, "expected.json"), expected_for(m2, t2, versions))
        sizes[dirname] = folder_size(d)

        if kind == "bert":
            # same weights as float16 safetensors; expected from the f16 weights upcast to float32
            d16 = save("tiny-bert-f16", model.half(), tokenizer)
            model.float()
            m16 = AutoModelForQuestionAnswering.from_pretrained(d16, dtype=torch.float32)
            write_json(os.path.join(d16, "expected.json"), expected_for(m16, AutoTokenizer.from_pretrained(d16),
                                                                        versions))
            sizes["tiny-bert-f16"] = folder_size(d16)
            # same weights as pytorch_model.bin
            dp = save("tiny-bert-pth", m2, tokenizer, safe_serialization=False)
            mp = AutoModelForQuestionAnswering.from_pretrained(dp, dtype=torch.float32)
            write_json(os.path.join(dp, "expected.json"), expected_for(mp, AutoTokenizer.from_pretrained(dp),
                                                                       versions))
            sizes["tiny-bert-pth"] = folder_size(dp)
            # an encoder without a QA head
            nohead = make_model("bert-nohead", len(tokenizer), tokenizer)
            dn = save("tiny-bert-nohead", nohead, tokenizer)
            sizes["tiny-bert-nohead"] = folder_size(dn)
            # a cross-encoder reranker: the same encoder shape with a one-label classification head
            rerank = make_model("bert-rerank", len(tokenizer), tokenizer)
            dr = save("tiny-bert-rerank", rerank, tokenizer)
            mr = AutoModelForSequenceClassification.from_pretrained(dr, dtype=torch.float32)
            write_json(os.path.join(dr, "expected.json"), rerank_expected(mr, AutoTokenizer.from_pretrained(dr),
                                                                          versions))
            sizes["tiny-bert-rerank"] = folder_size(dr)

    print(json.dumps({"out": args.out, "versions": versions, "bytes": sizes}, indent=1))


if __name__ == "__main__":
    main()

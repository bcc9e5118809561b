"""Tiny sentence-transformers embedders, one per pooling recipe, with sentence-transformers' own
embeddings of a few texts (the reference lector's embedder must equal).

Each is tiny-bert-nohead (a random BertModel, see make_tiny_checkpoints.py) saved by
sentence-transformers with a different recipe:
  tiny-embed-mean/  Transformer + Pooling(mean) + Normalize (all-MiniLM-L6-v2's recipe)
  tiny-embed-cls/   Transformer + Pooling(cls), not normalised, with E5-style prompts
                    ("query: " and "passage: ", as BGE and E5 models ship them)
  tiny-embed-max/   Transformer + Pooling(max): a recipe lector refuses by name
and expected.json in each: {"texts": [...], "embeddings": [...], "queries": [...]} (queries:
the same texts encoded with prompt_name="query" where the model has prompts).

Usage (deterministic: two runs give the same files):
  PY=$(bash tools/setup-hf.sh | tail -1)
  $PY tools/make_tiny_embedders.py --out crates/lector-models/tests/fixtures
"""

import argparse
import json
import os
import shutil

import torch
from sentence_transformers import SentenceTransformer, models

TEXTS = [
    "Which team won Super Bowl 50?",
    "The Denver Broncos defeated the Carolina Panthers 24-10.",
    "Café, naïve, 東京 — and an emoji 😀.",
    "",
]


def build(source, pooling_mode, normalize, prompts):
    transformer = models.Transformer(source, max_seq_length=128)
    pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode=pooling_mode)
    modules = [transformer, pooling] + ([models.Normalize()] if normalize else [])
    return SentenceTransformer(modules=modules, prompts=prompts, device="cpu")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(20240607)
    source = os.path.join(args.out, "tiny-bert-nohead")
    recipes = {
        "tiny-embed-mean": ("mean", True, {}),
        "tiny-embed-cls": ("cls", False, {"query": "query: ", "passage": "passage: "}),
        "tiny-embed-max": ("max", True, {}),
    }
    for name, (mode, normalize, prompts) in recipes.items():
        model = build(source, mode, normalize, prompts)
        target = os.path.join(args.out, name)
        shutil.rmtree(target, ignore_errors=True)
        model.save(target)
        # What lector does not read; the weights and tokenizer stay.
        for extra in ("README.md", "sentence_bert_config.json"):
            path = os.path.join(target, extra)
            if os.path.exists(path):
                os.remove(path)
        expected = {
            "pooling": mode,
            "normalize": normalize,
            "prompts": prompts,
            "texts": TEXTS,
            "embeddings": model.encode(TEXTS, convert_to_numpy=True).tolist(),
        }
        if prompts:
            expected["queries"] = model.encode(TEXTS, prompt_name="query", convert_to_numpy=True).tolist()
            expected["passages"] = model.encode(TEXTS, prompt_name="passage", convert_to_numpy=True).tolist()
        with open(os.path.join(target, "expected.json"), "w") as f:
            json.dump(expected, f, indent=1, sort_keys=True)
            f.write("\n")
        print(name, sorted(os.listdir(target)))


if __name__ == "__main__":
    main()

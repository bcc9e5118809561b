"""Reference sentence embeddings from sentence-transformers, for lector's embedder parity test.

Usage (inside the environment of tools/setup-hf.sh, plus `pip install sentence-transformers`):
    python tools/st_reference.py MODEL_DIR TEXTS.json OUT.json

TEXTS.json is a JSON list of strings; OUT.json gets {"max_seq_length", "texts", "embeddings"}.
The model directory is loaded the way sentence-transformers loads a bare Hugging Face encoder:
a Transformer module followed by mean pooling and L2 normalisation (all-MiniLM-L6-v2's modules).
"""

import json
import sys

import torch
from sentence_transformers import SentenceTransformer, models


def main():
    model_dir, texts_path, out_path = sys.argv[1:4]
    torch.set_num_threads(2)
    encoder = models.Transformer(model_dir, max_seq_length=256)
    pooling = models.Pooling(encoder.get_word_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[encoder, pooling, models.Normalize()], device="cpu")
    texts = json.load(open(texts_path, encoding="utf-8"))
    vectors = model.encode(texts, batch_size=4, convert_to_numpy=True)
    json.dump(
        {
            "max_seq_length": model.max_seq_length,
            "texts": texts,
            "embeddings": [[round(float(x), 7) for x in v] for v in vectors],
        },
        open(out_path, "w", encoding="utf-8"),
        ensure_ascii=False,
    )


if __name__ == "__main__":
    main()

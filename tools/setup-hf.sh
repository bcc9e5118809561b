#!/usr/bin/env bash
# Creates the Python environment with Hugging Face transformers + torch (CPU use) that lector's extractive
# reader is checked and benchmarked against (tools/hf_qa_reference.py, tools/make_tiny_checkpoints.py), with
# sentence-transformers for the embedder's reference and benchmark (tools/st_reference.py, bench/embed_speed.py),
# and bert-score (with its pandas and matplotlib) for BERTScore's (tools/bertscore_reference.py, bench/bertscore_parity.py).
# Idempotent and cached: a second run is offline. Prints the interpreter path on its last line.
#
# torch: PyPI has only one Linux x86_64 wheel per version, built with CUDA; the CPU-only wheels live on a
# separate index this workplace cannot reach. `pip install --no-deps torch` plus its pure-Python requirements
# does NOT work: `import torch` fails in _load_global_deps (libtorch.so links libtorch_cuda.so, which needs
# libcudart/libcublas/libcudnn/... from the nvidia-*-cu12 wheels). So this installs the full dependency set:
# torch 2.9.1 wheel 900 MB + 15 nvidia-*-cu12 wheels + triton: 40 wheels, 4.1 GB downloaded, 6.9 GB on
# disk, about 3 minutes here. A GPU is never used (everything runs on the CPU).
set -euo pipefail
venv="${LECTOR_HF_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/hf-env}"
stamp="$venv/.lector-hf-v3"
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    torch==2.9.1 transformers==4.57.6 tokenizers==0.22.1 safetensors==0.6.2 numpy==2.3.5 \
    sentence-transformers==5.1.2 bert-score==0.3.13 pandas==3.1.1 matplotlib==3.11.2 >&2
  "$venv/bin/python" - >&2 <<'PY'
import importlib.metadata
import torch, transformers, tokenizers, safetensors, numpy, sentence_transformers, bert_score
torch.set_num_threads(1)
lin = torch.nn.Linear(4, 2)
assert lin(torch.ones(1, 4)).shape == (1, 2)
print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__,
      "safetensors", safetensors.__version__, "numpy", numpy.__version__, "bert-score", importlib.metadata.version("bert-score"))  # its __version__ says 0.3.12
PY
  touch "$stamp"
fi
echo "$venv/bin/python"

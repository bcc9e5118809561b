#!/usr/bin/env bash
# Adds ONNX Runtime (and onnx, for the export) to the reference environment of tools/setup-hf.sh: the peers
# `tools/hf_qa_reference.py --runtime onnx|onnx-int8` and bench/reader_speed.py --peers run on it.
# Idempotent and cached. Prints the interpreter path on its last line.
set -euo pipefail
python="$(bash "$(dirname "$0")/setup-hf.sh" | tail -n 1)"
stamp="$(dirname "$(dirname "$python")")/.lector-ort-v1"
if [ ! -f "$stamp" ]; then
  "$python" -m pip install -q --disable-pip-version-check onnxruntime==1.23.2 onnx==1.19.1 >&2
  "$python" -c "import onnx, onnxruntime; print('onnx', onnx.__version__, 'onnxruntime', onnxruntime.__version__)" >&2
  touch "$stamp"
fi
echo "$python"

"""ONNX Runtime as a peer of lector's reader and embedder: the checkpoint exported to ONNX (float32) and
dynamically quantized to int8; the reader runs under the Hugging Face question-answering pipeline's own pre- and
post-processing, the embedder as sentence-transformers runs it (bench/embed_speed.py).

This is what a user of Hugging Face Optimum gets for these checkpoints (`ORTModelForQuestionAnswering`, and
`ORTQuantizer` with a dynamic int8 configuration), written with onnxruntime's own API so that the bench needs
no further package:
- export: `torch.onnx.export` (the TorchScript exporter, opset 17) of the model's start and end logits, with
  dynamic batch and sequence axes;
- int8: `onnxruntime.quantization.quantize_dynamic` with QInt8 weights (per tensor, ONNX Runtime's default;
  `--per-channel` for one scale per output channel): the weights of every MatMul are stored in int8, the
  activations quantized per tensor at run time (uint8), products in int32;
- the session: all graph optimizations, `threads` intra-op threads, one inter-op thread.

Exports are cached beside the Python environment (`<cache>/lector/onnx/<model name>-<size>-<mtime>/`), so a
second run does not export again. Used by tools/hf_qa_reference.py --runtime onnx|onnx-int8 (tools/setup-ort.sh
installs onnx and onnxruntime into the environment of tools/setup-hf.sh).
"""

import os


def cache_dir(model_dir):
    """Where the exports of this checkpoint live: named by the folder and its weights' size and time."""
    weights = os.path.join(model_dir, "model.safetensors")
    stat = os.stat(weights)
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    name = f"{os.path.basename(os.path.normpath(model_dir))}-{stat.st_size}-{int(stat.st_mtime)}"
    return os.path.join(root, "lector", "onnx", name)


def export(model, tokenizer, model_dir, outputs=("start_logits", "end_logits")):
    """The float32 ONNX file of `model` (exported once, then cached); returns its path. `outputs` names the
    fields of the model's output that the graph returns."""
    import torch

    out_dir = cache_dir(model_dir)
    path = os.path.join(out_dir, "model.onnx")
    if os.path.exists(path):
        return path
    os.makedirs(out_dir, exist_ok=True)
    names = list(tokenizer.model_input_names)
    sample = tokenizer("Who?", "Someone wrote this.", return_tensors="pt")

    class Logits(torch.nn.Module):
        """The model with positional inputs and a (start, end) tuple: what the exporter traces."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):
            out = self.inner(**dict(zip(names, inputs)), return_dict=True)
            return tuple(out[name] for name in outputs)

    axes = {name: {0: "batch", 1: "sequence"} for name in (*names, *outputs)}
    tmp = path + ".part"
    with torch.no_grad():
        torch.onnx.export(Logits(model.float().eval()), tuple(sample[n] for n in names), tmp, input_names=names,
                          output_names=list(outputs), dynamic_axes=axes, opset_version=17,
                          dynamo=False)
    os.replace(tmp, path)
    return path


def quantize(f32_path, per_channel=False):
    """The int8 file (dynamic quantization, QInt8 weights) beside `f32_path` (made once); returns its path."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = f32_path.replace(".onnx", "-int8-per-channel.onnx" if per_channel else "-int8.onnx")
    if not os.path.exists(path):
        tmp = path + ".part.onnx"
        quantize_dynamic(f32_path, tmp, weight_type=QuantType.QInt8, per_channel=per_channel)
        os.replace(tmp, path)
    return path


def session(path, threads):
    """An ONNX Runtime CPU session on `path`: all graph optimizations, `threads` intra-op threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def model_file(model, tokenizer, model_dir, runtime, outputs=("start_logits", "end_logits"), per_channel=False):
    """The ONNX file a runtime ("onnx": float32, "onnx-int8") runs, exported and quantized as needed."""
    path = export(model, tokenizer, model_dir, outputs)
    return quantize(path, per_channel) if runtime == "onnx-int8" else path


def pipeline_model(model, tokenizer, model_dir, runtime, threads, per_channel=False):
    """A model object the question-answering pipeline runs like `model`, computing on ONNX Runtime."""
    import onnxruntime as ort
    import torch
    from transformers.modeling_outputs import QuestionAnsweringModelOutput

    path = model_file(model, tokenizer, model_dir, runtime, per_channel=per_channel)
    session_ = session(path, threads)
    wanted = [i.name for i in session_.get_inputs()]

    class OrtQuestionAnswering(torch.nn.Module):
        """Takes the pipeline's tensors, runs the ONNX session, returns the logits as torch tensors."""

        def __init__(self):
            super().__init__()
            self.config = model.config

        # What the pipeline asks of a model besides calling it.
        device = torch.device("cpu")
        dtype = torch.float32

        def can_generate(self):
            return False

        def forward(self, **inputs):
            feed = {name: inputs[name].numpy().astype("int64") for name in wanted}
            start, end = session_.run(["start_logits", "end_logits"], feed)
            return QuestionAnsweringModelOutput(start_logits=torch.from_numpy(start),
                                                end_logits=torch.from_numpy(end))

    return OrtQuestionAnswering(), os.path.basename(path), ort.__version__

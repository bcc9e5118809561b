//! The models lector trains as differentiable networks: BERT, DistilBERT and RoBERTa/XLM-R
//! encoders with a reader (`qa_outputs`), embedder (mean pooling) or reranker (pooler and
//! classifier) head, built from candle tensor operations so that candle's autograd yields every
//! parameter's gradient. The layout follows the Hugging Face modules (post-LayerNorm layers,
//! dropout where they put it), so a checkpoint trained here loads in transformers and in lector.
//!
//! Inference keeps its own packed kernels (lector-models); this file is the training twin, checked
//! against PyTorch's loss and gradients on tiny checkpoints (tests/pytorch_parity.rs).

use crate::error::{Error, Result};
use crate::rng::Rng;
use candle_core::{DType, Device, Tensor, Var};
use lector_models::{Architecture, Config, LayerNames};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The network's trainable tensors, in a fixed order, under the names they are saved with.
pub struct Params {
    pub names: Vec<String>,
    pub vars: Vec<Var>,
}

struct Linear {
    weight: Tensor,
    bias: Tensor,
}

struct LayerNorm {
    gamma: Tensor,
    beta: Tensor,
    eps: f64,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    ffn_in: Linear,
    ffn_out: Linear,
    ffn_norm: LayerNorm,
}

/// Dropout probabilities as the checkpoint's config sets them.
#[derive(Debug, Clone, Copy)]
pub struct Dropouts {
    pub hidden: f32,
    pub attention: f32,
    /// Before `qa_outputs` (DistilBERT's `qa_dropout`; BERT and RoBERTa have none there).
    pub head: f32,
}

/// Where one architecture keeps its tensors; the layers' own names are lector-models'.
struct Names {
    root: &'static str,
    layers: &'static str,
    parts: &'static LayerNames,
    /// Dropout after the attention output projection (BERT's `BertSelfOutput`; DistilBERT has none).
    attn_out_dropout: bool,
}

fn names(arch: Architecture) -> Names {
    let (root, layers, attn_out_dropout) = match arch {
        Architecture::Bert => ("bert", "encoder.layer", true),
        Architecture::Roberta => ("roberta", "encoder.layer", true),
        Architecture::DistilBert => ("distilbert", "transformer.layer", false),
    };
    Names {
        root,
        layers,
        parts: lector_models::layer_names(arch),
        attn_out_dropout,
    }
}

/// What the encoder's hidden states feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadKind {
    /// `qa_outputs`: start and end logits per token (an extractive reader).
    Qa,
    /// None: the mean of the token states is the output (a sentence embedder).
    Pooling,
    /// `pooler.dense` + tanh on [CLS], then a one-label `classifier` (a cross-encoder reranker).
    Classifier,
}

enum Head {
    Qa(Linear),
    Pooling,
    Classifier { pooler: Linear, classifier: Linear },
}

/// A network being trained: an encoder and its head.
pub struct Network {
    pub config: Config,
    /// `config.json` as read, written back (with the QA architecture) when saving.
    pub config_json: Value,
    pub dropouts: Dropouts,
    pub params: Params,
    pub kind: HeadKind,
    /// The checkpoint had no weights for the head: fresh ones were drawn.
    pub fresh_head: bool,
    /// Tensors of the checkpoint the network does not use (e.g. a pooler), saved back unchanged.
    extra: HashMap<String, Tensor>,
    /// Matrix products take bfloat16-rounded operands (autocast numerics). candle has no
    /// bfloat16 product on the CPU, so the rounding is emulated: slower, not faster.
    pub bf16: bool,
    word: Tensor,
    position: Tensor,
    token_type: Option<Tensor>,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    head: Head,
    attn_out_dropout: bool,
}

/// Loads the tensors of a weights file (safetensors or a PyTorch pickle) in their stored types.
fn read_weights(path: &Path) -> Result<HashMap<String, Tensor>> {
    let is_pickle = path
        .extension()
        .is_some_and(|e| e == "bin" || e == "pt" || e == "pth");
    Ok(if is_pickle {
        candle_core::pickle::read_all(path)?.into_iter().collect()
    } else {
        candle_core::safetensors::load(path, &Device::Cpu)?
    })
}

/// Takes tensors out of a checkpoint's map into [`Params`], checking shapes.
struct Loader {
    tensors: HashMap<String, Tensor>,
    /// The prefix the file uses for encoder tensors ("bert." or "" for a bare encoder).
    file_prefix: String,
    /// The prefix saved checkpoints use.
    saved_prefix: String,
    path: PathBuf,
    params: Params,
}

impl Loader {
    fn encoder(&mut self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let file_name = format!("{}{name}", self.file_prefix);
        let saved_name = format!("{}{name}", self.saved_prefix);
        self.take(&file_name, saved_name, shape)
    }

    fn take(&mut self, file_name: &str, saved_name: String, shape: &[usize]) -> Result<Tensor> {
        let tensor = self
            .tensors
            .remove(file_name)
            .ok_or_else(|| self.err(format!("the weights have no tensor `{file_name}`")))?;
        if tensor.dims() != shape {
            return Err(self.err(format!(
                "`{file_name}` has shape {:?}, the config implies {shape:?}",
                tensor.dims()
            )));
        }
        Ok(self.register(saved_name, tensor)?)
    }

    /// Makes `tensor` a trainable float32 parameter saved as `name`.
    fn register(&mut self, name: String, tensor: Tensor) -> candle_core::Result<Tensor> {
        let var = Var::from_tensor(&tensor.to_dtype(DType::F32)?.contiguous()?)?;
        let t = var.as_tensor().clone();
        self.params.names.push(name);
        self.params.vars.push(var);
        Ok(t)
    }

    fn linear(&mut self, name: &str, input: usize, output: usize) -> Result<Linear> {
        Ok(Linear {
            weight: self.encoder(&format!("{name}.weight"), &[output, input])?,
            bias: self.encoder(&format!("{name}.bias"), &[output])?,
        })
    }

    fn norm(&mut self, name: &str, size: usize, eps: f64) -> Result<LayerNorm> {
        Ok(LayerNorm {
            gamma: self.encoder(&format!("{name}.weight"), &[size])?,
            beta: self.encoder(&format!("{name}.bias"), &[size])?,
            eps,
        })
    }

    fn err(&self, message: String) -> Error {
        Error::Checkpoint {
            path: self.path.clone(),
            message,
        }
    }
}

impl Network {
    /// Loads the reader checkpoint in `dir`. Without a `qa_outputs` head (a bare encoder, or a
    /// checkpoint for another task), a fresh head is drawn from N(0, initializer_range²) with a
    /// zero bias, as transformers initialises it, from `seed`.
    pub fn load(dir: &Path, seed: u64) -> Result<Self> {
        Self::load_with(dir, seed, HeadKind::Qa)
    }

    /// Loads the checkpoint in `dir` with a head of `kind` (fresh, from `seed`, where the
    /// checkpoint has none). Readers are saved with the `bert.`-style prefix transformers' task
    /// models use; embedders and rerankers keep the naming of the checkpoint they came from.
    pub fn load_with(dir: &Path, seed: u64, kind: HeadKind) -> Result<Self> {
        let config_path = dir.join("config.json");
        let config = Config::load(&config_path)?;
        let config_json: Value = serde_json::from_str(
            &std::fs::read_to_string(&config_path).map_err(crate::error::io_err(&config_path))?,
        )
        .map_err(|e| Error::Checkpoint {
            path: config_path.clone(),
            message: e.to_string(),
        })?;
        let weights = lector_models::checkpoint::weights_path(dir)?;
        let tensors = read_weights(&weights)?;
        let names = names(config.architecture);
        let root_probe = format!("{}.embeddings.word_embeddings.weight", names.root);
        let file_prefix = match tensors.contains_key(&root_probe) {
            true => format!("{}.", names.root),
            false => String::new(),
        };
        let saved_prefix = match kind {
            HeadKind::Qa => format!("{}.", names.root),
            _ => file_prefix.clone(),
        };
        let mut loader = Loader {
            tensors,
            file_prefix,
            saved_prefix,
            path: weights,
            params: Params {
                names: Vec::new(),
                vars: Vec::new(),
            },
        };
        let h = config.hidden_size;
        let eps = config.layer_norm_eps;
        let word = loader.encoder("embeddings.word_embeddings.weight", &[config.vocab_size, h])?;
        let position = loader.encoder(
            "embeddings.position_embeddings.weight",
            &[config.max_position_embeddings, h],
        )?;
        let token_type = match config.architecture {
            Architecture::DistilBert => None,
            _ => Some(loader.encoder(
                "embeddings.token_type_embeddings.weight",
                &[config.type_vocab_size, h],
            )?),
        };
        let embed_norm = loader.norm("embeddings.LayerNorm", h, eps)?;
        let layers = (0..config.num_layers)
            .map(|i| load_layer(&mut loader, &names, i, &config))
            .collect::<Result<Vec<_>>>()?;
        let mut init = HeadInit {
            rng: Rng::stream(seed, crate::rng::INIT, 0),
            std: config_json["initializer_range"].as_f64().unwrap_or(0.02),
            fresh: false,
        };
        let pooler_name = format!("{}pooler.dense", loader.file_prefix);
        let head = match kind {
            HeadKind::Qa => Head::Qa(init.linear(&mut loader, "qa_outputs", h, 2)?),
            HeadKind::Pooling => Head::Pooling,
            HeadKind::Classifier => Head::Classifier {
                pooler: init.linear(&mut loader, &pooler_name, h, h)?,
                classifier: init.linear(&mut loader, "classifier", h, 1)?,
            },
        };
        Ok(Self {
            dropouts: dropouts(&config_json, config.architecture),
            attn_out_dropout: names.attn_out_dropout,
            // A reader is saved as transformers' QA model, which has no other tensors; embedders
            // and rerankers keep what they do not train (a pooler, buffers), as they were stored.
            extra: match kind {
                HeadKind::Qa => HashMap::new(),
                _ => std::mem::take(&mut loader.tensors),
            },
            bf16: false,
            params: loader.params,
            config,
            config_json,
            kind,
            fresh_head: init.fresh,
            word,
            position,
            token_type,
            embed_norm,
            layers,
            head,
        })
    }

    /// The last layer's hidden states, `(batch × seq, hidden)`. With `dropout` set, dropout acts
    /// (training), drawing its masks from that generator.
    pub fn hidden(&self, batch: &Batch, mut dropout: Option<&mut Rng>) -> Result<Tensor> {
        let flat = |x: &Tensor| x.flatten_all();
        let mut xs = self
            .word
            .index_select(&flat(&batch.ids)?, 0)?
            .add(&self.position.index_select(&flat(&batch.positions)?, 0)?)?;
        if let Some(token_type) = &self.token_type {
            xs = xs.add(&token_type.index_select(&flat(&batch.type_ids)?, 0)?)?;
        }
        let mut xs = layer_norm(&xs, &self.embed_norm)?;
        xs = drop(&xs, self.dropouts.hidden, dropout.as_deref_mut())?;
        for layer in &self.layers {
            xs = self.layer(layer, &xs, batch, dropout.as_deref_mut())?;
        }
        Ok(xs)
    }

    /// Start and end logits of a reader, `(batch, seq)` each.
    pub fn forward(
        &self,
        batch: &Batch,
        mut dropout: Option<&mut Rng>,
    ) -> Result<(Tensor, Tensor)> {
        let Head::Qa(head) = &self.head else {
            return Err(Error::Params(
                "forward() needs a reader (qa_outputs) head".into(),
            ));
        };
        let xs = self.hidden(batch, dropout.as_deref_mut())?;
        let xs = drop(&xs, self.dropouts.head, dropout)?;
        let logits = linear(&xs, head, self.bf16)?.reshape((batch.rows, batch.seq_len, 2))?;
        let start = logits.narrow(2, 0, 1)?.squeeze(2)?.contiguous()?;
        let end = logits.narrow(2, 1, 1)?.squeeze(2)?.contiguous()?;
        Ok((start, end))
    }

    /// Sentence embeddings, `(batch, hidden)`: the mean of each row's real token states (padding
    /// excluded), as sentence-transformers' mean pooling.
    pub fn embed(&self, batch: &Batch, dropout: Option<&mut Rng>) -> Result<Tensor> {
        let (b, t, h) = (batch.rows, batch.seq_len, self.config.hidden_size);
        let xs = self.hidden(batch, dropout)?.reshape((b, t, h))?;
        let real = batch.real.unsqueeze(2)?;
        let sums = xs.broadcast_mul(&real)?.sum(1)?;
        Ok(sums.broadcast_div(&batch.real.sum_keepdim(1)?)?)
    }

    /// One relevance score per row, `(batch,)`: [CLS] → pooler (tanh) → dropout → classifier.
    pub fn score(&self, batch: &Batch, mut dropout: Option<&mut Rng>) -> Result<Tensor> {
        let Head::Classifier { pooler, classifier } = &self.head else {
            return Err(Error::Params("score() needs a classifier head".into()));
        };
        let (b, t, h) = (batch.rows, batch.seq_len, self.config.hidden_size);
        let xs = self
            .hidden(batch, dropout.as_deref_mut())?
            .reshape((b, t, h))?;
        let cls = xs.narrow(1, 0, 1)?.squeeze(1)?.contiguous()?;
        let pooled = drop(
            &linear(&cls, pooler, self.bf16)?.tanh()?,
            self.dropouts.hidden,
            dropout,
        )?;
        Ok(linear(&pooled, classifier, self.bf16)?.squeeze(1)?)
    }

    fn layer(
        &self,
        layer: &Layer,
        xs: &Tensor,
        batch: &Batch,
        mut dropout: Option<&mut Rng>,
    ) -> Result<Tensor> {
        let (b, t) = (batch.rows, batch.seq_len);
        let (heads, h) = (self.config.num_heads, self.config.hidden_size);
        let d = h / heads;
        let split = |x: Tensor| -> candle_core::Result<Tensor> {
            x.reshape((b, t, heads, d))?.transpose(1, 2)?.contiguous()
        };
        let q = split((linear(xs, &layer.query, self.bf16)? * (1.0 / (d as f64).sqrt()))?)?;
        let k = split(linear(xs, &layer.key, self.bf16)?)?;
        let v = split(linear(xs, &layer.value, self.bf16)?)?;
        let attention = crate::fused::Attention {
            bias: batch.key_bias.clone(),
            dropout: if dropout.is_some() {
                self.dropouts.attention
            } else {
                0.0
            },
            seed: dropout.as_deref_mut().map_or(0, |rng| rng.next_u64()),
        };
        let context = q
            .apply_op3_arc(&k, &v, std::sync::Arc::new(Box::new(attention)))?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b * t, h))?;
        let mut attended = linear(&context, &layer.attn_out, self.bf16)?;
        if self.attn_out_dropout {
            attended = drop(&attended, self.dropouts.hidden, dropout.as_deref_mut())?;
        }
        let xs = layer_norm(&(attended + xs)?, &layer.attn_norm)?;
        let inner = activate(
            &linear(&xs, &layer.ffn_in, self.bf16)?,
            self.config.activation,
        )?;
        let out = drop(
            &linear(&inner, &layer.ffn_out, self.bf16)?,
            self.dropouts.hidden,
            dropout,
        )?;
        Ok(layer_norm(&(out + xs)?, &layer.ffn_norm)?)
    }

    /// Writes the parameters (float32) to `path` under their Hugging Face names.
    pub fn save_weights(&self, path: &Path) -> Result<()> {
        let mut tensors: HashMap<String, Tensor> = self.extra.clone();
        tensors.extend(
            self.params
                .names
                .iter()
                .cloned()
                .zip(self.params.vars.iter().map(|v| v.as_tensor().clone())),
        );
        candle_core::safetensors::save(&tensors, path)?;
        Ok(())
    }

    /// Replaces every parameter with the tensor of the same name in the safetensors file `path`.
    pub fn load_weights(&self, path: &Path) -> Result<()> {
        let mut tensors = candle_core::safetensors::load(path, &Device::Cpu)?;
        for (name, var) in self.params.names.iter().zip(&self.params.vars) {
            let tensor = tensors.remove(name).ok_or_else(|| Error::Checkpoint {
                path: path.to_path_buf(),
                message: format!("no tensor `{name}`"),
            })?;
            var.set(&tensor.to_dtype(DType::F32)?)?;
        }
        Ok(())
    }
}

fn load_layer(loader: &mut Loader, names: &Names, i: usize, cfg: &Config) -> Result<Layer> {
    let (h, inner, eps) = (cfg.hidden_size, cfg.intermediate_size, cfg.layer_norm_eps);
    let at = |part: &str| format!("{}.{i}.{part}", names.layers);
    Ok(Layer {
        query: loader.linear(&at(names.parts.query), h, h)?,
        key: loader.linear(&at(names.parts.key), h, h)?,
        value: loader.linear(&at(names.parts.value), h, h)?,
        attn_out: loader.linear(&at(names.parts.attn_out), h, h)?,
        attn_norm: loader.norm(&at(names.parts.attn_norm), h, eps)?,
        ffn_in: loader.linear(&at(names.parts.ffn_in), h, inner)?,
        ffn_out: loader.linear(&at(names.parts.ffn_out), inner, h)?,
        ffn_norm: loader.norm(&at(names.parts.ffn_norm), h, eps)?,
    })
}

/// Head layers from the checkpoint, or drawn fresh as transformers initialises them.
struct HeadInit {
    rng: Rng,
    std: f64,
    /// Some head layer was missing and drawn.
    fresh: bool,
}

impl HeadInit {
    fn linear(
        &mut self,
        loader: &mut Loader,
        name: &str,
        input: usize,
        output: usize,
    ) -> Result<Linear> {
        let (w, b) = (format!("{name}.weight"), format!("{name}.bias"));
        if loader.tensors.contains_key(&w) {
            let weight = loader.take(&w, w.clone(), &[output, input])?;
            let bias = loader.take(&b, b.clone(), &[output])?;
            return Ok(Linear { weight, bias });
        }
        self.fresh = true;
        let values: Vec<f32> = (0..output * input)
            .map(|_| (self.rng.normal() * self.std) as f32)
            .collect();
        let weight =
            loader.register(w, Tensor::from_vec(values, (output, input), &Device::Cpu)?)?;
        let bias = loader.register(b, Tensor::zeros(output, DType::F32, &Device::Cpu)?)?;
        Ok(Linear { weight, bias })
    }
}

fn dropouts(json: &Value, arch: Architecture) -> Dropouts {
    let p = |key: &str, default: f64| json[key].as_f64().unwrap_or(default) as f32;
    match arch {
        Architecture::DistilBert => Dropouts {
            hidden: p("dropout", 0.1),
            attention: p("attention_dropout", 0.1),
            head: p("qa_dropout", 0.1),
        },
        _ => Dropouts {
            hidden: p("hidden_dropout_prob", 0.1),
            attention: p("attention_probs_dropout_prob", 0.1),
            head: 0.0,
        },
    }
}

/// A padded batch of windows, as tensors.
pub struct Batch {
    pub rows: usize,
    pub seq_len: usize,
    pub ids: Tensor,
    pub type_ids: Tensor,
    pub positions: Tensor,
    /// `(rows × seq)`: 0 for real tokens, -1e9 for padding (added to attention scores).
    pub key_bias: Vec<f32>,
    /// `(rows, seq)`: 0 for real tokens, 1e9 for padding (subtracted from the logits in the loss).
    pub padding: Tensor,
    /// `(rows, seq)`: 1 for real tokens, 0 for padding.
    pub real: Tensor,
}

/// Positions in a RoBERTa embedding table start after the padding index.
fn positions(arch: Architecture, pad: u32, len: usize, seq_len: usize) -> Vec<u32> {
    match arch {
        Architecture::Roberta => (0..seq_len as u32)
            .map(|i| if (i as usize) < len { pad + 1 + i } else { pad })
            .collect(),
        _ => (0..seq_len as u32).collect(),
    }
}

impl Batch {
    /// Right-pads `rows` (token ids and type ids) to the longest.
    pub fn new(rows: &[(&[u32], &[u32])], config: &Config) -> Result<Self> {
        let n = rows.len();
        let seq_len = rows.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0);
        if seq_len > config.max_position_embeddings {
            return Err(Error::Params(format!(
                "a window of {seq_len} tokens exceeds the model's {} positions",
                config.max_position_embeddings
            )));
        }
        let pad = config.pad_token_id;
        let (mut ids, mut types, mut pos, mut bias) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (row_ids, row_types) in rows {
            let fill = seq_len - row_ids.len();
            ids.extend(
                row_ids
                    .iter()
                    .copied()
                    .chain(std::iter::repeat_n(pad, fill)),
            );
            types.extend(
                row_types
                    .iter()
                    .copied()
                    .chain(std::iter::repeat_n(0, fill)),
            );
            pos.extend(positions(config.architecture, pad, row_ids.len(), seq_len));
            bias.extend((0..seq_len).map(|i| if i < row_ids.len() { 0f32 } else { 1e9 }));
        }
        let dev = &Device::Cpu;
        let key_bias: Vec<f32> = bias.iter().map(|b| -b).collect();
        let real: Vec<f32> = bias
            .iter()
            .map(|&b| if b == 0.0 { 1.0 } else { 0.0 })
            .collect();
        let padding = Tensor::from_vec(bias, (n, seq_len), dev)?;
        Ok(Self {
            rows: n,
            seq_len,
            ids: Tensor::from_vec(ids, (n, seq_len), dev)?,
            type_ids: Tensor::from_vec(types, (n, seq_len), dev)?,
            positions: Tensor::from_vec(pos, (n, seq_len), dev)?,
            key_bias,
            real: Tensor::from_vec(real, (n, seq_len), dev)?,
            padding,
        })
    }
}

/// `xs · Wᵀ + b` over the rows of a `(rows, in)` tensor.
fn linear(xs: &Tensor, l: &Linear, bf16: bool) -> candle_core::Result<Tensor> {
    if bf16 {
        let round = |t: &Tensor| t.to_dtype(DType::BF16)?.to_dtype(DType::F32);
        return round(xs)?
            .matmul(&round(&l.weight)?.t()?)?
            .broadcast_add(&l.bias);
    }
    xs.matmul(&l.weight.t()?)?.broadcast_add(&l.bias)
}

fn layer_norm(xs: &Tensor, norm: &LayerNorm) -> candle_core::Result<Tensor> {
    let op = crate::fused::LayerNorm { eps: norm.eps };
    xs.contiguous()?
        .apply_op3_arc(&norm.gamma, &norm.beta, std::sync::Arc::new(Box::new(op)))
}

fn activate(
    xs: &Tensor,
    activation: lector_models::config::Activation,
) -> candle_core::Result<Tensor> {
    use lector_models::config::Activation;
    match activation {
        Activation::Gelu => xs.gelu_erf(),
        Activation::GeluTanh => xs.gelu(),
        Activation::Relu => xs.relu(),
    }
}

/// Inverted dropout: zeroes each value with probability `p` and scales the rest by 1/(1-p).
fn drop(xs: &Tensor, p: f32, rng: Option<&mut Rng>) -> candle_core::Result<Tensor> {
    let Some(rng) = rng.filter(|_| p > 0.0) else {
        return Ok(xs.clone());
    };
    let keep = 1.0 - p;
    let mask: Vec<f32> = (0..xs.elem_count())
        .map(|_| {
            if rng.uniform() < keep {
                1.0 / keep
            } else {
                0.0
            }
        })
        .collect();
    xs.mul(&Tensor::from_vec(mask, xs.shape(), xs.device())?)
}

//! Building blocks shared by all encoders: a post-LayerNorm transformer layer on packed
//! activations, `(tokens, hidden)` row-major with the windows' real tokens one after another (no
//! padding). Each model file maps its own weight names onto these.

use crate::config::{Activation, Config};
use crate::encoder::Packed;
use crate::kernels;
use crate::matmul::{matmul, Threads, View};
use crate::packed_gemm::PackedWeights;
use crate::Inputs;
use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

/// The values of a float32 tensor, row-major.
fn values(t: &Tensor) -> Result<Vec<f32>> {
    t.flatten_all()?.to_vec1::<f32>()
}

/// A dense layer with its weight stored transposed, `(in, out)` row-major, so the forward pass
/// is one plain GEMM; also packed for lector's own kernel where the CPU and shape allow.
pub(crate) struct Linear {
    weight_t: Vec<f32>,
    packed: Option<PackedWeights>,
    bias: Vec<f32>,
}

impl Linear {
    pub(crate) fn load(vb: &VarBuilder, name: &str, in_dim: usize, out_dim: usize) -> Result<Self> {
        let vb = vb.pp(name);
        let weight = vb.get((out_dim, in_dim), "weight")?;
        let bias = vb.get(out_dim, "bias")?;
        Self::from_parts(&weight, &bias)
    }

    /// `weight` is `(out, in)` as PyTorch stores it.
    fn from_parts(weight: &Tensor, bias: &Tensor) -> Result<Self> {
        let (out_dim, in_dim) = weight.dims2()?;
        let weight_t = values(&weight.t()?)?;
        Ok(Self {
            packed: PackedWeights::pack(&weight_t, in_dim, out_dim),
            weight_t,
            bias: values(bias)?,
        })
    }

    /// One `(in, 3 * out)` projection for query, key and value: one GEMM instead of three.
    /// The query is pre-scaled by `scale` (the 1/sqrt(head_dim) of attention).
    fn fused(parts: [(Tensor, Tensor); 3], scale: f64) -> Result<Self> {
        let [(wq, bq), (wk, bk), (wv, bv)] = parts;
        let weight = Tensor::cat(&[(wq * scale)?, wk, wv], 0)?;
        let bias = Tensor::cat(&[(bq * scale)?, bk, bv], 0)?;
        Self::from_parts(&weight, &bias)
    }

    pub(crate) fn out_dim(&self) -> usize {
        self.bias.len()
    }

    /// `out = xs · W + b` for the rows of `xs`; `out` holds `(rows, out_dim)`.
    pub(crate) fn forward(&self, xs: &[f32], out: &mut [f32], threads: Threads) {
        for row in out.chunks_exact_mut(self.out_dim()) {
            row.copy_from_slice(&self.bias);
        }
        self.accumulate(xs, out, threads);
    }

    /// `out += xs · W + b`: the residual connection, added in the same pass.
    fn forward_add(&self, xs: &[f32], out: &mut [f32], threads: Threads) {
        for row in out.chunks_exact_mut(self.out_dim()) {
            row.iter_mut().zip(&self.bias).for_each(|(o, b)| *o += b);
        }
        self.accumulate(xs, out, threads);
    }

    fn accumulate(&self, xs: &[f32], out: &mut [f32], threads: Threads) {
        if let (Some(packed), Threads::One) = (&self.packed, threads) {
            return packed.accumulate(xs, out);
        }
        let (n, k) = (self.out_dim(), self.weight_t.len() / self.out_dim());
        let rows = out.len() / n;
        let w = View::rows(&self.weight_t, k, n);
        matmul(out, n, View::rows(xs, rows, k), w, true, threads);
    }
}

/// LayerNorm with weight and bias (the `gamma`/`beta` of old checkpoints are accepted).
pub(crate) struct LayerNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

impl LayerNorm {
    pub(crate) fn load(vb: &VarBuilder, name: &str, size: usize, eps: f64) -> Result<Self> {
        let vb = vb.pp(name);
        let (weight, bias) = if vb.contains_tensor("weight") {
            (vb.get(size, "weight")?, vb.get(size, "bias")?)
        } else {
            (vb.get(size, "gamma")?, vb.get(size, "beta")?)
        };
        Ok(Self {
            weight: values(&weight)?,
            bias: values(&bias)?,
            eps: eps as f32,
        })
    }

    /// Normalises each row of `rows`, in place.
    pub(crate) fn apply(&self, rows: &mut [f32]) {
        kernels::layer_norm(rows, &self.weight, &self.bias, self.eps);
    }
}

/// Weight names of one transformer layer, relative to the layer's prefix (see [`layer_names`]).
pub struct LayerNames {
    pub query: &'static str,
    pub key: &'static str,
    pub value: &'static str,
    pub attn_out: &'static str,
    pub attn_norm: &'static str,
    pub ffn_in: &'static str,
    pub ffn_out: &'static str,
    pub ffn_norm: &'static str,
}

/// The weight names of one layer of `arch` (RoBERTa and XLM-R name theirs as BERT does); training
/// (lector-train) loads the same tensors under the same names.
pub fn layer_names(arch: crate::config::Architecture) -> &'static LayerNames {
    match arch {
        crate::config::Architecture::DistilBert => &crate::distilbert::LAYER_NAMES,
        _ => &crate::bert::LAYER_NAMES,
    }
}

/// Buffers a layer writes its intermediate results into, sized for the largest batch seen so far
/// and reused from call to call (fresh multi-megabyte buffers cost page faults and zeroing).
#[derive(Default)]
pub(crate) struct Scratch {
    qkv: Vec<f32>,
    context: Vec<f32>,
    ffn: Vec<f32>,
    scores: Vec<f32>,
}

/// `buf[..len]`, growing `buf` if needed; the contents are stale and must be overwritten.
fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// Self-attention + feed-forward, each followed by residual and LayerNorm (BERT's post-LN layout).
pub(crate) struct TransformerLayer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    ffn_in: Linear,
    ffn_out: Linear,
    ffn_norm: LayerNorm,
    num_heads: usize,
    activation: Activation,
}

impl TransformerLayer {
    pub(crate) fn load(vb: &VarBuilder, names: &LayerNames, cfg: &Config) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let part = |name: &str| -> Result<(Tensor, Tensor)> {
            Ok((
                vb.pp(name).get((h, h), "weight")?,
                vb.pp(name).get(h, "bias")?,
            ))
        };
        let scale = 1.0 / ((h / cfg.num_heads) as f64).sqrt();
        Ok(Self {
            qkv: Linear::fused(
                [part(names.query)?, part(names.key)?, part(names.value)?],
                scale,
            )?,
            attn_out: Linear::load(vb, names.attn_out, h, h)?,
            attn_norm: LayerNorm::load(vb, names.attn_norm, h, cfg.layer_norm_eps)?,
            ffn_in: Linear::load(vb, names.ffn_in, h, i)?,
            ffn_out: Linear::load(vb, names.ffn_out, i, h)?,
            ffn_norm: LayerNorm::load(vb, names.ffn_norm, h, cfg.layer_norm_eps)?,
            num_heads: cfg.num_heads,
            activation: cfg.activation,
        })
    }

    /// Relative cost of running a window of `len` tokens through the layer: the linear layers
    /// do `2 * hidden + intermediate` multiply-adds per token and hidden unit, attention `len`;
    /// attention counts double, its small products running at about half the speed.
    pub(crate) fn cost(&self, len: usize) -> usize {
        let per_token = 2 * self.attn_out.out_dim() + self.ffn_in.out_dim();
        len * (per_token + 2 * len)
    }

    /// Runs the layer in place on packed `xs` (`(tokens, hidden)`, window after window, window
    /// `w` having `lengths[w]` tokens).
    pub(crate) fn forward(
        &self,
        xs: &mut [f32],
        lengths: &[usize],
        scratch: &mut Scratch,
        threads: Threads,
    ) {
        let hidden = self.attn_out.out_dim();
        let tokens = xs.len() / hidden;
        let qkv = sized(&mut scratch.qkv, tokens * 3 * hidden);
        self.qkv.forward(xs, qkv, threads);
        let context = sized(&mut scratch.context, tokens * hidden);
        let longest = lengths.iter().copied().max().unwrap_or(0);
        let scores = sized(
            &mut scratch.scores,
            longest * longest.next_multiple_of(kernels::LANES),
        );
        self.attention(qkv, lengths, context, scores);
        self.attn_out.forward_add(context, xs, threads);
        self.attn_norm.apply(xs);
        let ffn = sized(&mut scratch.ffn, tokens * self.ffn_in.out_dim());
        self.ffn_in.forward(xs, ffn, threads);
        self.activate(ffn);
        self.ffn_out.forward_add(ffn, xs, threads);
        self.ffn_norm.apply(xs);
    }

    /// Scaled dot-product attention of every window and head, reading query, key and value
    /// from the packed `(tokens, 3 * hidden)` projection and writing each head's output into its
    /// columns of `context`. A window attends to its own tokens only, so padding never enters.
    fn attention(&self, qkv: &[f32], lengths: &[usize], context: &mut [f32], scores: &mut [f32]) {
        let hidden = self.attn_out.out_dim();
        let head_dim = hidden / self.num_heads;
        let mut first = 0;
        for &len in lengths {
            let qkv = &qkv[first * 3 * hidden..];
            let out = &mut context[first * hidden..];
            let stride = len.next_multiple_of(kernels::LANES);
            let scores = &mut scores[..len * stride];
            for head in 0..self.num_heads {
                let at = |part: usize| &qkv[part * hidden + head * head_dim..];
                let view = |part| View::new(at(part), (len, head_dim), (3 * hidden, 1));
                matmul(scores, stride, view(0), view(1).t(), false, Threads::One);
                kernels::softmax_rows(scores, len, stride);
                let probs = View::new(scores, (len, len), (stride, 1));
                matmul(
                    &mut out[head * head_dim..],
                    hidden,
                    probs,
                    view(2),
                    false,
                    Threads::One,
                );
            }
            first += len;
        }
    }

    fn activate(&self, xs: &mut [f32]) {
        match self.activation {
            Activation::Gelu => kernels::gelu(xs),
            Activation::GeluTanh => kernels::gelu_tanh(xs),
            Activation::Relu => kernels::relu(xs),
        }
    }
}

/// An embedding table, `(entries, width)` row-major.
pub(crate) struct Embedding {
    table: Vec<f32>,
    width: usize,
}

impl Embedding {
    pub(crate) fn load(vb: &VarBuilder, name: &str, entries: usize, width: usize) -> Result<Self> {
        let table = values(&vb.pp(name).get((entries, width), "weight")?)?;
        Ok(Self { table, width })
    }

    fn row(&self, id: u32) -> Result<&[f32]> {
        let start = id as usize * self.width;
        match self.table.get(start..start + self.width) {
            Some(row) => Ok(row),
            None => candle_core::bail!(
                "id {id} is out of range for an embedding table of {} entries",
                self.table.len() / self.width
            ),
        }
    }
}

/// The packed input of the first layer: for the real tokens of `inputs`, the sum of the lookups
/// in each table (ids laid out like `inputs.ids`), in order, then LayerNorm.
pub(crate) fn embed(
    tables: &[(&Embedding, &[u32])],
    inputs: &Inputs,
    norm: &LayerNorm,
) -> Result<Packed> {
    let n = inputs.batch * inputs.seq_len;
    if inputs.ids.len() != n
        || inputs.mask.len() != n
        || tables.iter().any(|(_, ids)| ids.len() != n)
    {
        candle_core::bail!(
            "inputs are not {} rows of {} ids",
            inputs.batch,
            inputs.seq_len
        );
    }
    let lengths = inputs.lengths();
    let width = norm.weight.len();
    let mut data = Vec::with_capacity(lengths.iter().sum::<usize>() * width);
    for (w, &len) in lengths.iter().enumerate() {
        for at in w * inputs.seq_len..w * inputs.seq_len + len {
            let start = data.len();
            data.extend_from_slice(tables[0].0.row(tables[0].1[at])?);
            for (table, ids) in &tables[1..] {
                let row = table.row(ids[at])?;
                data[start..].iter_mut().zip(row).for_each(|(x, e)| *x += e);
            }
        }
    }
    norm.apply(&mut data);
    Ok(Packed {
        data,
        width,
        lengths,
    })
}

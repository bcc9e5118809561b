//! Building blocks shared by all encoders: a post-LayerNorm transformer layer on flattened
//! `(batch * seq, hidden)` activations. Each model file maps its own weight names onto these.

use crate::config::{Activation, Config};
use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

/// A dense layer with its weight stored transposed, so the forward pass is one plain GEMM.
pub(crate) struct Linear {
    weight_t: Tensor,
    bias: Tensor,
}

impl Linear {
    pub(crate) fn load(vb: &VarBuilder, name: &str, in_dim: usize, out_dim: usize) -> Result<Self> {
        let vb = vb.pp(name);
        let weight = vb.get((out_dim, in_dim), "weight")?;
        let bias = vb.get(out_dim, "bias")?;
        Self::from_parts(&weight, bias)
    }

    /// `weight` is `(out, in)` as PyTorch stores it.
    fn from_parts(weight: &Tensor, bias: Tensor) -> Result<Self> {
        Ok(Self {
            weight_t: weight.t()?.contiguous()?,
            bias,
        })
    }

    /// One `(in, 3 * out)` projection for query, key and value: one GEMM instead of three.
    /// The query is pre-scaled by `scale` (the 1/sqrt(head_dim) of attention).
    fn fused(parts: [(Tensor, Tensor); 3], scale: f64) -> Result<Self> {
        let [(wq, bq), (wk, bk), (wv, bv)] = parts;
        let weight = Tensor::cat(&[(wq * scale)?, wk, wv], 0)?;
        let bias = Tensor::cat(&[(bq * scale)?, bk, bv], 0)?;
        Self::from_parts(&weight, bias)
    }

    /// `xs`: `(n, in)` -> `(n, out)`.
    pub(crate) fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        xs.matmul(&self.weight_t)?.broadcast_add(&self.bias)
    }
}

/// LayerNorm with weight and bias (the `gamma`/`beta` of old checkpoints are accepted).
pub(crate) struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
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
            weight,
            bias,
            eps: eps as f32,
        })
    }

    pub(crate) fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        candle_nn::ops::layer_norm(xs, &self.weight, &self.bias, self.eps)
    }
}

/// Weight names of one layer, relative to the layer's prefix.
pub(crate) struct LayerNames {
    pub query: &'static str,
    pub key: &'static str,
    pub value: &'static str,
    pub attn_out: &'static str,
    pub attn_norm: &'static str,
    pub ffn_in: &'static str,
    pub ffn_out: &'static str,
    pub ffn_norm: &'static str,
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

    /// `xs`: `(batch * seq, hidden)`; `lengths`: real tokens per row (right padding).
    pub(crate) fn forward(&self, xs: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let attn = self.attention(xs, lengths)?;
        let xs = self
            .attn_norm
            .forward(&(self.attn_out.forward(&attn)? + xs)?)?;
        let ffn = self.activate(&self.ffn_in.forward(&xs)?)?;
        self.ffn_norm.forward(&(self.ffn_out.forward(&ffn)? + xs)?)
    }

    fn attention(&self, xs: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let (n, hidden) = xs.dims2()?;
        let batch = lengths.len();
        let (seq, heads) = (n / batch, self.num_heads);
        let qkv = self.qkv.forward(xs)?;
        // (batch, seq, 3, heads, head_dim) -> (3, batch, heads, seq, head_dim)
        let qkv = qkv
            .reshape((batch, seq, 3, heads, hidden / heads))?
            .permute((2, 0, 3, 1, 4))?
            .contiguous()?;
        let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
        let probs = crate::ops::padded_softmax(&q.matmul(&k.t()?)?, lengths)?;
        probs.matmul(&v)?.transpose(1, 2)?.reshape((n, hidden))
    }

    fn activate(&self, xs: &Tensor) -> Result<Tensor> {
        match self.activation {
            Activation::Gelu => crate::ops::gelu(xs),
            Activation::GeluTanh => xs.gelu(),
            Activation::Relu => xs.relu(),
        }
    }
}

/// Sum of embedding lookups (`(table, ids)` pairs, ids flattened) followed by LayerNorm.
pub(crate) fn embed(
    first: (&Tensor, &Tensor),
    rest: &[(&Tensor, &Tensor)],
    norm: &LayerNorm,
) -> Result<Tensor> {
    let mut sum = first.0.index_select(first.1, 0)?;
    for (table, ids) in rest {
        sum = (sum + table.index_select(ids, 0)?)?;
    }
    norm.forward(&sum)
}

//! A quantized decoder-only transformer read from GGUF: the Llama and Qwen2 families.
//!
//! Written for lector rather than taken from `candle_transformers::models::quantized_*` so that
//! the weights are shared and immutable (`Model: Sync`; any number of generations run at once)
//! while the key/value cache belongs to each generation ([`Cache`]): preallocated for the
//! prompt plus the tokens to generate, filled in place, and reorderable across beams. The two
//! architectures differ only in Qwen2's q/k/v biases and in the rotary embedding's layout
//! (llama.cpp's NORM, interleaved pairs, for Llama; NEOX, split halves, for Qwen2). Grouped-query
//! attention multiplies each key/value head with its group of query heads directly (no copies of
//! the keys per query head).
//!
//! The matrix products on Q4_0, Q4_1 and Q8_0 weights run on lector's own kernels
//! ([`crate::qmatmul`], SIMD chosen at run time), other GGUF types on candle's `QMatMul`; matrices
//! that multiply the same input (q, k, v; gate, up) are stacked into one product. The attention
//! of a single new position (token generation) is one op ([`crate::attend`]).

use crate::attend::AttendOne;
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::qmatmul::{Isa, QWeights};
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::Embedding;
use candle_transformers::quantized_nn::RmsNorm;
use std::fs::File;

/// The architectures lector runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    Qwen2,
}

/// Hyper-parameters from the GGUF metadata.
#[derive(Debug, Clone)]
pub struct Config {
    pub architecture: Architecture,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub embedding: usize,
    /// The context window the model was trained for (`<arch>.context_length`).
    pub context_length: usize,
    pub rope_base: f32,
    pub rms_eps: f64,
}

impl Config {
    /// Reads the hyper-parameters; an architecture other than llama or qwen2 is refused by name.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self> {
        let name = gguf.architecture()?;
        let architecture = match name {
            "llama" => Architecture::Llama,
            "qwen2" => Architecture::Qwen2,
            other => {
                return Err(Error::UnsupportedArchitecture {
                    path: gguf.path.clone(),
                    architecture: other.to_string(),
                })
            }
        };
        let key = |k: &str| format!("{name}.{k}");
        let int = |k: &str| gguf.uint(&key(k)).map(|v| v as usize);
        let heads = int("attention.head_count")?;
        let embedding = int("embedding_length")?;
        if heads == 0 || embedding % heads != 0 {
            return Err(gguf.error(format!(
                "embedding length {embedding} is not a multiple of {heads} heads"
            )));
        }
        let head_dim = embedding / heads;
        let kv_heads = gguf
            .opt_uint(&key("attention.head_count_kv"))?
            .map_or(heads, |v| v as usize);
        if kv_heads == 0 || heads % kv_heads != 0 {
            return Err(gguf.error(format!("{heads} heads in groups of {kv_heads} kv heads")));
        }
        if let Some(rope_dim) = gguf.opt_uint(&key("rope.dimension_count"))? {
            if rope_dim as usize != head_dim {
                return Err(gguf.error(format!(
                    "partial rotary embeddings ({rope_dim} of {head_dim} dimensions) are not supported"
                )));
            }
        }
        Ok(Config {
            architecture,
            layers: int("block_count")?,
            heads,
            kv_heads,
            head_dim,
            embedding,
            context_length: int("context_length")?,
            rope_base: gguf.float_or(&key("rope.freq_base"), 10_000.0)?,
            rms_eps: f64::from(gguf.float_or(&key("attention.layer_norm_rms_epsilon"), 1e-5)?),
        })
    }
}

/// A weight matrix's product `x Wᵀ`: lector's kernels for the block formats they handle, on
/// CPUs with their SIMD (x86-64 with AVX2); candle's `QMatMul` otherwise (its kernels for other
/// formats, its NEON code on ARM, and the f32 reference).
enum Linear {
    Native(QWeights),
    Candle(QMatMul),
}

impl Linear {
    fn new(t: QTensor, dequantize: bool) -> Result<Self> {
        if !dequantize && Isa::detect() != Isa::Scalar {
            if let Some(w) = QWeights::from_qtensor(&t)? {
                return Ok(Linear::Native(w));
            }
        }
        to_matmul(t, dequantize).map(Linear::Candle)
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Linear::Native(w) => w.forward(x)?,
            Linear::Candle(m) => m.forward(x)?,
        })
    }
}

/// Matrices that multiply the same input (q, k, v; gate, up): stacked along the output
/// dimension into one product (one quantization of the input, one parallel region) when
/// lector's kernels take them all, separate products otherwise.
enum Group {
    Stacked(QWeights, Vec<usize>),
    Separate(Vec<Linear>),
}

impl Group {
    fn new(ts: Vec<QTensor>, dequantize: bool) -> Result<Self> {
        let linears = ts
            .into_iter()
            .map(|t| Linear::new(t, dequantize))
            .collect::<Result<Vec<_>>>()?;
        let stackable = match linears.first() {
            Some(Linear::Native(first)) => linears.iter().all(|l| {
                matches!(l, Linear::Native(w) if w.format() == first.format() && w.cols() == first.cols())
            }),
            _ => false,
        };
        if !stackable {
            return Ok(Group::Separate(linears));
        }
        let parts: Vec<QWeights> = linears
            .into_iter()
            .filter_map(|l| match l {
                Linear::Native(w) => Some(w),
                Linear::Candle(_) => None,
            })
            .collect();
        let sizes = parts.iter().map(QWeights::rows).collect();
        let stacked = QWeights::stack(parts).expect("one format and width");
        Ok(Group::Stacked(stacked, sizes))
    }

    /// The products with the `N` matrices, in the order they were given.
    fn forward<const N: usize>(&self, x: &Tensor) -> Result<[Tensor; N]> {
        let products = match self {
            Group::Separate(ls) => ls
                .iter()
                .map(|l| l.forward(x))
                .collect::<Result<Vec<_>>>()?,
            Group::Stacked(w, sizes) => {
                let y = w.forward(x)?;
                let mut start = 0;
                let mut parts = Vec::with_capacity(sizes.len());
                for &n in sizes {
                    parts.push(y.narrow(D::Minus1, start, n)?);
                    start += n;
                }
                parts
            }
        };
        <[Tensor; N]>::try_from(products)
            .map_err(|p| Error::Invalid(format!("{} products, not {N}", p.len())))
    }
}

struct Layer {
    attn_norm: RmsNorm,
    /// q, k, v.
    qkv: Group,
    /// Qwen2's q/k/v biases.
    biases: Option<[Tensor; 3]>,
    out: Linear,
    ffn_norm: RmsNorm,
    /// gate, up.
    gate_up: Group,
    down: Linear,
}

/// The weights of a model; immutable once loaded.
pub struct Model {
    pub config: Config,
    embed: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    output: Linear,
    cos: Tensor,
    sin: Tensor,
    device: Device,
}

/// The key/value cache of one generation: per layer, keys and values of shape
/// `(batch, kv_heads, capacity, head_dim)`, of which the first `len` positions are filled.
pub struct Cache {
    kv: Vec<(Tensor, Tensor)>,
    len: usize,
    capacity: usize,
}

impl Cache {
    /// Positions filled so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing has been fed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The cache for batch rows `rows` (in that order; a row may repeat): how beams follow
    /// their parents.
    pub fn select(&self, rows: &[u32]) -> Result<Cache> {
        let device = self.kv[0].0.device().clone();
        let index = Tensor::new(rows, &device)?;
        let kv = self
            .kv
            .iter()
            .map(|(k, v)| Ok((k.index_select(&index, 0)?, v.index_select(&index, 0)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Cache {
            kv,
            len: self.len,
            capacity: self.capacity,
        })
    }
}

impl Model {
    /// Loads the weights of `gguf` onto the CPU (matrix products on the quantized weights).
    pub fn load(gguf: &Gguf) -> Result<Self> {
        Self::load_with(gguf, false)
    }

    /// Loads the weights of `gguf`; with `dequantize`, every weight matrix is expanded to f32
    /// first (4-8 times the memory, slower), so that the products are exact f32 arithmetic on the
    /// dequantized weights instead of llama.cpp-style products against 8-bit-quantized
    /// activations. For checking the model against a float reference.
    pub fn load_with(gguf: &Gguf, dequantize: bool) -> Result<Self> {
        let config = Config::from_gguf(gguf)?;
        let device = Device::Cpu;
        let mut file = File::open(&gguf.path).map_err(crate::error::io_err(&gguf.path))?;
        let mut tensor = |name: &str| -> Result<QTensor> {
            gguf.content
                .tensor(&mut file, name, &device)
                .map_err(|e| gguf.error(format!("tensor `{name}`: {e}")))
        };
        let embed_q = tensor("token_embd.weight")?;
        let embed = Embedding::new(embed_q.dequantize(&device)?, config.embedding);
        let norm = RmsNorm::from_qtensor(tensor("output_norm.weight")?, config.rms_eps)?;
        let output = match gguf.content.tensor_infos.contains_key("output.weight") {
            true => tensor("output.weight")?,
            false => embed_q,
        };
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let mut w = |n: &str| tensor(&format!("blk.{i}.{n}"));
            let linear = |t: QTensor| Linear::new(t, dequantize);
            let biases = match config.architecture {
                Architecture::Llama => None,
                Architecture::Qwen2 => Some([
                    w("attn_q.bias")?.dequantize(&device)?,
                    w("attn_k.bias")?.dequantize(&device)?,
                    w("attn_v.bias")?.dequantize(&device)?,
                ]),
            };
            layers.push(Layer {
                attn_norm: RmsNorm::from_qtensor(w("attn_norm.weight")?, config.rms_eps)?,
                qkv: Group::new(
                    vec![
                        w("attn_q.weight")?,
                        w("attn_k.weight")?,
                        w("attn_v.weight")?,
                    ],
                    dequantize,
                )?,
                biases,
                out: linear(w("attn_output.weight")?)?,
                ffn_norm: RmsNorm::from_qtensor(w("ffn_norm.weight")?, config.rms_eps)?,
                gate_up: Group::new(vec![w("ffn_gate.weight")?, w("ffn_up.weight")?], dequantize)?,
                down: linear(w("ffn_down.weight")?)?,
            });
        }
        let (cos, sin) = rope_tables(&config, &device)?;
        Ok(Model {
            config,
            embed,
            layers,
            norm,
            output: Linear::new(output, dequantize)?,
            cos,
            sin,
            device,
        })
    }

    /// An empty cache for `batch` sequences of up to `capacity` positions.
    pub fn cache(&self, batch: usize, capacity: usize) -> Result<Cache> {
        let c = &self.config;
        let shape = (batch, c.kv_heads, capacity, c.head_dim);
        let kv = (0..c.layers)
            .map(|_| {
                Ok((
                    Tensor::zeros(shape, DType::F32, &self.device)?,
                    Tensor::zeros(shape, DType::F32, &self.device)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Cache {
            kv,
            len: 0,
            capacity,
        })
    }

    /// Feeds `tokens` (`batch` rows of equal length) after what `cache` holds and returns the
    /// logits of each row's last position, `(batch, vocab)`.
    pub fn forward(&self, tokens: &[Vec<u32>], cache: &mut Cache) -> Result<Tensor> {
        let batch = tokens.len();
        let seq = tokens.first().map_or(0, Vec::len);
        if seq == 0 || tokens.iter().any(|t| t.len() != seq) {
            return Err(Error::Invalid(
                "forward needs rows of equal, non-zero length".into(),
            ));
        }
        let pos = cache.len;
        if pos + seq > cache.capacity || pos + seq > self.config.context_length {
            return Err(Error::ContextOverflow {
                prompt: pos,
                max_new: seq,
                window: cache.capacity.min(self.config.context_length),
            });
        }
        let flat: Vec<u32> = tokens.iter().flatten().copied().collect();
        let ids = Tensor::from_vec(flat, (batch, seq), &self.device)?;
        let mask = causal_mask(seq, pos, &self.device)?;
        let mut x = self.embed.forward(&ids)?;
        for (layer, kv) in self.layers.iter().zip(cache.kv.iter_mut()) {
            let h = layer.attn_norm.forward(&x)?;
            let h = self.attention(layer, &h, pos, kv, mask.as_ref())?;
            x = (x + h)?;
            let h = layer.ffn_norm.forward(&x)?;
            let [gate, up] = layer.gate_up.forward(&h)?;
            let h = (gate.silu()? * up)?;
            x = (x + layer.down.forward(&h)?)?;
        }
        cache.len += seq;
        let last = x.narrow(1, seq - 1, 1)?;
        let logits = self.output.forward(&self.norm.forward(&last)?)?;
        Ok(logits.squeeze(1)?)
    }

    fn attention(
        &self,
        layer: &Layer,
        x: &Tensor,
        pos: usize,
        (k_cache, v_cache): &mut (Tensor, Tensor),
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let c = &self.config;
        let (batch, seq, _) = x.dims3()?;
        let [mut q, mut k, mut v] = layer.qkv.forward(x)?;
        if let Some([bq, bk, bv]) = &layer.biases {
            q = q.broadcast_add(bq)?;
            k = k.broadcast_add(bk)?;
            v = v.broadcast_add(bv)?;
        }
        let heads = |t: Tensor, n: usize| -> candle_core::Result<Tensor> {
            t.reshape((batch, seq, n, c.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = self.rope(&heads(q, c.heads)?, pos)?;
        let k = self.rope(&heads(k, c.kv_heads)?, pos)?;
        let v = heads(v, c.kv_heads)?;
        k_cache.slice_set(&k, 2, pos)?;
        v_cache.slice_set(&v, 2, pos)?;
        // Query heads grouped by the key/value head they share.
        let group = c.heads / c.kv_heads;
        if seq == 1 {
            let attend = AttendOne {
                len: pos + 1,
                group,
                scale: 1.0 / (c.head_dim as f32).sqrt(),
            };
            return layer
                .out
                .forward(&q.apply_op3_no_bwd(k_cache, v_cache, &attend)?);
        }
        let keys = k_cache.narrow(2, 0, pos + seq)?;
        let values = v_cache.narrow(2, 0, pos + seq)?;
        // (batch, kv_heads, group * seq, dim)
        let q = q.reshape((batch, c.kv_heads, group * seq, c.head_dim))?;
        let scores = (q.matmul(&keys.t()?)? / (c.head_dim as f64).sqrt())?;
        let scores = match mask {
            None => scores,
            Some(mask) => scores
                .reshape((batch, c.kv_heads, group, seq, pos + seq))?
                .broadcast_add(mask)?
                .reshape((batch, c.kv_heads, group * seq, pos + seq))?,
        };
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let y = probs.matmul(&values)?; // (batch, kv_heads, group * seq, dim)
        let y = y
            .reshape((batch, c.heads, seq, c.head_dim))?
            .transpose(1, 2)?
            .reshape((batch, seq, c.heads * c.head_dim))?;
        layer.out.forward(&y)
    }

    fn rope(&self, x: &Tensor, pos: usize) -> Result<Tensor> {
        let seq = x.dim(2)?;
        let cos = self.cos.narrow(0, pos, seq)?;
        let sin = self.sin.narrow(0, pos, seq)?;
        Ok(match self.config.architecture {
            Architecture::Llama => candle_nn::rotary_emb::rope_i(x, &cos, &sin)?,
            Architecture::Qwen2 => candle_nn::rotary_emb::rope(x, &cos, &sin)?,
        })
    }
}

/// A matrix product with `t`: on the quantized weights, or on their f32 expansion.
fn to_matmul(t: QTensor, dequantize: bool) -> Result<QMatMul> {
    Ok(if dequantize {
        QMatMul::Tensor(t.dequantize(&Device::Cpu)?)
    } else {
        QMatMul::from_qtensor(t)?
    })
}

/// cos and sin of every position's rotation angles, `(context_length, head_dim / 2)`.
fn rope_tables(c: &Config, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = c.head_dim / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| 1.0 / c.rope_base.powf(2.0 * i as f32 / c.head_dim as f32))
        .collect();
    let inv_freq = Tensor::from_vec(inv_freq, (1, half), device)?;
    let positions = Tensor::arange(0, c.context_length as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((c.context_length, 1))?;
    let angles = positions.matmul(&inv_freq)?;
    Ok((angles.cos()?, angles.sin()?))
}

/// The additive causal mask of `seq` new positions after `pos` cached ones, `(seq, pos + seq)`;
/// `None` for a single position (it sees everything).
fn causal_mask(seq: usize, pos: usize, device: &Device) -> Result<Option<Tensor>> {
    if seq == 1 {
        return Ok(None);
    }
    let width = pos + seq;
    let mask: Vec<f32> = (0..seq)
        .flat_map(|i| (0..width).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Ok(Some(Tensor::from_vec(mask, (seq, width), device)?))
}

/// Log-probabilities over the vocabulary from `logits` (last dimension).
pub fn log_softmax(logits: &Tensor) -> Result<Tensor> {
    Ok(candle_nn::ops::log_softmax(logits, D::Minus1)?)
}

//! Attention of one new position over the key/value cache: the step of token generation.
//!
//! Through candle this step is a chain of small ops (two batched matrix products whose general
//! GEMM repacks the cached keys every call, a softmax, reshapes and transposes), a large part of
//! the time per generated token for a small model. Here it is one pass per query head over the
//! cached keys and values, the heads spread over candle's thread pool, the inner loops
//! vectorized with AVX2 when the CPU has it (chosen at run time) and plain otherwise.

use candle_core::{CpuStorage, CustomOp3, Layout, Shape};
use std::ops::Range;

/// `softmax(q kᵀ · scale) v` for a single query position, as a candle op on
/// `(q, k_cache, v_cache)`: `q` is `(batch, heads, 1, head_dim)`, the caches
/// `(batch, kv_heads, capacity, head_dim)` of which the first `len` positions count; query head
/// `h` reads key/value head `h / group`. The result is `(batch, 1, heads * head_dim)`, the heads
/// side by side as the output projection wants them.
pub struct AttendOne {
    pub len: usize,
    pub group: usize,
    pub scale: f32,
}

impl AttendOne {
    /// The attention of query head `h` of batch row `b`, written to `out`.
    fn head(&self, q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], scores: &mut Vec<f32>) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { head_avx2(self, q, k, v, out, scores) };
        }
        head(self, q, k, v, out, scores)
    }
}

/// [`head`] compiled for AVX2 (the same code, vectorized 8 wide).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn head_avx2(
    op: &AttendOne,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
    scores: &mut Vec<f32>,
) {
    head(op, q, k, v, out, scores)
}

/// One query head: `q` and `out` of `head_dim` values, `k` and `v` the head's `len` cached rows.
#[inline(always)]
fn head(op: &AttendOne, q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], scores: &mut Vec<f32>) {
    let dim = q.len();
    scores.clear();
    scores.extend(
        k.chunks_exact(dim)
            .take(op.len)
            .map(|k| dot(q, k) * op.scale),
    );
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    out.fill(0.0);
    for (&p, v) in scores.iter().zip(v.chunks_exact(dim)) {
        let p = p / sum;
        for (o, &v) in out.iter_mut().zip(v) {
            *o += p * v;
        }
    }
}

/// A dot product in 8 independent lanes (so that it vectorizes), summed at the end.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (a, b) in a8.zip(b8) {
        for i in 0..8 {
            lanes[i] += a[i] * b[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The contiguous f32 data of a tensor's storage.
fn contiguous<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(data) = s else {
        candle_core::bail!("attention: f32 {what} expected");
    };
    match l.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("attention: contiguous {what} expected"),
    }
}

/// A pointer to the output, shared by the threads that write disjoint heads of it.
#[derive(Clone, Copy)]
struct Dst(*mut f32);

// SAFETY: the threads write disjoint heads and the buffer outlives the parallel region.
unsafe impl Send for Dst {}
unsafe impl Sync for Dst {}

impl Dst {
    /// # Safety
    /// In bounds, and no other thread writes these elements.
    unsafe fn slice<'a>(self, range: Range<usize>) -> &'a mut [f32] {
        unsafe { std::slice::from_raw_parts_mut(self.0.add(range.start), range.len()) }
    }
}

impl CustomOp3 for AttendOne {
    fn name(&self) -> &'static str {
        "lector-attend-one"
    }

    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (batch, heads, one, dim) = ql.shape().dims4()?;
        let (kb, kv_heads, capacity, kdim) = kl.shape().dims4()?;
        if one != 1
            || kl.shape() != vl.shape()
            || (kb, kdim) != (batch, dim)
            || kv_heads * self.group != heads
            || self.len > capacity
        {
            candle_core::bail!(
                "attention: q {:?}, caches {:?} {:?}, group {}, len {}",
                ql.dims(),
                kl.dims(),
                vl.dims(),
                self.group,
                self.len
            );
        }
        let (q, k, v) = (
            contiguous(qs, ql, "q")?,
            contiguous(ks, kl, "keys")?,
            contiguous(vs, vl, "values")?,
        );
        let mut out = vec![0f32; batch * heads * dim];
        let dst = Dst(out.as_mut_ptr());
        let cached = capacity * dim;
        candle_core::utils::barrier_pool().execute_chunked(batch * heads, |units| {
            let mut scores = Vec::with_capacity(self.len);
            for unit in units {
                let (b, h) = (unit / heads, unit % heads);
                let kv = (b * kv_heads + h / self.group) * cached;
                // SAFETY: unit `unit` alone writes its `dim` outputs.
                let out = unsafe { dst.slice(unit * dim..(unit + 1) * dim) };
                let q = &q[unit * dim..(unit + 1) * dim];
                self.head(
                    q,
                    &k[kv..kv + cached],
                    &v[kv..kv + cached],
                    out,
                    &mut scores,
                );
            }
        });
        Ok((CpuStorage::F32(out), Shape::from((batch, 1, heads * dim))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    #[test]
    fn scalar_and_simd_heads_agree() {
        let (dim, len) = (40, 9); // a dimension that is not a multiple of 8
        let values = |n: usize, f: f32| (0..n).map(|i| ((i as f32) * f).sin()).collect::<Vec<_>>();
        let (q, k, v) = (
            values(dim, 0.7),
            values(len * dim, 1.3),
            values(len * dim, 0.3),
        );
        let op = AttendOne {
            len,
            group: 1,
            scale: 0.2,
        };
        let (mut plain, mut scores) = (vec![0f32; dim], Vec::new());
        head(&op, &q, &k, &v, &mut plain, &mut scores);
        let mut dispatched = vec![0f32; dim];
        op.head(&q, &k, &v, &mut dispatched, &mut scores);
        for (a, b) in plain.iter().zip(&dispatched) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        assert!(plain.iter().any(|&x| x.abs() > 0.01));
    }

    /// Against the same attention through candle's ops (what the model runs for prompts).
    #[test]
    fn equals_candle_ops() {
        let (batch, kv_heads, group, capacity, dim, len) = (2, 3, 3, 11, 64, 7);
        let heads = kv_heads * group;
        let dev = &Device::Cpu;
        let mut seed = 1u32;
        let mut rand = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
                    (seed >> 8) as f32 / (1 << 23) as f32 - 1.0
                })
                .collect()
        };
        let q = Tensor::from_vec(rand(batch * heads * dim), (batch, heads, 1, dim), dev).unwrap();
        let cache = (batch, kv_heads, capacity, dim);
        let k = Tensor::from_vec(rand(batch * kv_heads * capacity * dim), cache, dev).unwrap();
        let v = Tensor::from_vec(rand(batch * kv_heads * capacity * dim), cache, dev).unwrap();
        let scale = 1.0 / (dim as f32).sqrt();
        let attend = AttendOne { len, group, scale };
        let got = q.apply_op3_no_bwd(&k, &v, &attend).unwrap();
        assert_eq!(got.dims(), &[batch, 1, heads * dim]);

        let keys = k.narrow(2, 0, len).unwrap();
        let values = v.narrow(2, 0, len).unwrap();
        let q = q.reshape((batch, kv_heads, group, dim)).unwrap();
        let scores = (q.matmul(&keys.t().unwrap()).unwrap() * f64::from(scale)).unwrap();
        let probs = candle_nn::ops::softmax_last_dim(&scores).unwrap();
        let want = probs.matmul(&values.contiguous().unwrap()).unwrap();
        let want = want.reshape((batch, 1, heads * dim)).unwrap();
        let diff = (got - want).unwrap().abs().unwrap().max_all().unwrap();
        assert!(diff.to_scalar::<f32>().unwrap() < 1e-5);
    }
}

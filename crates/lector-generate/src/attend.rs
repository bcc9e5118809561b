//! Attention of one new position over the key/value cache: the step of token generation.
//!
//! Through candle this step is a chain of small ops (two batched matrix products whose general
//! GEMM repacks the cached keys every call, a softmax, reshapes and transposes), a large part of
//! the time per generated token for a small model. Here it is one pass per query head over the
//! cached keys and values, the heads spread over candle's thread pool, with AVX2 and FMA when
//! the CPU has them (chosen at run time), plain Rust otherwise.

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
    /// The attention of one query head, written to `out`.
    fn head(&self, q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], scores: &mut Vec<f32>) {
        #[cfg(target_arch = "x86_64")]
        if q.len().is_multiple_of(8)
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA; the head dimension is a multiple of 8.
            return unsafe { x86::head(self, q, k, v, out, scores) };
        }
        head(self, q, k, v, out, scores)
    }
}

/// One query head: `q` and `out` of `head_dim` values, `k` and `v` the head's cached rows (at
/// least `len`).
fn head(op: &AttendOne, q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], scores: &mut Vec<f32>) {
    let dim = q.len();
    scores.clear();
    scores.extend(
        k.chunks_exact(dim)
            .take(op.len)
            .map(|k| q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * op.scale),
    );
    softmax(scores);
    out.fill(0.0);
    for (&p, v) in scores.iter().zip(v.chunks_exact(dim)) {
        for (o, &v) in out.iter_mut().zip(v) {
            *o += p * v;
        }
    }
}

/// Softmax in place.
fn softmax(scores: &mut [f32]) {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    scores.iter_mut().for_each(|s| *s /= sum);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::AttendOne;
    use std::arch::x86_64::*;

    /// [`super::head`] with AVX2 and FMA, 8 dimensions at a time.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `q.len()` is a multiple of 8; `k` and `v` hold `op.len` rows.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn head(
        op: &AttendOne,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        out: &mut [f32],
        scores: &mut Vec<f32>,
    ) {
        let dim = q.len();
        assert!(k.len() >= op.len * dim && v.len() >= op.len * dim && out.len() == dim);
        let (q, k, v, o) = (q.as_ptr(), k.as_ptr(), v.as_ptr(), out.as_mut_ptr());
        scores.clear();
        for t in 0..op.len {
            let row = k.add(t * dim);
            let (mut a, mut b) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            let mut c = 0;
            while c + 16 <= dim {
                a = _mm256_fmadd_ps(_mm256_loadu_ps(q.add(c)), _mm256_loadu_ps(row.add(c)), a);
                b = _mm256_fmadd_ps(
                    _mm256_loadu_ps(q.add(c + 8)),
                    _mm256_loadu_ps(row.add(c + 8)),
                    b,
                );
                c += 16;
            }
            if c < dim {
                a = _mm256_fmadd_ps(_mm256_loadu_ps(q.add(c)), _mm256_loadu_ps(row.add(c)), a);
            }
            let s = _mm256_add_ps(a, b);
            let s = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
            scores.push(s * op.scale);
        }
        super::softmax(scores);
        // The weighted sum of the values, 64 dimensions (8 registers) at a time.
        let mut c = 0;
        while c + 64 <= dim {
            weighted_sum::<8>(scores, v.add(c), dim, o.add(c));
            c += 64;
        }
        while c < dim {
            weighted_sum::<1>(scores, v.add(c), dim, o.add(c));
            c += 8;
        }
    }

    /// `out[..8 N] = Σ_t p[t] · v[t·dim..][..8 N]`, the sums kept in registers.
    #[inline(always)]
    unsafe fn weighted_sum<const N: usize>(p: &[f32], v: *const f32, dim: usize, out: *mut f32) {
        let mut acc = [_mm256_setzero_ps(); N];
        for (t, &p) in p.iter().enumerate() {
            let (p, row) = (_mm256_set1_ps(p), v.add(t * dim));
            for (j, acc) in acc.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(p, _mm256_loadu_ps(row.add(8 * j)), *acc);
            }
        }
        for (j, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(8 * j), *acc);
        }
    }
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
        let (dim, len) = (40, 9); // 16 + 16 + 8
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

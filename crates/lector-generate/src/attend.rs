//! Attention of one new position over the key/value cache: the step of token generation.
//!
//! Through candle this step is a chain of small ops (two batched matrix products whose general
//! GEMM repacks the cached keys every call, a softmax, reshapes and transposes), a large part of
//! the time per generated token for a small model. Here it is one op: the cached positions are cut
//! into chunks of [`CHUNK`], and each (key/value head, chunk) unit, spread over candle's thread
//! pool, scores the chunk's keys against the query heads that share them and sums its values
//! weighted by the unnormalized softmax; the chunks are then merged with their maxima (as in
//! flash-decoding). Every cached key and value is read from memory once per step, whatever the
//! context length or the number of query heads per key/value head. AVX2 and FMA when the CPU has
//! them (chosen at run time), plain Rust otherwise.

use candle_core::{CpuStorage, CustomOp3, Layout, Shape};
use std::ops::Range;

/// Cached positions per unit of work.
pub const CHUNK: usize = 128;

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

/// Whether the AVX2 code runs here (for this head dimension).
fn simd(dim: usize) -> bool {
    dim.is_multiple_of(8) && lector_simd::features().avx2_fma
}

/// One query head over one chunk: `keys` and `values` hold the chunk's rows. Writes
/// `[max, Σ exp(s - max), Σ exp(s - max) v...]` (`head_dim + 2` values) to `part`, where `s` are
/// the scaled scores; `scores` is scratch.
fn chunk(
    simd: bool,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    scale: f32,
    scores: &mut [f32],
    part: &mut [f32],
) {
    let dim = q.len();
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is true only with AVX2 and FMA and a head dimension a multiple of 8.
        unsafe { x86::scores(q, keys, scale, scores) };
    }
    if !simd {
        for (s, k) in scores.iter_mut().zip(keys.chunks_exact(dim)) {
            *s = q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale;
        }
    }
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    let (ml, acc) = part.split_at_mut(2);
    (ml[0], ml[1]) = (max, sum);
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: as above.
        unsafe { x86::weighted_sum(scores, values, acc) };
        return;
    }
    acc.fill(0.0);
    for (&p, v) in scores.iter().zip(values.chunks_exact(dim)) {
        for (o, &v) in acc.iter_mut().zip(v) {
            *o += p * v;
        }
    }
}

/// Merges the chunks of one head (`head_dim + 2` values each, see [`chunk`]) into `out`.
fn merge(parts: &[f32], out: &mut [f32]) {
    let stride = out.len() + 2;
    let max = parts
        .chunks_exact(stride)
        .map(|p| p[0])
        .fold(f32::NEG_INFINITY, f32::max);
    out.fill(0.0);
    let mut sum = 0f32;
    for part in parts.chunks_exact(stride) {
        let w = (part[0] - max).exp();
        sum += w * part[1];
        for (o, &a) in out.iter_mut().zip(&part[2..]) {
            *o += w * a;
        }
    }
    out.iter_mut().for_each(|o| *o /= sum);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `scores[t] = q · keys[t] · scale`, 16 dimensions at a time.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `q.len()` is a multiple of 8; `keys` holds `scores.len()` rows.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn scores(q: &[f32], keys: &[f32], scale: f32, scores: &mut [f32]) {
        let dim = q.len();
        assert!(keys.len() >= scores.len() * dim);
        let (q, k) = (q.as_ptr(), keys.as_ptr());
        for (t, score) in scores.iter_mut().enumerate() {
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
            *score = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s))) * scale;
        }
    }

    /// `out = Σ_t p[t] · values[t]`, 64 dimensions (8 registers) at a time.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `out.len()` is a multiple of 8; `values` holds `p.len()` rows.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn weighted_sum(p: &[f32], values: &[f32], out: &mut [f32]) {
        let dim = out.len();
        assert!(dim.is_multiple_of(8) && values.len() >= p.len() * dim);
        let (v, o) = (values.as_ptr(), out.as_mut_ptr());
        let mut c = 0;
        while c + 64 <= dim {
            columns::<8>(p, v.add(c), dim, o.add(c));
            c += 64;
        }
        while c < dim {
            columns::<1>(p, v.add(c), dim, o.add(c));
            c += 8;
        }
    }

    /// [`weighted_sum`] for the `8 N` columns at `v`, the sums kept in registers.
    #[inline(always)]
    unsafe fn columns<const N: usize>(p: &[f32], v: *const f32, dim: usize, out: *mut f32) {
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

/// A pointer to the chunk results, shared by the threads that write disjoint parts of them.
#[derive(Clone, Copy)]
struct Dst(*mut f32);

// SAFETY: the threads write disjoint parts and the buffer outlives the parallel region.
unsafe impl Send for Dst {}
unsafe impl Sync for Dst {}

impl Dst {
    /// # Safety
    /// In bounds, and no other thread accesses these elements meanwhile.
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
            || self.len == 0
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
        let simd = simd(dim);
        let chunks = self.len.div_ceil(CHUNK);
        // Per query head and chunk: max, sum, weighted values.
        let stride = dim + 2;
        let mut parts = vec![0f32; batch * heads * chunks * stride];
        let dst = Dst(parts.as_mut_ptr());
        let units = batch * kv_heads * chunks;
        candle_core::utils::barrier_pool().execute_chunked(units, |units| {
            let mut scores = vec![0f32; CHUNK];
            for unit in units {
                // Key/value head `kv` of all batch rows (b * kv_heads + kv_head), chunk `c`.
                let (kv, c) = (unit / chunks, unit % chunks);
                let (t0, t1) = (c * CHUNK, ((c + 1) * CHUNK).min(self.len));
                let rows = (kv * capacity + t0) * dim..(kv * capacity + t1) * dim;
                let (keys, values) = (&k[rows.clone()], &v[rows]);
                for h in kv * self.group..(kv + 1) * self.group {
                    let at = (h * chunks + c) * stride;
                    // SAFETY: unit (kv, c) alone writes the parts of its heads' chunk c.
                    let part = unsafe { dst.slice(at..at + stride) };
                    let q = &q[h * dim..(h + 1) * dim];
                    chunk(
                        simd,
                        q,
                        keys,
                        values,
                        self.scale,
                        &mut scores[..t1 - t0],
                        part,
                    );
                }
            }
        });
        let mut out = vec![0f32; batch * heads * dim];
        for (out, parts) in out
            .chunks_exact_mut(dim)
            .zip(parts.chunks_exact(chunks * stride))
        {
            merge(parts, out);
        }
        Ok((CpuStorage::F32(out), Shape::from((batch, 1, heads * dim))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    fn values(n: usize, f: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32) * f).sin()).collect()
    }

    #[test]
    fn scalar_and_simd_chunks_agree() {
        let (dim, len) = (40, 9); // 16 + 16 + 8 dimensions
        let (q, k, v) = (
            values(dim, 0.7),
            values(len * dim, 1.3),
            values(len * dim, 0.3),
        );
        let mut scores = vec![0f32; len];
        let (mut plain, mut fast) = (vec![0f32; dim + 2], vec![0f32; dim + 2]);
        chunk(false, &q, &k, &v, 0.2, &mut scores, &mut plain);
        chunk(simd(dim), &q, &k, &v, 0.2, &mut scores, &mut fast);
        for (a, b) in plain.iter().zip(&fast) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        assert!(plain[2..].iter().any(|&x| x.abs() > 0.01));
    }

    /// Against the same attention through candle's ops (what the model runs for prompts), with
    /// one chunk and with several.
    #[test]
    fn equals_candle_ops() {
        for (capacity, len) in [(11, 7), (2 * CHUNK + 40, 2 * CHUNK + 31)] {
            let (batch, kv_heads, group, dim) = (2, 3, 3, 64);
            let heads = kv_heads * group;
            let dev = &Device::Cpu;
            let cache = (batch, kv_heads, capacity, dim);
            let n = batch * kv_heads * capacity * dim;
            let q = values(batch * heads * dim, 0.37);
            let q = Tensor::from_vec(q, (batch, heads, 1, dim), dev).unwrap();
            let k = Tensor::from_vec(values(n, 0.71), cache, dev).unwrap();
            let v = Tensor::from_vec(values(n, 0.13), cache, dev).unwrap();
            let scale = 1.0 / (dim as f32).sqrt();
            let attend = AttendOne { len, group, scale };
            let got = q.apply_op3_no_bwd(&k, &v, &attend).unwrap();
            assert_eq!(got.dims(), &[batch, 1, heads * dim]);

            let keys = k.narrow(2, 0, len).unwrap();
            let values = v.narrow(2, 0, len).unwrap().contiguous().unwrap();
            let q = q.reshape((batch, kv_heads, group, dim)).unwrap();
            let scores = (q.matmul(&keys.t().unwrap()).unwrap() * f64::from(scale)).unwrap();
            let probs = candle_nn::ops::softmax_last_dim(&scores).unwrap();
            let want = probs.matmul(&values).unwrap();
            let want = want.reshape((batch, 1, heads * dim)).unwrap();
            let diff = (got - want).unwrap().abs().unwrap().max_all().unwrap();
            assert!(diff.to_scalar::<f32>().unwrap() < 1e-5, "len {len}");
        }
    }
}

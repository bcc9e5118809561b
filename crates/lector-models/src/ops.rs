//! Two fused CPU kernels that replace candle's generic ones on the hot path of the encoders:
//! GELU with a fast erf (libm's `erff` was ~12% of the reader's time) and a softmax that knows
//! where each sequence's padding starts (one pass instead of mask-add + softmax over a tensor of
//! `batch * heads * seq * seq` floats).

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// Elements per parallel work item: big enough to amortise scheduling.
const CHUNK: usize = 1 << 14;

fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: float32 input required")
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("{op}: contiguous input required"),
    }
}

/// erf for float32: the rational approximation Eigen and XLA use (within a few ulp on [-4, 4],
/// where erf saturates to +-1 in float32 precision).
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let alpha = [
        -2.726_142_3e-10_f32,
        2.770_681_4e-08,
        -2.101_024e-06,
        -5.692_506_4e-05,
        -7.349_906_3e-04,
        -2.954_6e-3,
        -1.609_603_3e-02,
    ];
    let beta = [
        -1.456_607_2e-05_f32,
        -2.133_740_6e-04,
        -1.682_827e-03,
        -7.373_329_3e-03,
        -1.426_474e-02,
    ];
    // Plain multiply-add, not `mul_add`: without a target-cpu flag that is a slow library call.
    let p = alpha.iter().skip(1).fold(alpha[0], |acc, &c| acc * x2 + c) * x;
    let q = beta.iter().skip(1).fold(beta[0], |acc, &c| acc * x2 + c);
    p / q
}

/// Exact (erf-based) GELU, as transformers' `gelu`.
struct Gelu;

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "lector-gelu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let xs = contiguous_f32(storage, layout, self.name())?;
        let mut out = vec![0f32; xs.len()];
        out.par_chunks_mut(CHUNK)
            .zip(xs.par_chunks(CHUNK))
            .for_each(|(o, x)| {
                for (o, &x) in o.iter_mut().zip(x) {
                    *o = 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2));
                }
            });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

pub(crate) fn gelu(xs: &Tensor) -> Result<Tensor> {
    xs.contiguous()?.apply_op1_no_bwd(&Gelu)
}

/// Softmax over the last dimension of `(batch, heads, seq, seq)` attention scores where keys at
/// or after `lengths[b]` are padding: they get probability 0, exactly what adding transformers'
/// `finfo.min` mask before the softmax gives in float32.
struct PaddedSoftmax<'a> {
    lengths: &'a [usize],
}

impl CustomOp1 for PaddedSoftmax<'_> {
    fn name(&self) -> &'static str {
        "lector-padded-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let xs = contiguous_f32(storage, layout, self.name())?;
        let seq = layout.shape().dims().last().copied().unwrap_or(1);
        let rows_per_item = xs.len() / seq / self.lengths.len().max(1);
        let mut out = vec![0f32; xs.len()];
        // Blocks of rows, not single rows, per work item: rows are short.
        let block = (CHUNK / seq).max(1) * seq;
        out.par_chunks_mut(block)
            .zip(xs.par_chunks(block))
            .enumerate()
            .for_each(|(b, (o, x))| {
                let first_row = b * block / seq;
                for (r, (o, x)) in o.chunks_mut(seq).zip(x.chunks(seq)).enumerate() {
                    let valid = self.lengths[(first_row + r) / rows_per_item].min(seq);
                    softmax_row(&x[..valid], &mut o[..valid]);
                }
            });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

fn softmax_row(x: &[f32], out: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v - max).exp();
        sum += *o;
    }
    out.iter_mut().for_each(|o| *o /= sum);
}

pub(crate) fn padded_softmax(scores: &Tensor, lengths: &[usize]) -> Result<Tensor> {
    scores
        .contiguous()?
        .apply_op1_no_bwd(&PaddedSoftmax { lengths })
}

#[cfg(test)]
mod tests {
    #[test]
    fn fast_erf_is_accurate() {
        let worst = (-6000..=6000)
            .map(|i| i as f32 / 1000.0)
            .map(|x| (super::erf(x) as f64 - reference_erf(x as f64)).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-6, "max error {worst}");
    }

    /// erf by its Taylor series up to 3.5, by the asymptotic series of erfc beyond.
    fn reference_erf(x: f64) -> f64 {
        if x.abs() > 3.5 {
            let a = x.abs();
            let erfc = (-a * a).exp() / (a * std::f64::consts::PI.sqrt())
                * (1.0 - 0.5 / (a * a) + 0.75 / a.powi(4));
            return x.signum() * (1.0 - erfc);
        }
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs().max(1e-300) {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
            if n > 400.0 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }
}

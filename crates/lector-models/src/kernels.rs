//! Element-wise and row-wise CPU kernels of the encoders on plain `f32` slices, written so that
//! LLVM vectorizes them: `multiversion!` compiles a loop for the best instruction set the CPU has
//! (AVX-512 or AVX2+FMA, chosen at run time; the crate itself targets baseline x86-64), and sums
//! keep [`LANES`] independent partial sums, because float addition is not associative and the
//! compiler will not split a single running sum into vector lanes by itself.

/// Independent partial sums per reduction: one AVX-512 register, two AVX2 ones.
pub(crate) const LANES: usize = 16;

/// Defines `fn $name(args)` that runs `$body` compiled for the widest SIMD instruction set of
/// this CPU (AVX-512, else AVX2 + FMA, else baseline x86-64), chosen at run time. Everything the
/// body calls must be inlined for the target features to reach it: helpers are
/// `#[inline(always)]`, and loops are `for` loops (`Iterator::for_each`/`fold`/`sum` may stay
/// out-of-line calls compiled for baseline x86-64, as the softmax once did).
macro_rules! multiversion {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn generic($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
                fn v4($($arg: $ty),*) {
                    generic($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn v3($($arg: $ty),*) {
                    generic($($arg),*)
                }
                let cpu = lector_simd::features();
                if cpu.avx512 {
                    // SAFETY: the CPU has the features `v4` is compiled for.
                    return unsafe { v4($($arg),*) };
                }
                if cpu.avx2_fma {
                    // SAFETY: the CPU has the features `v3` is compiled for.
                    return unsafe { v3($($arg),*) };
                }
            }
            generic($($arg),*)
        }
    };
}

#[inline(always)]
fn sum_by_lanes(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += f(x);
        }
    }
    let mut sum = horizontal_sum(&acc);
    for &x in tail {
        sum += f(x);
    }
    sum
}

#[inline(always)]
fn horizontal_sum(acc: &[f32; LANES]) -> f32 {
    let mut sum = 0.0;
    for &a in acc {
        sum += a;
    }
    sum
}

#[inline(always)]
fn max_by_lanes(xs: &[f32]) -> f32 {
    // `if` rather than `f32::max`: it maps to one vector max instruction (no NaN fix-up).
    let greater = |m: f32, x: f32| if x > m { x } else { m };
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a = greater(*a, x);
        }
    }
    let mut max = f32::NEG_INFINITY;
    for &x in acc.iter().chain(tail) {
        max = greater(max, x);
    }
    max
}

/// `exp(x)` for `x <= 0` (softmax after subtracting the maximum), within 2 ulp: Cody-Waite range
/// reduction to `r` in [-ln2/2, ln2/2] and Cephes' degree-6 polynomial, all plain arithmetic
/// so it vectorizes (libm's `expf` is a scalar call per element). Below -87 it returns
/// `exp(-87)` (about 1.6e-38) instead of a denormal or 0: nothing in a softmax sum notices.
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    // Adding 1.5 * 2^23 rounds to an integer held in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = if x < -87.0 { -87.0 } else { x };
    let t = x * std::f32::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let mut p = 1.987_569_1e-4;
    for c in [1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
        p = p * r + c;
    }
    let two_n = f32::from_bits(((t.to_bits() as i32 - ROUND.to_bits() as i32 + 127) << 23) as u32);
    (p * r * r + r + 1.0) * two_n
}

/// Softmax of the first `valid` scores of `row`, in place; the other columns are set to about
/// 1e-38 and add nothing to the sum. A row whose length is a multiple of [`LANES`] leaves no scalar
/// tail (it would cost as much as the rest of a short row).
#[inline(always)]
fn softmax_row(row: &mut [f32], valid: usize) {
    row[valid..].fill(f32::NEG_INFINITY);
    let max = max_by_lanes(row);
    let mut acc = [0f32; LANES];
    for chunk in row.chunks_exact_mut(LANES) {
        for (a, x) in acc.iter_mut().zip(chunk) {
            *x = exp_nonpositive(*x - max);
            *a += *x;
        }
    }
    let tail = row.chunks_exact_mut(LANES).into_remainder();
    let mut sum = horizontal_sum(&acc);
    for x in tail {
        *x = exp_nonpositive(*x - max);
        sum += *x;
    }
    let inv = 1.0 / sum;
    for x in &mut row[..valid] {
        *x *= inv;
    }
}

multiversion! {
    /// Softmax of the first `valid` scores of each `stride`-wide row, in place.
    pub(crate) fn softmax_rows(scores: &mut [f32], valid: usize, stride: usize) {
        for row in scores.chunks_exact_mut(stride) {
            softmax_row(row, valid);
        }
    }
}

multiversion! {
    /// LayerNorm of each `weight.len()`-wide row of `rows`, in place (biased variance, as
    /// PyTorch).
    pub(crate) fn layer_norm(rows: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
        let width = weight.len();
        for row in rows.chunks_exact_mut(width) {
            let mean = sum_by_lanes(row, |x| x) / width as f32;
            let var = sum_by_lanes(row, |x| (x - mean) * (x - mean)) / width as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((x, &w), &b) in row.iter_mut().zip(weight).zip(bias) {
                *x = (*x - mean) * inv * w + b;
            }
        }
    }
}

/// erf for float32: the rational approximation Eigen and XLA use (within a few ulp on [-4, 4],
/// where erf saturates to +-1 in float32 precision).
#[inline(always)]
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
    let mut p = alpha[0];
    for &c in &alpha[1..] {
        p = p * x2 + c;
    }
    let mut q = beta[0];
    for &c in &beta[1..] {
        q = q * x2 + c;
    }
    p * x / q
}

multiversion! {
    /// Exact (erf-based) GELU, as transformers' `gelu`, in place.
    pub(crate) fn gelu(xs: &mut [f32]) {
        for x in xs {
            *x = 0.5 * *x * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
        }
    }
}

/// Tanh-approximated GELU (`gelu_new`), in place.
pub(crate) fn gelu_tanh(xs: &mut [f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    for x in xs {
        let u = SQRT_2_OVER_PI * (*x + 0.044_715 * *x * *x * *x);
        *x = 0.5 * *x * (1.0 + u.tanh());
    }
}

pub(crate) fn relu(xs: &mut [f32]) {
    xs.iter_mut().for_each(|x| *x = x.max(0.0));
}

#[cfg(test)]
mod tests {
    use super::LANES;

    #[test]
    fn fast_exp_is_accurate() {
        for i in 0..=87_000 {
            let x = -(i as f32) / 1000.0;
            let want = (x as f64).exp();
            let got = super::exp_nonpositive(x) as f64;
            assert!(
                (got - want).abs() <= 3e-7 * want,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert!(super::exp_nonpositive(f32::NEG_INFINITY) < 2e-38);
    }

    #[test]
    fn softmax_ignores_columns_past_valid() {
        let (valid, stride) = (5, LANES);
        let mut rows: Vec<f32> = (0..2 * stride).map(|i| (i % 7) as f32 - 3.0).collect();
        let want: Vec<Vec<f64>> = rows
            .chunks(stride)
            .map(|row| {
                let max = row[..valid].iter().fold(f32::MIN, |m, &x| m.max(x)) as f64;
                let e: Vec<f64> = row[..valid]
                    .iter()
                    .map(|&x| (x as f64 - max).exp())
                    .collect();
                e.iter().map(|v| v / e.iter().sum::<f64>()).collect()
            })
            .collect();
        rows.chunks_mut(stride)
            .for_each(|row| super::softmax_row(row, valid));
        for (row, want) in rows.chunks(stride).zip(want) {
            for (got, want) in row.iter().zip(want) {
                assert!((*got as f64 - want).abs() < 1e-6, "{got} vs {want}");
            }
        }
    }

    #[test]
    fn layer_norm_matches_the_definition() {
        let width = 2 * LANES + 3;
        let mut xs: Vec<f32> = (0..2 * width).map(|i| (i * i % 11) as f32 * 0.3).collect();
        let weight: Vec<f32> = (0..width).map(|i| 1.0 + i as f32 * 0.01).collect();
        let bias = vec![0.5; width];
        let want: Vec<f64> = xs
            .chunks(width)
            .flat_map(|row| {
                let n = width as f64;
                let mean = row.iter().map(|&x| x as f64).sum::<f64>() / n;
                let var = row.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
                let (weight, bias) = (&weight, &bias);
                row.iter().enumerate().map(move |(i, &x)| {
                    (x as f64 - mean) / (var + 1e-12).sqrt() * weight[i] as f64 + bias[i] as f64
                })
            })
            .collect();
        super::layer_norm(&mut xs, &weight, &bias, 1e-12);
        for (got, want) in xs.iter().zip(want) {
            assert!((*got as f64 - want).abs() < 1e-5, "{got} vs {want}");
        }
    }

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

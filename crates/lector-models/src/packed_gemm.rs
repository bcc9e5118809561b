//! `out += a · W` for a linear layer's weights packed once at load time, with an AVX-512
//! microkernel: `a` is read in place (row-major, each element broadcast), `W` is stored in
//! panels of 32 columns so that every step of the kernel loads two contiguous vectors.
//!
//! Why not the `gemm` crate here: it packs both operands on every call, and its kernels leave
//! about a tenth of the FMA throughput unused on these shapes (hundreds to a few thousand rows,
//! 384 to 1,536 wide). Products this kernel does not cover (no AVX-512, widths that are not a
//! multiple of 32, strided operands) still go through `gemm` (see `matmul`).

/// Columns per panel: two 16-float vectors.
const NR: usize = 32;
/// Rows per microkernel call: 12 x 2 accumulators + 2 weight vectors + 1 broadcast fit the 32
/// vector registers.
const MR: usize = 12;
/// Depth per pass over a panel (a 12-row slice of `a` is then 18 KB, a panel slice 48 KB: both
/// stay in the core's caches while the next rows reuse the panel).
const KC: usize = 384;
/// Rows per block: the rows of `a` that one panel slice is reused for.
const MC: usize = 96;

/// Weights `(k, n)` packed in panels of [`NR`] columns, panel after panel, each `k` rows of
/// [`NR`] floats.
pub(crate) struct PackedWeights {
    k: usize,
    n: usize,
    data: Vec<f32>,
}

impl PackedWeights {
    /// Packs the row-major `(k, n)` matrix `w`, if this CPU and shape suit the kernel.
    pub(crate) fn pack(w: &[f32], k: usize, n: usize) -> Option<Self> {
        if !n.is_multiple_of(NR) || w.len() != k * n || !supported() {
            return None;
        }
        let mut data = Vec::with_capacity(k * n);
        for panel in 0..n / NR {
            for row in w.chunks_exact(n) {
                data.extend_from_slice(&row[panel * NR..(panel + 1) * NR]);
            }
        }
        Some(Self { k, n, data })
    }

    /// `out += a · W`, `a` row-major `(rows, k)`, `out` row-major `(rows, n)`.
    pub(crate) fn accumulate(&self, a: &[f32], out: &mut [f32]) {
        let (k, n) = (self.k, self.n);
        let rows = out.len() / n;
        assert!(
            a.len() == rows * k && out.len() == rows * n,
            "shapes differ"
        );
        // SAFETY: `pack` only returns a value when AVX-512F is available; the assertion above
        // keeps every row the kernel touches inside `a` and `out`.
        unsafe { self.blocks(a, out, rows) }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn blocks(&self, a: &[f32], out: &mut [f32], rows: usize) {
        let (k, n) = (self.k, self.n);
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            for m0 in (0..rows).step_by(MC) {
                let mc = MC.min(rows - m0);
                for panel in 0..n / NR {
                    let w = self.data.as_ptr().add(panel * k * NR + k0 * NR);
                    let mut r = m0;
                    while r < m0 + mc {
                        let take = (m0 + mc - r).min(MR);
                        let a = a.as_ptr().add(r * k + k0);
                        let c = out.as_mut_ptr().add(r * n + panel * NR);
                        let tile = Tile {
                            a,
                            lda: k,
                            w,
                            kc,
                            c,
                            ldc: n,
                        };
                        dispatch(take, &tile);
                        r += take;
                    }
                }
            }
        }
    }
}

fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One microkernel call's operands: `rows x kc` of `a` (row stride `lda`), a `kc x NR` panel
/// slice `w`, and the `rows x NR` tile of the output `c` (row stride `ldc`).
struct Tile {
    a: *const f32,
    lda: usize,
    w: *const f32,
    kc: usize,
    c: *mut f32,
    ldc: usize,
}

#[target_feature(enable = "avx512f")]
unsafe fn dispatch(rows: usize, t: &Tile) {
    match rows {
        12 => kernel::<12>(t),
        11 => kernel::<11>(t),
        10 => kernel::<10>(t),
        9 => kernel::<9>(t),
        8 => kernel::<8>(t),
        7 => kernel::<7>(t),
        6 => kernel::<6>(t),
        5 => kernel::<5>(t),
        4 => kernel::<4>(t),
        3 => kernel::<3>(t),
        2 => kernel::<2>(t),
        _ => kernel::<1>(t),
    }
}

/// `c[R x 32] += a[R x kc] · w[kc x 32]`, the accumulators in registers throughout.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn kernel<const R: usize>(t: &Tile) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for (r, pair) in acc.iter_mut().enumerate() {
        pair[0] = _mm512_loadu_ps(t.c.add(r * t.ldc));
        pair[1] = _mm512_loadu_ps(t.c.add(r * t.ldc + 16));
    }
    for p in 0..t.kc {
        let w0 = _mm512_loadu_ps(t.w.add(p * NR));
        let w1 = _mm512_loadu_ps(t.w.add(p * NR + 16));
        for (r, pair) in acc.iter_mut().enumerate() {
            let x = _mm512_set1_ps(*t.a.add(r * t.lda + p));
            pair[0] = _mm512_fmadd_ps(x, w0, pair[0]);
            pair[1] = _mm512_fmadd_ps(x, w1, pair[1]);
        }
    }
    for (r, pair) in acc.iter().enumerate() {
        _mm512_storeu_ps(t.c.add(r * t.ldc), pair[0]);
        _mm512_storeu_ps(t.c.add(r * t.ldc + 16), pair[1]);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel<const R: usize>(_: &Tile) {
    unreachable!("PackedWeights::pack refuses CPUs without AVX-512")
}

#[cfg(test)]
mod tests {
    use super::PackedWeights;

    /// Every row remainder (1..=12 rows over the block edges), two depth passes (k > KC), against
    /// the naive triple loop, accumulating onto existing values.
    #[test]
    fn packed_product_matches_the_naive_one() {
        let (k, n) = (400, 64);
        let w: Vec<f32> = (0..k * n)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let Some(packed) = PackedWeights::pack(&w, k, n) else {
            eprintln!("no AVX-512 on this CPU: the gemm crate serves every product");
            return;
        };
        for rows in [1, 5, 12, 13, 97, 109] {
            let a: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 53) % 97) as f32 / 48.0 - 1.0)
                .collect();
            let mut out: Vec<f32> = (0..rows * n).map(|i| i as f32 * 0.01).collect();
            let before = out.clone();
            packed.accumulate(&a, &mut out);
            for i in 0..rows {
                for j in 0..n {
                    let dot: f64 = (0..k)
                        .map(|p| f64::from(a[i * k + p]) * f64::from(w[p * n + j]))
                        .sum();
                    let want = f64::from(before[i * n + j]) + dot;
                    let got = f64::from(out[i * n + j]);
                    assert!(
                        (got - want).abs() < 1e-3,
                        "rows {rows} ({i}, {j}): {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn shapes_the_kernel_does_not_cover_are_refused() {
        assert!(PackedWeights::pack(&[0.0; 2 * 30], 2, 30).is_none());
        assert!(PackedWeights::pack(&[0.0; 10], 2, 32).is_none());
    }
}

//! The score tile of batched exact search: `MR` queries against `NR` rows in one pass over the
//! dimensions, held in registers.
//!
//! One query at a time, exact search reads every row from memory for 2 floating-point operations
//! per float read, so it runs at memory speed. A batch of queries reuses each row: the rows are
//! packed into panels of `NR` rows, dimension-major (`panel[d * NR + j]` is dimension `d` of row
//! `j`), and each tile multiplies one broadcast query value by a whole panel line, as a GEMM's
//! micro-kernel does. That makes the scan bound by the FMA units instead of memory.
//!
//! The register budget sets the tile: AVX2 has 16 ymm registers, so 6 queries x 16 rows is 12
//! accumulators plus two panel loads and one broadcast; AVX-512 has 32 zmm registers, so 12 x 32
//! is 24 accumulators plus three.

/// A tile kernel for the CPU, with its shape.
#[derive(Clone, Copy)]
pub(crate) struct TileKernel {
    /// Queries per tile.
    pub mr: usize,
    /// Rows per panel.
    pub nr: usize,
    /// `out[i * nr + j] = sum_d queries[i * dim + d] * panel[d * nr + j]`, for `mr` queries
    /// (`queries` holds `mr * dim` floats) and one packed panel (`dim * nr` floats).
    run: unsafe fn(queries: &[f32], dim: usize, panel: &[f32], out: &mut [f32]),
}

impl TileKernel {
    /// The widest kernel this CPU supports (capped by `$LECTOR_SIMD`), or none without AVX2.
    pub fn detect() -> Option<TileKernel> {
        #[cfg(target_arch = "x86_64")]
        {
            let features = lector_simd::features();
            if features.avx512 {
                return Some(TileKernel {
                    mr: 12,
                    nr: 32,
                    run: tile_avx512,
                });
            }
            if features.avx2_fma {
                return Some(TileKernel {
                    mr: 6,
                    nr: 16,
                    run: tile_avx2,
                });
            }
        }
        None
    }

    /// The AVX2 kernel even on an AVX-512 CPU (for tests that compare the two).
    #[cfg(all(test, target_arch = "x86_64"))]
    pub fn avx2() -> Option<TileKernel> {
        lector_simd::features().avx2_fma.then_some(TileKernel {
            mr: 6,
            nr: 16,
            run: tile_avx2,
        })
    }

    /// Scores one tile (see the field `run`). Panics when a slice is shorter than the tile.
    pub fn scores(&self, queries: &[f32], dim: usize, panel: &[f32], out: &mut [f32]) {
        assert!(queries.len() >= self.mr * dim && panel.len() >= self.nr * dim);
        assert!(out.len() >= self.mr * self.nr);
        // SAFETY: `detect` chose this kernel for the running CPU, and the lengths are checked.
        unsafe { (self.run)(queries, dim, panel, out) }
    }
}

/// Writes rows `first..first + nr` of `rows` (row-major, `dim` wide; rows past the end are
/// zeros) into `panel` dimension-major.
pub(crate) fn pack_panel(rows: &[f32], dim: usize, first: usize, nr: usize, panel: &mut [f32]) {
    let available = (rows.len() / dim).saturating_sub(first).min(nr);
    panel[..dim * nr].fill(0.0);
    for j in 0..available {
        let row = &rows[(first + j) * dim..(first + j + 1) * dim];
        for (d, &x) in row.iter().enumerate() {
            panel[d * nr + j] = x;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2(queries: &[f32], dim: usize, panel: &[f32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    const MR: usize = 6;
    const NR: usize = 16;
    let (q, p) = (queries.as_ptr(), panel.as_ptr());
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    // SAFETY (all loads): `scores` checked MR * dim query floats and dim * NR panel floats.
    for d in 0..dim {
        let b0 = _mm256_loadu_ps(p.add(d * NR));
        let b1 = _mm256_loadu_ps(p.add(d * NR + 8));
        for (i, row) in acc.iter_mut().enumerate() {
            let a = _mm256_broadcast_ss(&*q.add(i * dim + d));
            row[0] = _mm256_fmadd_ps(a, b0, row[0]);
            row[1] = _mm256_fmadd_ps(a, b1, row[1]);
        }
    }
    let o = out.as_mut_ptr();
    for (i, row) in acc.iter().enumerate() {
        _mm256_storeu_ps(o.add(i * NR), row[0]);
        _mm256_storeu_ps(o.add(i * NR + 8), row[1]);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512(queries: &[f32], dim: usize, panel: &[f32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    const MR: usize = 12;
    const NR: usize = 32;
    let (q, p) = (queries.as_ptr(), panel.as_ptr());
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    // SAFETY (all loads): `scores` checked MR * dim query floats and dim * NR panel floats.
    for d in 0..dim {
        let b0 = _mm512_loadu_ps(p.add(d * NR));
        let b1 = _mm512_loadu_ps(p.add(d * NR + 16));
        for (i, row) in acc.iter_mut().enumerate() {
            let a = _mm512_set1_ps(*q.add(i * dim + d));
            row[0] = _mm512_fmadd_ps(a, b0, row[0]);
            row[1] = _mm512_fmadd_ps(a, b1, row[1]);
        }
    }
    let o = out.as_mut_ptr();
    for (i, row) in acc.iter().enumerate() {
        _mm512_storeu_ps(o.add(i * NR), row[0]);
        _mm512_storeu_ps(o.add(i * NR + 16), row[1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_equal_the_naive_products() {
        let dim = 37;
        let rows: Vec<f32> = (0..40 * dim)
            .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let mut kernels: Vec<TileKernel> = TileKernel::detect().into_iter().collect();
        #[cfg(target_arch = "x86_64")]
        kernels.extend(TileKernel::avx2());
        for kernel in kernels {
            let (mr, nr) = (kernel.mr, kernel.nr);
            let queries: Vec<f32> = (0..mr * dim)
                .map(|i| ((i * 31) % 17) as f32 / 8.0 - 1.0)
                .collect();
            let mut panel = vec![0.0; dim * nr];
            // Starting at row 30 leaves fewer than nr rows: the rest must score 0.
            pack_panel(&rows, dim, 30, nr, &mut panel);
            let mut out = vec![f32::NAN; mr * nr];
            kernel.scores(&queries, dim, &panel, &mut out);
            for i in 0..mr {
                for j in 0..nr {
                    let want: f32 = match rows.get((30 + j) * dim..(31 + j) * dim) {
                        Some(row) => row
                            .iter()
                            .zip(&queries[i * dim..])
                            .map(|(a, b)| a * b)
                            .sum(),
                        None => 0.0,
                    };
                    let got = out[i * nr + j];
                    assert!(
                        (got - want).abs() <= 1e-4,
                        "mr {mr} ({i}, {j}): {got} vs {want}"
                    );
                }
            }
        }
    }
}

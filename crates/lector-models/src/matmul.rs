//! Matrix products on strided views of plain slices, through the `gemm` crate (candle's own GEMM).
//! Strides let attention read each head's query, key and value straight out of the fused QKV
//! projection, and write its output straight into its columns of the context matrix: no
//! transposes, no contiguous copies.

/// A read-only `rows x cols` matrix inside `data`: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> View<'a> {
    /// Panics when the view reaches past the end of `data`.
    pub(crate) fn new(
        data: &'a [f32],
        (rows, cols): (usize, usize),
        (rs, cs): (usize, usize),
    ) -> Self {
        assert!(
            rows == 0 || cols == 0 || (rows - 1) * rs + (cols - 1) * cs < data.len(),
            "a {rows}x{cols} view with strides ({rs}, {cs}) does not fit in {} elements",
            data.len()
        );
        Self {
            data,
            rows,
            cols,
            rs,
            cs,
        }
    }

    /// The first `rows` rows of a dense row-major matrix `cols` wide.
    pub(crate) fn rows(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, (rows, cols), (cols, 1))
    }

    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }

    pub(crate) fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

/// How many threads one product may use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Threads {
    One,
    /// Split across the rayon pool (only worth it for a single large product at a time).
    Pool(usize),
}

/// `dst = a · b`, or `dst += a · b` when `accumulate`; `dst` is row-major with row stride
/// `dst_rs` (at least `b`'s width, so rows never overlap).
pub(crate) fn matmul(
    dst: &mut [f32],
    dst_rs: usize,
    a: View,
    b: View,
    accumulate: bool,
    threads: Threads,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(k, b.rows, "inner dimensions differ");
    assert!(
        n <= dst_rs && (m == 0 || n == 0 || (m - 1) * dst_rs + n <= dst.len()),
        "destination too small"
    );
    if crate::packed_gemm::avx2_products() {
        return matmul_avx2(dst, dst_rs, a, b, accumulate, threads);
    }
    let parallelism = match threads {
        Threads::One => gemm::Parallelism::None,
        Threads::Pool(n) => gemm::Parallelism::Rayon(n),
    };
    // SAFETY: the assertions above and in `View::new` keep every index gemm computes from these
    // shapes and strides inside the three slices; `dst` is borrowed mutably, so it aliases neither
    // input.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_rs as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// [`matmul`] on lector's AVX2 kernel (see `packed_gemm`), rows split across the pool for
/// [`Threads::Pool`].
fn matmul_avx2(
    dst: &mut [f32],
    dst_rs: usize,
    a: View,
    b: View,
    accumulate: bool,
    threads: Threads,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if m == 0 || n == 0 {
        return;
    }
    // The kernel reads rows of `a` in place; a transposed `a` is copied first.
    let dense: Vec<f32>;
    let (a_data, lda) = match a.cs {
        1 => (a.data, a.rs),
        _ => {
            dense = (0..m * k).map(|e| a.at(e / k, e % k)).collect();
            (dense.as_slice(), k)
        }
    };
    let product = |rows: usize, a: &[f32], dst: &mut [f32]| {
        crate::packed_gemm::product_avx2(
            (a, lda),
            (k, n, |p, j| b.at(p, j)),
            (dst, dst_rs),
            rows,
            accumulate,
        )
    };
    let parts = match threads {
        Threads::One => 1,
        Threads::Pool(threads) => threads.min(m),
    };
    if parts == 1 {
        return product(m, a_data, dst);
    }
    use rayon::prelude::*;
    let per_part = m.div_ceil(parts);
    dst[..(m - 1) * dst_rs + n]
        .par_chunks_mut(per_part * dst_rs)
        .enumerate()
        .for_each(|(part, dst)| {
            let first = part * per_part;
            let rows = per_part.min(m - first);
            product(rows, &a_data[first * lda..], dst);
        });
}

#[cfg(test)]
mod tests {
    use super::{matmul, Threads, View};

    /// A strided product (a head's slice of a fused projection times another's transpose) into
    /// a strided destination, against the naive triple loop.
    #[test]
    fn strided_views_multiply_like_dense_matrices() {
        let (rows, width, head) = (7, 12, 4);
        let data: Vec<f32> = (0..rows * width).map(|i| (i % 13) as f32 - 6.0).collect();
        let q = View::new(&data[head..], (rows, head), (width, 1));
        let k = View::new(&data[2 * head..], (rows, head), (width, 1));
        let mut out = vec![1.0; rows * (rows + 3)];
        matmul(&mut out, rows + 3, q, k.t(), true, Threads::One);
        for i in 0..rows {
            for j in 0..rows {
                let dot: f32 = (0..head)
                    .map(|d| data[i * width + head + d] * data[j * width + 2 * head + d])
                    .sum();
                assert_eq!(out[i * (rows + 3) + j], 1.0 + dot, "({i}, {j})");
            }
            assert_eq!(&out[i * (rows + 3) + rows..(i + 1) * (rows + 3)], &[1.0; 3]);
        }
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn views_past_the_end_are_refused() {
        View::new(&[0.0; 10], (3, 4), (4, 1));
    }
}

//! `out += a · W` for a linear layer's weights packed once at load time, with an AVX-512
//! microkernel: `a` is read in place (row-major, each element broadcast), `W` is stored in
//! panels of 32 columns so that every step of the kernel loads two contiguous vectors.
//!
//! Why not the `gemm` crate here: it packs both operands on every call, and its kernels leave
//! about a tenth of the FMA throughput unused on these shapes (hundreds to a few thousand rows,
//! 384 to 1,536 wide). Products this kernel does not cover (widths that are not a multiple of
//! 32, strided operands) still go through `gemm` (see `matmul`).
//!
//! On CPUs with AVX2 but no AVX-512 (or with AVX-512 switched off by `LECTOR_SIMD=avx2`) every
//! product of the encoders runs on an AVX2 kernel of the same shape (panels of 16 columns, tiles
//! of 6 rows), the attention products included ([`product_avx2`], weights packed per call):
//! the `gemm` crate picks its AVX-512 kernels by the CPU alone, so an AVX2 run on an AVX-512
//! machine would otherwise time AVX-512 code. Its speed equals `gemm`'s AVX2 kernel's (both
//! near the FMA units' peak on these shapes).
//!
//! With [`Precision::Bf16`] (opt-in, CPUs with AVX512-BF16) the weights are stored as bfloat16
//! pairs and each product rounds its input rows to bfloat16, then multiplies with `vdpbf16ps`:
//! twice the multiply-adds per instruction, float32 accumulation. Everything outside the linear
//! layers (attention, LayerNorm, softmax) stays float32.

use crate::int8_gemm::Int8Weights;
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

/// The arithmetic of the linear layers' products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// float32 products: the reference arithmetic.
    F32,
    /// Inputs and weights rounded to bfloat16, products accumulated in float32, where the CPU
    /// has AVX512-BF16 (float32 elsewhere). About twice the throughput, slightly different
    /// numbers.
    Bf16,
    /// Weights quantized to 8 bits per output column at load, inputs per row when multiplied,
    /// products summed exactly in integers, where the CPU has AVX-VNNI or AVX-512 VNNI (float32
    /// elsewhere); see `int8_gemm`. Slightly different numbers.
    Int8,
}

static PRECISION: AtomicU8 = AtomicU8::new(0);

/// Sets the precision of the linear layers of models loaded from now on (process-wide; models
/// already loaded keep theirs).
pub fn set_precision(precision: Precision) {
    PRECISION.store(precision as u8, Ordering::Relaxed);
}

thread_local! {
    /// Set while [`with_precision`] loads a model on this thread.
    static OVERRIDE: Cell<Option<Precision>> = const { Cell::new(None) };
}

/// The precision models loaded now get: [`set_precision`]'s, unless [`with_precision`] is
/// loading on this thread.
pub fn precision() -> Precision {
    OVERRIDE
        .get()
        .unwrap_or(match PRECISION.load(Ordering::Relaxed) {
            0 => Precision::F32,
            1 => Precision::Bf16,
            _ => Precision::Int8,
        })
}

/// The precision products packed now actually run in: [`precision`], unless this CPU lacks its
/// instructions (bfloat16 without AVX512-BF16, int8 without AVX-VNNI or AVX-512 VNNI run in
/// float32).
pub fn active_precision() -> Precision {
    match precision() {
        Precision::Bf16 if bf16_active() => Precision::Bf16,
        Precision::Int8 if crate::int8_gemm::Isa::detect().is_some() => Precision::Int8,
        _ => Precision::F32,
    }
}

/// Whether products packed now actually run in bfloat16: [`Precision::Bf16`] is set and this
/// CPU has AVX512-BF16 (elsewhere bf16 falls back to float32).
pub fn bf16_active() -> bool {
    precision() == Precision::Bf16 && bf16_supported()
}

/// Runs `load` with models packed in `precision`, whatever [`set_precision`] says (only on
/// this thread, only for its duration).
pub(crate) fn with_precision<T>(precision: Precision, load: impl FnOnce() -> T) -> T {
    let before = OVERRIDE.replace(Some(precision));
    let result = load();
    OVERRIDE.set(before);
    result
}

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
/// Columns per panel of the AVX2 kernel: two 8-float vectors.
const NR_AVX2: usize = 16;
/// Rows per AVX2 microkernel call: 6 x 2 accumulators + 2 weight vectors + 1 broadcast fit the
/// 16 vector registers.
const MR_AVX2: usize = 6;
/// Rows per block of the AVX2 kernel (48 measured 5-10% faster than 96 on the encoders' shapes).
const MC_AVX2: usize = 48;

/// Weights `(k, n)` packed in panels of [`NR`] columns, panel after panel: each `k` rows of
/// [`NR`] floats, or in bfloat16 `k / 2` rows of [`NR`] pairs (rows `2p` and `2p + 1` of one
/// column in one 32-bit word, the operand layout of `vdpbf16ps`); for the AVX2 kernel, panels
/// of [`NR_AVX2`] floats, the last one padded with zeros.
pub(crate) struct PackedWeights {
    k: usize,
    n: usize,
    data: Data,
}

enum Data {
    F32(Vec<f32>),
    Bf16(Vec<u32>),
    F32Avx2(Vec<f32>),
    Int8(Int8Weights),
}

impl PackedWeights {
    /// Packs the row-major `(k, n)` matrix `w`, if this CPU and shape suit the kernel, in the
    /// precision set by [`set_precision`].
    pub(crate) fn pack(w: &[f32], k: usize, n: usize) -> Option<Self> {
        Self::pack_with(w, k, n, precision())
    }

    fn pack_with(w: &[f32], k: usize, n: usize, precision: Precision) -> Option<Self> {
        if w.len() != k * n {
            return None;
        }
        if precision == Precision::Int8 {
            if let Some(weights) = Int8Weights::pack(w, k, n) {
                return Some(Self {
                    k,
                    n,
                    data: Data::Int8(weights),
                });
            }
        }
        if avx2_products() {
            let data = Data::F32Avx2(pack_avx2(k, n, |p, j| w[p * n + j]));
            return Some(Self { k, n, data });
        }
        if !n.is_multiple_of(NR) || !lector_simd::features().avx512 {
            return None;
        }
        let data = match precision == Precision::Bf16 && k.is_multiple_of(2) && bf16_supported() {
            true => Data::Bf16(pack_bf16(w, k, n)),
            false => Data::F32(pack_f32(w, n)),
        };
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
        // SAFETY: `pack` only returns AVX-512 layouts when AVX-512F (and for bfloat16
        // AVX512-BF16) is available, and the AVX2 layout when AVX2 and FMA are; the assertion
        // above keeps every row the kernel touches inside `a` and `out`.
        unsafe {
            match &self.data {
                Data::F32(w) => self.blocks(w, a, out, rows),
                Data::Bf16(w) => self.blocks_bf16(w, &to_bf16_pairs(a), out, rows),
                Data::F32Avx2(w) => blocks_avx2(w, (k, n), (a, k), (out, n), rows),
                Data::Int8(w) => w.accumulate(a, out),
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn blocks(&self, data: &[f32], a: &[f32], out: &mut [f32], rows: usize) {
        let (k, n) = (self.k, self.n);
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            for m0 in (0..rows).step_by(MC) {
                let mc = MC.min(rows - m0);
                for panel in 0..n / NR {
                    let w = data.as_ptr().add(panel * k * NR + k0 * NR);
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

impl PackedWeights {
    /// [`Self::blocks`] on bfloat16 pairs: `a` holds `k / 2` pairs per row, depth counts pairs.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn blocks_bf16(&self, data: &[u32], a: &[u32], out: &mut [f32], rows: usize) {
        let (k2, n) = (self.k / 2, self.n);
        for k0 in (0..k2).step_by(KC / 2) {
            let kc = (KC / 2).min(k2 - k0);
            for m0 in (0..rows).step_by(MC) {
                let mc = MC.min(rows - m0);
                for panel in 0..n / NR {
                    let w = data.as_ptr().add(panel * k2 * NR + k0 * NR);
                    let mut r = m0;
                    while r < m0 + mc {
                        let take = (m0 + mc - r).min(MR);
                        let tile = PairTile {
                            a: a.as_ptr().add(r * k2 + k0),
                            lda: k2,
                            w,
                            kc,
                            c: out.as_mut_ptr().add(r * n + panel * NR),
                            ldc: n,
                        };
                        dispatch_bf16(take, &tile);
                        r += take;
                    }
                }
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn blocks_bf16(&self, _: &[u32], _: &[u32], _: &mut [f32], _: usize) {
        unreachable!("PackedWeights::pack refuses bfloat16 without AVX512-BF16")
    }
}

fn pack_f32(w: &[f32], n: usize) -> Vec<f32> {
    let mut data = Vec::with_capacity(w.len());
    for panel in 0..n / NR {
        for row in w.chunks_exact(n) {
            data.extend_from_slice(&row[panel * NR..(panel + 1) * NR]);
        }
    }
    data
}

fn pack_bf16(w: &[f32], k: usize, n: usize) -> Vec<u32> {
    let mut data = Vec::with_capacity(w.len() / 2);
    for panel in 0..n / NR {
        for p in 0..k / 2 {
            let (even, odd) = (&w[2 * p * n..], &w[(2 * p + 1) * n..]);
            for j in panel * NR..(panel + 1) * NR {
                data.push(pair(even[j], odd[j]));
            }
        }
    }
    data
}

/// Two floats rounded to bfloat16 (to nearest, ties to even, as `vcvtne2ps2bf16`) in one word,
/// `lo` in the low half.
fn pair(lo: f32, hi: f32) -> u32 {
    u32::from(to_bf16(lo)) | (u32::from(to_bf16(hi)) << 16)
}

fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounding = 0x7fff + ((bits >> 16) & 1);
    ((bits + rounding) >> 16) as u16
}

/// The rows of `a` (an even number of columns) as bfloat16 pairs: bfloat16 values in order,
/// which is the pair layout (element `2p` in the low half of word `p`).
fn to_bf16_pairs(a: &[f32]) -> Vec<u32> {
    let mut pairs = vec![0u32; a.len() / 2];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX512-BF16 (checked once, then cached by the standard library).
    let done = match bf16_supported() {
        true => unsafe { convert_avx512(a, &mut pairs) },
        false => 0,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for (p, word) in pairs.iter_mut().enumerate().skip(done) {
        *word = pair(a[2 * p], a[2 * p + 1]);
    }
    pairs
}

/// Converts whole 32-float chunks; returns the number of pairs written.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn convert_avx512(a: &[f32], pairs: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    let chunks = a.len() / 32;
    for c in 0..chunks {
        let src = a.as_ptr().add(c * 32);
        let v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src.add(16)), _mm512_loadu_ps(src));
        _mm512_storeu_si512(
            pairs.as_mut_ptr().add(c * 16).cast(),
            std::mem::transmute::<__m512bh, __m512i>(v),
        );
    }
    chunks * 16
}

fn bf16_supported() -> bool {
    lector_simd::features().avx512_bf16
}

/// [`PackedWeights::blocks`] with the AVX2 kernel on weights `(k, n)` packed by [`pack_avx2`],
/// `a` and `out` of any row stride (the second of each pair), over every panel (a partial
/// last one through a tile-sized buffer).
#[target_feature(enable = "avx2,fma")]
unsafe fn blocks_avx2(
    data: &[f32],
    (k, n): (usize, usize),
    (a, lda): (&[f32], usize),
    (out, ldc): (&mut [f32], usize),
    rows: usize,
) {
    let mut spill = [0f32; MR_AVX2 * NR_AVX2];
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        for m0 in (0..rows).step_by(MC_AVX2) {
            let mc = MC_AVX2.min(rows - m0);
            for panel in 0..n.div_ceil(NR_AVX2) {
                let w = data.as_ptr().add(panel * k * NR_AVX2 + k0 * NR_AVX2);
                let width = NR_AVX2.min(n - panel * NR_AVX2);
                let mut r = m0;
                while r < m0 + mc {
                    let take = (m0 + mc - r).min(MR_AVX2);
                    let c = out.as_mut_ptr().add(r * ldc + panel * NR_AVX2);
                    let mut tile = Tile {
                        a: a.as_ptr().add(r * lda + k0),
                        lda,
                        w,
                        kc,
                        c,
                        ldc,
                    };
                    if width == NR_AVX2 {
                        dispatch_avx2(take, &tile);
                    } else {
                        for i in 0..take {
                            let row = std::slice::from_raw_parts(c.add(i * ldc), width);
                            spill[i * NR_AVX2..][..width].copy_from_slice(row);
                        }
                        (tile.c, tile.ldc) = (spill.as_mut_ptr(), NR_AVX2);
                        dispatch_avx2(take, &tile);
                        for i in 0..take {
                            let row = std::slice::from_raw_parts_mut(c.add(i * ldc), width);
                            row.copy_from_slice(&spill[i * NR_AVX2..][..width]);
                        }
                    }
                    r += take;
                }
            }
        }
    }
}

/// Packs the `(k, n)` matrix whose element `(p, j)` is `at(p, j)` for the AVX2 kernel: panels
/// of [`NR_AVX2`] columns, the last one padded with zeros.
fn pack_avx2(k: usize, n: usize, at: impl Fn(usize, usize) -> f32) -> Vec<f32> {
    let panels = n.div_ceil(NR_AVX2);
    let mut data = vec![0f32; panels * k * NR_AVX2];
    for (panel, block) in data.chunks_exact_mut(k * NR_AVX2).enumerate() {
        let columns = panel * NR_AVX2..n.min((panel + 1) * NR_AVX2);
        for (p, row) in block.chunks_exact_mut(NR_AVX2).enumerate() {
            for (slot, j) in row.iter_mut().zip(columns.clone()) {
                *slot = at(p, j);
            }
        }
    }
    data
}

/// Whether this process multiplies on the AVX2 kernel: the CPU has AVX2 and FMA but no AVX-512,
/// or `LECTOR_SIMD` switched AVX-512 off.
pub(crate) fn avx2_products() -> bool {
    let features = lector_simd::features();
    features.avx2_fma && !features.avx512
}

/// `dst (+)= a · b` on the AVX2 kernel (the CPU must have AVX2 and FMA): `a` is `rows x k` with
/// row stride `lda`, `b` is given element-wise (it is packed for this one product), `dst` has
/// row stride `ldc`. For the attention products, so that no `gemm` kernel runs in an AVX2
/// process.
pub(crate) fn product_avx2(
    (a, lda): (&[f32], usize),
    (k, n, b): (usize, usize, impl Fn(usize, usize) -> f32),
    (dst, ldc): (&mut [f32], usize),
    rows: usize,
    accumulate: bool,
) {
    assert!(
        lector_simd::features().avx2_fma,
        "the AVX2 kernel needs AVX2 and FMA"
    );
    assert!(
        rows == 0 || ((rows - 1) * lda + k <= a.len() && (rows - 1) * ldc + n <= dst.len()),
        "shapes differ"
    );
    if !accumulate {
        dst.chunks_mut(ldc)
            .take(rows)
            .for_each(|row| row[..n].fill(0.0));
    }
    let data = pack_avx2(k, n, b);
    // SAFETY: the CPU has AVX2 and FMA (asserted); the assertion on the shapes keeps every row
    // the kernel reads and writes inside `a` and `dst`.
    unsafe { blocks_avx2(&data, (k, n), (a, lda), (dst, ldc), rows) }
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

#[target_feature(enable = "avx2,fma")]
unsafe fn dispatch_avx2(rows: usize, t: &Tile) {
    match rows {
        6 => kernel_avx2::<6>(t),
        5 => kernel_avx2::<5>(t),
        4 => kernel_avx2::<4>(t),
        3 => kernel_avx2::<3>(t),
        2 => kernel_avx2::<2>(t),
        _ => kernel_avx2::<1>(t),
    }
}

/// `c[R x 16] += a[R x kc] · w[kc x 16]` with 8-float vectors, the accumulators in registers
/// throughout.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2<const R: usize>(t: &Tile) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for (r, pair) in acc.iter_mut().enumerate() {
        pair[0] = _mm256_loadu_ps(t.c.add(r * t.ldc));
        pair[1] = _mm256_loadu_ps(t.c.add(r * t.ldc + 8));
    }
    for p in 0..t.kc {
        let w0 = _mm256_loadu_ps(t.w.add(p * NR_AVX2));
        let w1 = _mm256_loadu_ps(t.w.add(p * NR_AVX2 + 8));
        for (r, pair) in acc.iter_mut().enumerate() {
            let x = _mm256_broadcast_ss(&*t.a.add(r * t.lda + p));
            pair[0] = _mm256_fmadd_ps(x, w0, pair[0]);
            pair[1] = _mm256_fmadd_ps(x, w1, pair[1]);
        }
    }
    for (r, pair) in acc.iter().enumerate() {
        _mm256_storeu_ps(t.c.add(r * t.ldc), pair[0]);
        _mm256_storeu_ps(t.c.add(r * t.ldc + 8), pair[1]);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel_avx2<const R: usize>(_: &Tile) {
    unreachable!("avx2_products is false without x86-64")
}

/// A [`Tile`] on bfloat16 pairs: `kc` pairs of depth.
struct PairTile {
    a: *const u32,
    lda: usize,
    w: *const u32,
    kc: usize,
    c: *mut f32,
    ldc: usize,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn dispatch_bf16(rows: usize, t: &PairTile) {
    match rows {
        12 => kernel_bf16::<12>(t),
        11 => kernel_bf16::<11>(t),
        10 => kernel_bf16::<10>(t),
        9 => kernel_bf16::<9>(t),
        8 => kernel_bf16::<8>(t),
        7 => kernel_bf16::<7>(t),
        6 => kernel_bf16::<6>(t),
        5 => kernel_bf16::<5>(t),
        4 => kernel_bf16::<4>(t),
        3 => kernel_bf16::<3>(t),
        2 => kernel_bf16::<2>(t),
        _ => kernel_bf16::<1>(t),
    }
}

/// [`kernel`] with `vdpbf16ps`: each step multiplies a pair of depths at once.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn kernel_bf16<const R: usize>(t: &PairTile) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for (r, pair) in acc.iter_mut().enumerate() {
        pair[0] = _mm512_loadu_ps(t.c.add(r * t.ldc));
        pair[1] = _mm512_loadu_ps(t.c.add(r * t.ldc + 16));
    }
    for p in 0..t.kc {
        let w0: __m512bh =
            std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(t.w.add(p * NR).cast()));
        let w1: __m512bh = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
            t.w.add(p * NR + 16).cast(),
        ));
        for (r, pair) in acc.iter_mut().enumerate() {
            let x: __m512bh = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(
                *t.a.add(r * t.lda + p) as i32,
            ));
            pair[0] = _mm512_dpbf16_ps(pair[0], x, w0);
            pair[1] = _mm512_dpbf16_ps(pair[1], x, w1);
        }
    }
    for (r, pair) in acc.iter().enumerate() {
        _mm512_storeu_ps(t.c.add(r * t.ldc), pair[0]);
        _mm512_storeu_ps(t.c.add(r * t.ldc + 16), pair[1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The bfloat16 kernel equals float32 arithmetic on the bfloat16-rounded operands (up to
    /// summation order), on every row remainder and two depth passes.
    #[test]
    fn bf16_product_matches_the_product_of_rounded_operands() {
        let (k, n) = (1000, 64);
        let w: Vec<f32> = (0..k * n)
            .map(|i| ((i * 37) % 101) as f32 / 50.3 - 1.0)
            .collect();
        let Some(packed) = PackedWeights::pack_with(&w, k, n, Precision::Bf16) else {
            return;
        };
        if !matches!(packed.data, Data::Bf16(_)) {
            eprintln!("no AVX512-BF16 on this CPU: bfloat16 falls back to float32");
            return;
        }
        let round = |x: f32| f64::from(f32::from_bits(u32::from(to_bf16(x)) << 16));
        for rows in [1, 7, 12, 13, 109] {
            let a: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 53) % 97) as f32 / 48.7 - 1.0)
                .collect();
            let mut out = vec![0.5f32; rows * n];
            packed.accumulate(&a, &mut out);
            for i in 0..rows {
                for j in 0..n {
                    let want: f64 = 0.5
                        + (0..k)
                            .map(|p| round(a[i * k + p]) * round(w[p * n + j]))
                            .sum::<f64>();
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
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even mantissa (1.0).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(to_bf16(-2.5), 0xc020);
        let mut pairs = to_bf16_pairs(&(0..70).map(|i| i as f32 * 0.37).collect::<Vec<_>>());
        assert_eq!(pairs.len(), 35);
        assert_eq!(pairs.pop(), Some(pair(68.0 * 0.37, 69.0 * 0.37)));
        assert_eq!(pairs[3], pair(6.0 * 0.37, 7.0 * 0.37));
    }

    /// The AVX2 kernel (on any CPU with AVX2, AVX-512 or not) on strided operands, a partial
    /// last panel (n = 37), every row remainder and two depth passes, with and without
    /// accumulating, against the naive triple loop; columns past `n` in `dst` stay untouched.
    #[test]
    fn avx2_product_matches_the_naive_one() {
        if !lector_simd::features().avx2_fma {
            eprintln!("no AVX2 on this CPU: the gemm crate serves every product");
            return;
        }
        let (k, n, lda, ldc) = (400, 37, 403, 40);
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        for rows in [1, 5, 6, 7, 13, 97, 109] {
            let a: Vec<f32> = (0..rows * lda)
                .map(|i| ((i * 53) % 97) as f32 / 48.0 - 1.0)
                .collect();
            for accumulate in [false, true] {
                let before: Vec<f32> = (0..rows * ldc).map(|i| i as f32 * 0.01).collect();
                let mut dst = before.clone();
                product_avx2(
                    (&a, lda),
                    (k, n, |p, j| b[p * n + j]),
                    (&mut dst, ldc),
                    rows,
                    accumulate,
                );
                for i in 0..rows {
                    for j in 0..ldc {
                        let (got, old) = (dst[i * ldc + j], before[i * ldc + j]);
                        if j >= n {
                            assert_eq!(got, old, "({i}, {j}) is past the product");
                            continue;
                        }
                        let dot: f64 = (0..k)
                            .map(|p| f64::from(a[i * lda + p]) * f64::from(b[p * n + j]))
                            .sum();
                        let want = dot + if accumulate { f64::from(old) } else { 0.0 };
                        assert!(
                            (f64::from(got) - want).abs() < 1e-3,
                            "rows {rows} ({i}, {j}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn shapes_the_kernel_does_not_cover_are_refused() {
        // The AVX2 kernel takes any width (its last panel padded); the AVX-512 one multiples of 32.
        let odd_width = PackedWeights::pack(&[0.0; 2 * 30], 2, 30);
        assert_eq!(odd_width.is_some(), avx2_products());
        assert!(PackedWeights::pack(&[0.0; 10], 2, 32).is_none());
    }
}

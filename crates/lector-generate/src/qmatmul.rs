//! Matrix products on GGUF-quantized weights (Q4_0, Q4_1, Q8_0) on the CPU, computed the way
//! llama.cpp computes them.
//!
//! Why lector has its own: candle's CPU kernels for these block formats pick their SIMD code at
//! compile time (`#[cfg(target_feature = ...)]`), so a portable build (no `-C target-cpu`) runs
//! them scalar, and Q4_1 has no SIMD kernel at all. These kernels choose at run time
//! ([`Isa::detect`]): AVX2 (`vpmaddubsw`/`vpmaddwd`), AVX-VNNI or AVX-512 VNNI (`vpdpbusd`),
//! else a scalar fallback with identical integer arithmetic.
//!
//! The scheme is llama.cpp's: each activation row is quantized per block of 32 to 8 bits
//! ([`QActs`]: `x ≈ d * q`, plus `s = d * Σq`, llama.cpp's Q8_1), the products of weight and
//! activation quants are summed exactly in integers per block, and the block sums are scaled and
//! accumulated in f32:
//!
//! - Q4_1 (`w = d·n + m`, `n` a nibble): `Σ w·x ≈ d·dₓ·Σ n·q + m·sₓ`;
//! - Q4_0 (`w = d·(n − 8)`) and Q8_0 (`w = d·q_w`): `Σ w·x ≈ d·dₓ·Σ q_w·q`.
//!
//! Unlike llama.cpp the activation scales `d` and `s` stay f32 (llama.cpp rounds them to f16).
//!
//! Two kernels: one activation row (token generation) streams each weight block once from memory,
//! straight from the GGUF layout; several rows (prompt processing, beams) unpack a tile of weight
//! rows once into a small buffer and reuse it, in registers, against tiles of [`TILE_M`]
//! activation rows. Both run in parallel over output rows on candle's thread pool
//! (`RAYON_NUM_THREADS`/`CANDLE_NUM_THREADS`).

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use half::f16;
use std::ops::Range;
use std::sync::OnceLock;

/// Weights (and activations) per quantization block.
pub const BLOCK: usize = 32;

/// Activation rows per tile of the several-row kernel; quantized activations of more than one
/// row are padded with zero rows to a multiple of it.
pub const TILE_M: usize = 4;

/// The GGUF block formats these kernels multiply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `d: f16, qs: [u8; 16]`; weight `j` is `d * (nibble_j - 8)`.
    Q4_0,
    /// `d: f16, m: f16, qs: [u8; 16]`; weight `j` is `d * nibble_j + m`.
    Q4_1,
    /// `d: f16, qs: [i8; 32]`; weight `j` is `d * qs[j]`.
    Q8_0,
}

// In the 4-bit formats byte `j` of `qs` holds weight `j` in its low nibble and weight `j + 16` in
// its high nibble.

impl Format {
    /// The format of a GGML type, if these kernels handle it.
    pub fn of(dtype: GgmlDType) -> Option<Format> {
        match dtype {
            GgmlDType::Q4_0 => Some(Format::Q4_0),
            GgmlDType::Q4_1 => Some(Format::Q4_1),
            GgmlDType::Q8_0 => Some(Format::Q8_0),
            _ => None,
        }
    }

    /// The GGML type.
    pub fn ggml(self) -> GgmlDType {
        match self {
            Format::Q4_0 => GgmlDType::Q4_0,
            Format::Q4_1 => GgmlDType::Q4_1,
            Format::Q8_0 => GgmlDType::Q8_0,
        }
    }

    /// Bytes per block of 32 weights.
    pub fn block_bytes(self) -> usize {
        match self {
            Format::Q4_0 => 18,
            Format::Q4_1 => 20,
            Format::Q8_0 => 34,
        }
    }
}

/// The instruction sets the kernels are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Plain Rust, any CPU.
    Scalar,
    /// AVX2 + FMA + F16C: `vpmaddubsw` then `vpmaddwd` (x86-64-v3).
    Avx2,
    /// AVX2 with AVX-VNNI's 256-bit `vpdpbusd` (Alder Lake and later, Zen 5).
    AvxVnni,
    /// AVX-512 VNNI's `vpdpbusd` on 256-bit vectors, with AVX-512's 32 vector registers for
    /// larger tiles (Ice Lake and later Xeons, Zen 4).
    Avx512Vnni,
}

impl Isa {
    /// The best instruction set this CPU has (detected once).
    pub fn detect() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| Isa::supported().pop().unwrap_or(Isa::Scalar))
    }

    /// Every instruction set this CPU runs, from the scalar fallback to the best.
    pub fn supported() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni]
            .into_iter()
            .filter(|isa| isa.is_supported())
            .collect()
    }

    /// Whether this CPU runs the kernels of `self` (a cached feature lookup).
    pub fn is_supported(self) -> bool {
        let cpu = lector_simd::features();
        let avx2 = cpu.avx2_fma && cpu.f16c;
        match self {
            Isa::Scalar => true,
            Isa::Avx2 => avx2,
            Isa::AvxVnni => avx2 && cpu.avx_vnni,
            Isa::Avx512Vnni => avx2 && cpu.avx512_vnni,
        }
    }

    /// Weight rows per tile of the several-row kernel: as many as the vector registers allow
    /// (the tile keeps `rows × TILE_M` accumulators).
    fn tile_rows(self) -> usize {
        match self {
            Isa::Scalar => 1,
            Isa::Avx2 | Isa::AvxVnni => 2,
            Isa::Avx512Vnni => 4,
        }
    }
}

/// A weight matrix of `rows × cols` in a GGUF block format, each row `cols / 32` blocks, the bytes
/// as in the file. `y = x Wᵀ`, as `candle`'s `QMatMul`.
pub struct QWeights {
    format: Format,
    rows: usize,
    cols: usize,
    data: Vec<u8>,
}

impl QWeights {
    /// Weights from raw GGUF blocks; `None` when `cols` is not a multiple of 32 or the byte
    /// count does not match.
    pub fn new(format: Format, rows: usize, cols: usize, data: Vec<u8>) -> Option<Self> {
        let ok =
            cols.is_multiple_of(BLOCK) && data.len() == rows * cols / BLOCK * format.block_bytes();
        ok.then_some(QWeights {
            format,
            rows,
            cols,
            data,
        })
    }

    /// The weights of a 2-D quantized tensor `(rows, cols)` on the CPU; `None` for a format or a
    /// shape these kernels do not handle (candle's `QMatMul` then does).
    pub fn from_qtensor(t: &QTensor) -> candle_core::Result<Option<Self>> {
        let (Some(format), Ok((rows, cols))) = (Format::of(t.dtype()), t.shape().dims2()) else {
            return Ok(None);
        };
        if !t.device().is_cpu() {
            return Ok(None);
        }
        Ok(QWeights::new(format, rows, cols, t.data()?.into_owned()))
    }

    /// Matrices of one format and width stacked along the rows (`[a; b; ...]`), so that one
    /// product computes them all; `None` when they differ in format or width.
    pub fn stack(parts: Vec<QWeights>) -> Option<Self> {
        let first = parts.first()?;
        let (format, cols) = (first.format, first.cols);
        if parts.iter().any(|p| p.format != format || p.cols != cols) {
            return None;
        }
        let rows = parts.iter().map(|p| p.rows).sum();
        let data = parts.into_iter().flat_map(|p| p.data).collect();
        QWeights::new(format, rows, cols, data)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The raw blocks.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    fn blocks_per_row(&self) -> usize {
        self.cols / BLOCK
    }

    fn row_bytes(&self) -> usize {
        self.blocks_per_row() * self.format.block_bytes()
    }

    /// `x Wᵀ` for a tensor `(..., cols)` of f32 on the CPU: `(..., rows)`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1_no_bwd(self)
    }

    /// `x Wᵀ` for `m` rows of `cols` values (row-major), with the best kernels of this CPU:
    /// `m` rows of `rows` values.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.matmul_with(Isa::detect(), x, m)
    }

    /// [`QWeights::matmul`] with the kernels of `isa`; panics when this CPU lacks it (see
    /// [`Isa::supported`]).
    pub fn matmul_with(&self, isa: Isa, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(
            x.len(),
            m * self.cols,
            "input is not {m} rows of {}",
            self.cols
        );
        let acts = QActs::quantize(isa, x, m, self.cols);
        self.matmul_quantized(isa, &acts)
    }

    /// The product with activations quantized already.
    fn matmul_quantized(&self, isa: Isa, acts: &QActs) -> Vec<f32> {
        assert!(isa.is_supported(), "{isa:?} is not supported here");
        assert_eq!(acts.cols, self.cols);
        let (m, n) = (acts.rows, self.rows);
        let mut out = vec![0f32; m * n];
        if m == 0 || n == 0 {
            return out;
        }
        let dst = Dst(out.as_mut_ptr());
        if m == 1 {
            parallel(n, |rows| {
                // SAFETY: `isa` is supported (checked above) and each call writes only the
                // outputs of its own rows.
                unsafe { gemv(isa, self, acts, rows, dst) }
            });
        } else {
            let tile = isa.tile_rows();
            parallel(n.div_ceil(tile), |tiles| {
                let rows = tiles.start * tile..(tiles.end * tile).min(n);
                // SAFETY: as above, for the rows of these tiles.
                unsafe { gemm(isa, self, acts, rows, dst) }
            });
        }
        out
    }
}

impl CustomOp1 for QWeights {
    fn name(&self) -> &'static str {
        "lector-qmatmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("quantized matmul: f32 input expected");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("quantized matmul: contiguous input expected");
        };
        let mut dims = layout.dims().to_vec();
        match dims.last_mut() {
            Some(k) if *k == self.cols => *k = self.rows,
            _ => candle_core::bail!(
                "quantized matmul: input {:?} does not end in {}",
                layout.dims(),
                self.cols
            ),
        }
        let x = &data[start..end];
        let out = self.matmul(x, x.len() / self.cols);
        Ok((CpuStorage::F32(out), Shape::from(dims)))
    }
}

/// Activation rows quantized per block of 32 to 8 bits, llama.cpp's Q8_1: value `j` of block
/// `b` of row `i` is about `d[i][b] * qs[i][32 b + j]`; `s[i][b] = d[i][b] * Σ_j qs[i][32 b + j]`.
/// More than one row is padded with zero rows to a multiple of [`TILE_M`], and the scales of
/// each row with zeros to a multiple of 8 blocks.
pub struct QActs {
    rows: usize,
    cols: usize,
    /// Scales per row (`cols / 32` rounded up to a multiple of 8).
    stride: usize,
    qs: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
}

impl QActs {
    /// Quantizes `m` rows of `k` values (`k` a multiple of 32) with the code of `isa` (which
    /// this CPU must support; all give the same result).
    pub fn quantize(isa: Isa, x: &[f32], m: usize, k: usize) -> QActs {
        assert!(k.is_multiple_of(BLOCK) && x.len() == m * k);
        assert!(isa.is_supported(), "{isa:?} is not supported here");
        let blocks = k / BLOCK;
        let stride = blocks.div_ceil(8) * 8;
        let padded = if m == 1 {
            1
        } else {
            m.div_ceil(TILE_M) * TILE_M
        };
        let mut acts = QActs {
            rows: m,
            cols: k,
            stride,
            qs: vec![0; padded * k],
            d: vec![0.0; padded * stride],
            s: vec![0.0; padded * stride],
        };
        for i in 0..m {
            for b in 0..blocks {
                let at = i * k + b * BLOCK;
                let block: &[f32; BLOCK] = x[at..at + BLOCK].try_into().unwrap();
                let qs: &mut [i8; BLOCK] = (&mut acts.qs[at..at + BLOCK]).try_into().unwrap();
                let (d, s) = match isa {
                    Isa::Scalar => quantize_block(block, qs),
                    // SAFETY: every supported SIMD `Isa` has AVX2 (`Isa::is_supported`).
                    #[cfg(target_arch = "x86_64")]
                    _ => unsafe { x86::quantize_block(block, qs) },
                    #[cfg(not(target_arch = "x86_64"))]
                    _ => unreachable!(),
                };
                acts.d[i * stride + b] = d;
                acts.s[i * stride + b] = s;
            }
        }
        acts
    }

    /// The quants of row `i`.
    pub fn qs(&self, i: usize) -> &[i8] {
        &self.qs[i * self.cols..(i + 1) * self.cols]
    }

    /// The scales `d` of row `i`, one per block.
    pub fn d(&self, i: usize) -> &[f32] {
        &self.d[i * self.stride..i * self.stride + self.cols / BLOCK]
    }

    /// The `s = d Σq` of row `i`, one per block.
    pub fn s(&self, i: usize) -> &[f32] {
        &self.s[i * self.stride..i * self.stride + self.cols / BLOCK]
    }
}

/// Quantizes one block to `qs`, returning `(d, s)`: `d = max|x| / 127`, `q = round(x / d)`
/// (ties to even, as the SIMD conversion does). The SIMD versions compute exactly this.
pub fn quantize_block(x: &[f32; BLOCK], qs: &mut [i8; BLOCK]) -> (f32, f32) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round_ties_even() as i8;
        sum += i32::from(*q);
    }
    (d, d * sum as f32)
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// The integer dot product of one weight block (raw GGUF bytes) with 32 activation quants, and
/// the block's scale `d` and min `m` (0 without one): the exact integer part of every kernel.
pub fn block_dot(format: Format, block: &[u8], q: &[i8]) -> (i32, f32, f32) {
    let nibbles = |at: usize, offset: i32| -> i32 {
        (0..BLOCK / 2)
            .map(|j| {
                let byte = block[at + j];
                (i32::from(byte & 15) - offset) * i32::from(q[j])
                    + (i32::from(byte >> 4) - offset) * i32::from(q[j + 16])
            })
            .sum()
    };
    match format {
        Format::Q4_0 => (nibbles(2, 8), f16_at(block, 0), 0.0),
        Format::Q4_1 => (nibbles(4, 0), f16_at(block, 0), f16_at(block, 2)),
        Format::Q8_0 => {
            let dot = (0..BLOCK)
                .map(|j| i32::from(block[2 + j] as i8) * i32::from(q[j]))
                .sum();
            (dot, f16_at(block, 0), 0.0)
        }
    }
}

/// The scalar dot product of weight row `r` with activation row `i`.
fn dot_scalar(w: &QWeights, r: usize, acts: &QActs, i: usize) -> f32 {
    let bb = w.format.block_bytes();
    let row = &w.data[r * w.row_bytes()..(r + 1) * w.row_bytes()];
    let (qs, d, s) = (acts.qs(i), acts.d(i), acts.s(i));
    let mut sum = 0f32;
    for b in 0..w.blocks_per_row() {
        let (dot, dw, mw) = block_dot(w.format, &row[b * bb..], &qs[b * BLOCK..]);
        sum += dw * d[b] * dot as f32 + mw * s[b];
    }
    sum
}

/// A pointer to the output matrix, shared by the threads that write disjoint parts of it.
#[derive(Clone, Copy)]
struct Dst(*mut f32);

// SAFETY: the threads write disjoint elements and the buffer outlives the parallel region.
unsafe impl Send for Dst {}
unsafe impl Sync for Dst {}

impl Dst {
    /// # Safety
    /// In bounds, and no other thread writes this element.
    unsafe fn write(self, at: usize, v: f32) {
        unsafe { *self.0.add(at) = v }
    }
}

/// Runs `f` over chunks of `0..n` on candle's CPU thread pool (the calling thread included).
fn parallel(n: usize, f: impl Fn(Range<usize>) + Sync) {
    candle_core::utils::barrier_pool().execute_chunked(n, f);
}

/// One activation row times weight `rows`.
///
/// # Safety
/// `isa` is supported; `out` has `w.rows` elements that no other thread writes in `rows`.
unsafe fn gemv(isa: Isa, w: &QWeights, acts: &QActs, rows: Range<usize>, out: Dst) {
    match isa {
        Isa::Scalar => {
            for r in rows {
                unsafe { out.write(r, dot_scalar(w, r, acts, 0)) };
            }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::gemv_avx2(w, acts, rows, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::AvxVnni => unsafe { x86::gemv_avxvnni(w, acts, rows, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => unsafe { x86::gemv_avx512(w, acts, rows, out) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!(),
    }
}

/// All activation rows times weight `rows`, whose start is a multiple of `isa.tile_rows()`.
///
/// # Safety
/// As [`gemv`], for the `acts.rows × w.rows` output.
unsafe fn gemm(isa: Isa, w: &QWeights, acts: &QActs, rows: Range<usize>, out: Dst) {
    match isa {
        Isa::Scalar => {
            for r in rows {
                for i in 0..acts.rows {
                    unsafe { out.write(i * w.rows + r, dot_scalar(w, r, acts, i)) };
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::gemm_avx2(w, acts, rows, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::AvxVnni => unsafe { x86::gemm_avxvnni(w, acts, rows, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => unsafe { x86::gemm_avx512(w, acts, rows, out) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!(),
    }
}

/// The x86-64 kernels: generic over the one instruction that differs ([`x86::Dot`]) and the
/// block format ([`x86::Fmt`]), instantiated inside `#[target_feature]` functions so that the
/// intrinsics compile to their instructions in an otherwise portable binary.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Dst, Format, QActs, QWeights, BLOCK, TILE_M};
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// 32 unsigned bytes times 32 signed bytes, products summed in fours into 8 i32 lanes.
    pub trait Dot {
        unsafe fn dot(w: __m256i, x: __m256i) -> __m256i;
    }

    pub struct Avx2;
    pub struct AvxVnni;
    pub struct Avx512Vnni;

    impl Dot for Avx2 {
        /// `vpmaddubsw` sums pairs into i16 (no saturation here: |pair| ≤ 2·128·127 = 32512),
        /// `vpmaddwd` pairs of those into i32.
        #[inline(always)]
        unsafe fn dot(w: __m256i, x: __m256i) -> __m256i {
            _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1))
        }
    }

    impl Dot for AvxVnni {
        #[inline(always)]
        unsafe fn dot(w: __m256i, x: __m256i) -> __m256i {
            _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, x)
        }
    }

    impl Dot for Avx512Vnni {
        #[inline(always)]
        unsafe fn dot(w: __m256i, x: __m256i) -> __m256i {
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x)
        }
    }

    /// A block format: how to load a block's 32 weights as bytes and its scales.
    pub trait Fmt {
        /// Whether the weight bytes are signed (the dot then moves the signs onto the
        /// activations: `|w| · sign(w)x`, as llama.cpp does).
        const SIGNED: bool;
        /// The weights of the block at `blk` (unsigned nibbles, or signed values) and
        /// `[d, m, 0, 0]`.
        unsafe fn load(blk: *const u8) -> (__m256i, __m128);
    }

    pub struct Q40;
    pub struct Q41;
    pub struct Q80;

    #[inline(always)]
    unsafe fn f16s(bits: i32) -> __m128 {
        _mm_cvtph_ps(_mm_cvtsi32_si128(bits))
    }

    /// 16 bytes of nibbles at `p` as 32 bytes: the low nibbles, then the high ones.
    #[inline(always)]
    unsafe fn nibbles(p: *const u8) -> __m256i {
        let x = _mm_loadu_si128(p as *const __m128i);
        let both = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
        _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
    }

    impl Fmt for Q40 {
        const SIGNED: bool = true;
        #[inline(always)]
        unsafe fn load(blk: *const u8) -> (__m256i, __m128) {
            let d = f16s(i32::from(blk.cast::<u16>().read_unaligned()));
            let w = _mm256_sub_epi8(nibbles(blk.add(2)), _mm256_set1_epi8(8));
            (w, d)
        }
    }

    impl Fmt for Q41 {
        const SIGNED: bool = false;
        #[inline(always)]
        unsafe fn load(blk: *const u8) -> (__m256i, __m128) {
            (
                nibbles(blk.add(4)),
                f16s(blk.cast::<i32>().read_unaligned()),
            )
        }
    }

    impl Fmt for Q80 {
        const SIGNED: bool = true;
        #[inline(always)]
        unsafe fn load(blk: *const u8) -> (__m256i, __m128) {
            let d = f16s(i32::from(blk.cast::<u16>().read_unaligned()));
            (_mm256_loadu_si256(blk.add(2) as *const __m256i), d)
        }
    }

    /// The integer dot products of a block's weights with a block's activation quants.
    #[inline(always)]
    unsafe fn dot<D: Dot, F: Fmt>(w: __m256i, x: __m256i) -> __m256i {
        if F::SIGNED {
            D::dot(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w))
        } else {
            D::dot(w, x)
        }
    }

    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// One activation row: each weight block is read once, straight from the GGUF bytes.
    #[inline(always)]
    unsafe fn gemv<D: Dot, F: Fmt>(w: &QWeights, acts: &QActs, rows: Range<usize>, out: Dst) {
        let (blocks, bb, row_bytes) = (w.blocks_per_row(), w.format.block_bytes(), w.row_bytes());
        let (qs, d, s) = (acts.qs.as_ptr(), acts.d.as_ptr(), acts.s.as_ptr());
        for r in rows {
            let row = w.data.as_ptr().add(r * row_bytes);
            let mut acc = _mm256_setzero_ps();
            // Lane 1 sums the min terms m·s (lane 0 collects d·dₓ, unused).
            let mut mins = _mm_setzero_ps();
            for b in 0..blocks {
                let (wq, dm) = F::load(row.add(b * bb));
                let x = _mm256_loadu_si256(qs.add(b * BLOCK) as *const __m256i);
                let scales = _mm_mul_ps(
                    dm,
                    _mm_unpacklo_ps(_mm_load_ss(d.add(b)), _mm_load_ss(s.add(b))),
                );
                let p = _mm256_cvtepi32_ps(dot::<D, F>(wq, x));
                acc = _mm256_fmadd_ps(p, _mm256_broadcastss_ps(scales), acc);
                mins = _mm_add_ps(mins, scales);
            }
            let min = _mm_cvtss_f32(_mm_movehdup_ps(mins));
            out.write(r, hsum(acc) + min);
        }
    }

    /// Several activation rows: `RN` weight rows at a time are unpacked (32 bytes per block,
    /// scales as f32) into a buffer that stays in L1, then multiplied against tiles of `TILE_M`
    /// activation rows with `RN × TILE_M` accumulators in registers.
    // Index loops: the indices address several arrays (and pointers) at once.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    unsafe fn gemm<D: Dot, F: Fmt, const RN: usize>(
        w: &QWeights,
        acts: &QActs,
        rows: Range<usize>,
        out: Dst,
    ) {
        let (blocks, bb, row_bytes) = (w.blocks_per_row(), w.format.block_bytes(), w.row_bytes());
        let (k, n, stride) = (w.cols, w.rows, acts.stride);
        let has_min = w.format == Format::Q4_1;
        let mut wq = vec![_mm256_setzero_si256(); RN * blocks];
        let mut wd = vec![0f32; RN * blocks];
        let mut wm = vec![0f32; RN * stride];
        let mut r0 = rows.start;
        while r0 < rows.end {
            // Unpack rows r0..r0 + RN (zeros past the end).
            for r in 0..RN {
                for b in 0..blocks {
                    let (q, dm) = if r0 + r < n {
                        F::load(w.data.as_ptr().add((r0 + r) * row_bytes + b * bb))
                    } else {
                        (_mm256_setzero_si256(), _mm_setzero_ps())
                    };
                    wq[r * blocks + b] = q;
                    let mut scales = [0f32; 4];
                    _mm_storeu_ps(scales.as_mut_ptr(), dm);
                    wd[r * blocks + b] = scales[0];
                    wm[r * stride + b] = scales[1];
                }
            }
            for i0 in (0..acts.rows).step_by(TILE_M) {
                let mut acc = [[_mm256_setzero_ps(); TILE_M]; RN];
                let xq = acts.qs.as_ptr().add(i0 * k);
                let xd = acts.d.as_ptr().add(i0 * stride);
                for b in 0..blocks {
                    let mut wv = [_mm256_setzero_si256(); RN];
                    let mut dv = [_mm256_setzero_ps(); RN];
                    for r in 0..RN {
                        wv[r] = wq[r * blocks + b];
                        dv[r] = _mm256_set1_ps(wd[r * blocks + b]);
                    }
                    for i in 0..TILE_M {
                        let x = _mm256_loadu_si256(xq.add(i * k + b * BLOCK) as *const __m256i);
                        let dx = _mm256_set1_ps(*xd.add(i * stride + b));
                        for r in 0..RN {
                            let p = _mm256_cvtepi32_ps(dot::<D, F>(wv[r], x));
                            acc[r][i] = _mm256_fmadd_ps(_mm256_mul_ps(p, dv[r]), dx, acc[r][i]);
                        }
                    }
                }
                if has_min {
                    // Σ_b m·s, 8 blocks at a time (both padded with zeros).
                    for c in (0..stride).step_by(8) {
                        for i in 0..TILE_M {
                            let s = _mm256_loadu_ps(acts.s.as_ptr().add((i0 + i) * stride + c));
                            for r in 0..RN {
                                let m = _mm256_loadu_ps(wm.as_ptr().add(r * stride + c));
                                acc[r][i] = _mm256_fmadd_ps(m, s, acc[r][i]);
                            }
                        }
                    }
                }
                for (r, acc) in acc.iter().enumerate() {
                    for (i, &v) in acc.iter().enumerate() {
                        if r0 + r < rows.end && i0 + i < acts.rows {
                            out.write((i0 + i) * n + r0 + r, hsum(v));
                        }
                    }
                }
            }
            r0 += RN;
        }
    }

    macro_rules! kernels {
        ($gemv:ident, $gemm:ident, $dot:ty, $rn:literal, $features:literal) => {
            /// # Safety
            /// The CPU has the enabled features; see `super::gemv`.
            #[target_feature(enable = $features)]
            pub unsafe fn $gemv(w: &QWeights, acts: &QActs, rows: Range<usize>, out: Dst) {
                match w.format {
                    Format::Q4_0 => gemv::<$dot, Q40>(w, acts, rows, out),
                    Format::Q4_1 => gemv::<$dot, Q41>(w, acts, rows, out),
                    Format::Q8_0 => gemv::<$dot, Q80>(w, acts, rows, out),
                }
            }

            /// # Safety
            /// The CPU has the enabled features; see `super::gemm`.
            #[target_feature(enable = $features)]
            pub unsafe fn $gemm(w: &QWeights, acts: &QActs, rows: Range<usize>, out: Dst) {
                match w.format {
                    Format::Q4_0 => gemm::<$dot, Q40, $rn>(w, acts, rows, out),
                    Format::Q4_1 => gemm::<$dot, Q41, $rn>(w, acts, rows, out),
                    Format::Q8_0 => gemm::<$dot, Q80, $rn>(w, acts, rows, out),
                }
            }
        };
    }

    kernels!(gemv_avx2, gemm_avx2, Avx2, 2, "avx2,fma,f16c");
    kernels!(
        gemv_avxvnni,
        gemm_avxvnni,
        AvxVnni,
        2,
        "avx2,fma,f16c,avxvnni"
    );
    kernels!(
        gemv_avx512,
        gemm_avx512,
        Avx512Vnni,
        4,
        "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
    );

    /// [`super::quantize_block`] with AVX2, bit for bit.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn quantize_block(x: &[f32; BLOCK], qs: &mut [i8; BLOCK]) -> (f32, f32) {
        let p = x.as_ptr();
        let v = [
            _mm256_loadu_ps(p),
            _mm256_loadu_ps(p.add(8)),
            _mm256_loadu_ps(p.add(16)),
            _mm256_loadu_ps(p.add(24)),
        ];
        let sign = _mm256_set1_ps(-0.0);
        let max8 = _mm256_max_ps(
            _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
            _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])),
        );
        let max4 = _mm_max_ps(_mm256_castps256_ps128(max8), _mm256_extractf128_ps(max8, 1));
        let max2 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
        let amax = _mm_cvtss_f32(_mm_max_ss(max2, _mm_movehdup_ps(max2)));
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        let mut q = [_mm256_setzero_si256(); 4];
        for (q, v) in q.iter_mut().zip(v) {
            const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            *q = _mm256_cvtps_epi32(_mm256_round_ps::<NEAREST>(_mm256_mul_ps(v, id)));
        }
        let sum8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        let sum4 = _mm_add_epi32(
            _mm256_castsi256_si128(sum8),
            _mm256_extracti128_si256(sum8, 1),
        );
        let sum2 = _mm_add_epi32(sum4, _mm_unpackhi_epi64(sum4, sum4));
        let sum = _mm_cvtsi128_si32(_mm_add_epi32(sum2, _mm_shuffle_epi32(sum2, 1)));
        // i32 → i8 in order: the packs work within 128-bit lanes, the permutation restores it.
        let packed = _mm256_packs_epi16(
            _mm256_packs_epi32(q[0], q[1]),
            _mm256_packs_epi32(q[2], q[3]),
        );
        let ordered =
            _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(qs.as_mut_ptr() as *mut __m256i, ordered);
        (d, d * sum as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QStorage;
    use candle_core::Device;
    use std::borrow::Cow;

    /// A deterministic pseudo-random generator (xorshift), values in [-1, 1).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }
        fn vec(&mut self, n: usize) -> Vec<f32> {
            (0..n).map(|_| self.next()).collect()
        }
    }

    fn quantized(format: Format, rows: usize, cols: usize, rng: &mut Rng) -> (QWeights, Vec<f32>) {
        let values = Tensor::from_vec(rng.vec(rows * cols), (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&values, format.ggml()).unwrap();
        let dequantized = q.dequantize(&Device::Cpu).unwrap();
        let w = QWeights::from_qtensor(&q).unwrap().unwrap();
        (w, dequantized.flatten_all().unwrap().to_vec1().unwrap())
    }

    #[test]
    fn simd_quantization_is_bit_identical() {
        let mut rng = Rng(7);
        for isa in Isa::supported() {
            for scale in [0.0, 1e-3, 1.0, 250.0] {
                let x: Vec<f32> = rng.vec(BLOCK * 8).iter().map(|v| v * scale).collect();
                let reference = QActs::quantize(Isa::Scalar, &x, 8, BLOCK);
                let acts = QActs::quantize(isa, &x, 8, BLOCK);
                assert_eq!(acts.qs, reference.qs, "{isa:?}");
                assert_eq!(acts.d, reference.d, "{isa:?}");
                assert_eq!(acts.s, reference.s, "{isa:?}");
                for i in 0..8 {
                    let max = acts.qs(i).iter().map(|q| q.unsigned_abs()).max().unwrap();
                    assert!(scale == 0.0 || max == 127, "{max}");
                }
            }
        }
    }

    /// Weights with all scales 1 (and mins 0) against activations with scales 1: every kernel's
    /// result is a sum of exact integers, so they must agree exactly with `block_dot`.
    #[test]
    fn integer_parts_are_exact() {
        let mut seed = 11u64;
        let mut byte = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u8
        };
        let one = f16::from_f32(1.0).to_le_bytes();
        for format in [Format::Q4_0, Format::Q4_1, Format::Q8_0] {
            let (rows, cols, m) = (7, 5 * BLOCK, 6usize);
            let mut data = Vec::new();
            for _ in 0..rows * cols / BLOCK {
                data.extend(one);
                if format == Format::Q4_1 {
                    data.extend([0, 0]);
                }
                let quants = if format == Format::Q8_0 { 32 } else { 16 };
                // Extremes included: -128 and 127 in Q8_0, 0 and 15 nibbles.
                data.extend((0..quants).map(|j| match j {
                    0 => 0x80,
                    1 => 0x7F,
                    2 => 0xFF,
                    _ => byte(),
                }));
            }
            let w = QWeights::new(format, rows, cols, data).unwrap();
            let padded = m.div_ceil(TILE_M) * TILE_M;
            let stride = 8;
            let mut qs: Vec<i8> = (0..padded * cols).map(|_| byte() as i8).collect();
            // Activation quants are never -128 (|q| ≤ 127 by construction).
            qs.iter_mut().for_each(|q| *q = (*q).max(-127));
            let (mut d, s) = (vec![1f32; padded * stride], vec![0f32; padded * stride]);
            d.iter_mut()
                .enumerate()
                .for_each(|(i, d)| *d *= f32::from(i % stride < 5));
            for single in [true, false] {
                let rows_m = if single { 1 } else { m };
                let acts = QActs {
                    rows: rows_m,
                    cols,
                    stride,
                    qs: qs[..if single { cols } else { padded * cols }].to_vec(),
                    d: d.clone(),
                    s: s.clone(),
                };
                let expected: Vec<f32> = (0..rows_m)
                    .flat_map(|i| {
                        let acts = &acts;
                        let w = &w;
                        (0..rows).map(move |r| {
                            let row = &w.data[r * w.row_bytes()..];
                            (0..cols / BLOCK)
                                .map(|b| {
                                    let bb = format.block_bytes();
                                    block_dot(format, &row[b * bb..], &acts.qs(i)[b * BLOCK..]).0
                                })
                                .sum::<i32>() as f32
                        })
                    })
                    .collect();
                for isa in Isa::supported() {
                    assert_eq!(
                        w.matmul_quantized(isa, &acts),
                        expected,
                        "{format:?} {isa:?}"
                    );
                }
            }
        }
    }

    /// Every kernel against the scalar one (tight: only the order of f32 sums differs) and
    /// against f32 products with the dequantized weights (loose: activations are quantized).
    #[test]
    fn kernels_agree_with_the_references() {
        let mut rng = Rng(3);
        for format in [Format::Q4_0, Format::Q4_1, Format::Q8_0] {
            for (n, k) in [(1, 32), (13, 96), (64, 576), (37, 1536)] {
                let (w, dense) = quantized(format, n, k, &mut rng);
                for m in [1, 2, 3, 4, 5, 9] {
                    let x = rng.vec(m * k);
                    let exact = |i: usize, r: usize| -> (f32, f32) {
                        let terms = (0..k).map(|j| x[i * k + j] * dense[r * k + j]);
                        (terms.clone().sum(), terms.map(f32::abs).sum())
                    };
                    let reference = w.matmul_with(Isa::Scalar, &x, m);
                    for isa in Isa::supported() {
                        let y = w.matmul_with(isa, &x, m);
                        for (at, (a, b)) in y.iter().zip(&reference).enumerate() {
                            let (_, norm) = exact(at / n, at % n);
                            let what = format!("{format:?} {isa:?} {n}x{k} m={m} [{at}]");
                            assert!((a - b).abs() <= 1e-5 * norm + 1e-6, "{what}: {a} vs {b}");
                        }
                    }
                    for (at, &got) in reference.iter().enumerate() {
                        let (sum, norm) = exact(at / n, at % n);
                        let what = format!("{format:?} {n}x{k} m={m} [{at}]");
                        assert!((got - sum).abs() <= 0.02 * norm, "{what}: {got} vs {sum}");
                    }
                }
            }
        }
    }

    #[test]
    fn forward_keeps_leading_dimensions_and_stack_concatenates() {
        let mut rng = Rng(5);
        let (a, _) = quantized(Format::Q4_1, 24, 64, &mut rng);
        let (b, _) = quantized(Format::Q4_1, 8, 64, &mut rng);
        let x = rng.vec(2 * 3 * 64);
        let ya = a.matmul(&x, 6);
        let yb = b.matmul(&x, 6);
        let stacked = QWeights::stack(vec![a, b]).unwrap();
        let t = Tensor::from_vec(x, (2, 3, 64), &Device::Cpu).unwrap();
        let y = stacked.forward(&t).unwrap();
        assert_eq!(y.dims(), &[2, 3, 32]);
        let y: Vec<Vec<f32>> = y.reshape((6, 32)).unwrap().to_vec2().unwrap();
        for i in 0..6 {
            assert_eq!(&y[i][..24], &ya[i * 24..(i + 1) * 24]);
            assert_eq!(&y[i][24..], &yb[i * 8..(i + 1) * 8]);
        }
        let (c, _) = quantized(Format::Q8_0, 8, 64, &mut rng);
        let (d, _) = quantized(Format::Q4_1, 8, 64, &mut rng);
        assert!(QWeights::stack(vec![c, d]).is_none());
    }

    #[test]
    fn other_formats_are_left_to_candle() {
        let t = Tensor::zeros((4, 256), candle_core::DType::F32, &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, GgmlDType::Q4K).unwrap();
        assert!(QWeights::from_qtensor(&q).unwrap().is_none());
        let storage =
            QStorage::from_data(Cow::Owned(vec![0u8; 4 * 34]), &Device::Cpu, GgmlDType::Q8_0)
                .unwrap();
        let q = QTensor::new(storage, (4, 32)).unwrap();
        assert!(QWeights::from_qtensor(&q).unwrap().is_some());
    }
}

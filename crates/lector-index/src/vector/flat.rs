//! Row-major vector storage and exact (brute-force) top-k search.
//!
//! Exact search reads every row once per query: at 384 dimensions that is about 1.5 KB a row,
//! so it is memory-bound from a few hundred thousand rows on. It is the ground truth for the
//! HNSW graph and the right choice for small segments, where a graph costs more than it saves.

use super::simd::dot;
use super::tile::{pack_panel, TileKernel};
use super::{into_ranked, Candidate};
use crate::codec::{DecodeResult, Decoder, Encoder};
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// From this many rows on, exact search splits the rows across rayon's threads.
const PARALLEL_ROWS: usize = 50_000;
/// Rows per parallel task: large enough that merging per-task top-k lists costs nothing.
const CHUNK_ROWS: usize = 16_384;
/// Rows per block of a batched scan: packed, they take 384 KB at 384 dimensions, so they stay in
/// the L2 cache while every query of the batch passes over them.
const BLOCK_ROWS: usize = 256;

/// Fixed-dimension vectors stored row-major; row `i` has id `i`.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    dim: usize,
    data: Vec<f32>,
}

impl Vectors {
    /// No rows yet. Panics when `dim` is 0.
    pub fn new(dim: usize) -> Self {
        assert!(dim > 0, "vectors need at least one dimension");
        Vectors {
            dim,
            data: Vec::new(),
        }
    }

    /// Rows taken from a row-major buffer. Panics unless its length is a multiple of `dim`.
    pub fn from_data(dim: usize, data: Vec<f32>) -> Self {
        assert!(dim > 0, "vectors need at least one dimension");
        assert_eq!(data.len() % dim, 0, "data is not a whole number of rows");
        Vectors { dim, data }
    }

    /// Appends a row (its id is the previous [`Vectors::len`]). Panics on a wrong length.
    pub fn push(&mut self, row: &[f32]) {
        assert_eq!(row.len(), self.dim, "row length differs from the dimension");
        self.data.extend_from_slice(row);
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.data.len() / self.dim
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The dimension of every row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Row `i`. Panics when out of range.
    #[inline]
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// All rows, row-major.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }
}

/// Persistence inside a caller's file.
impl Vectors {
    const MAGIC: &[u8; 8] = b"LXVEC001";

    /// Appends `LXVEC001`, the dimension and row count (varints), then the floats as raw
    /// little-endian bytes (no compression: embeddings do not compress, and raw keeps loading a
    /// copy).
    pub(crate) fn encode(&self, e: &mut Encoder) {
        e.raw(Self::MAGIC);
        e.varint(self.dim as u64);
        e.varint(self.len() as u64);
        e.bytes.reserve(self.data.len() * 4);
        for x in &self.data {
            e.raw(&x.to_le_bytes());
        }
    }

    /// Reads what [`Vectors::encode`] wrote.
    pub(crate) fn decode(d: &mut Decoder) -> DecodeResult<Vectors> {
        if d.raw(Self::MAGIC.len())? != Self::MAGIC {
            return Err("not a lector vector block (bad magic)".into());
        }
        let dim = d.varint()? as usize;
        let rows = d.varint()? as usize;
        if dim == 0 {
            return Err("vector block with dimension 0".into());
        }
        let bytes = rows
            .checked_mul(dim)
            .and_then(|n| n.checked_mul(4))
            .ok_or("vector block size overflows")?;
        let raw = d.raw(bytes)?;
        let data = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(Vectors { dim, data })
    }
}

/// Scales `v` to unit L2 norm (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

/// The `k` best rows for `query` (by inner product) among those `keep` accepts, best first, ties
/// by lower id. Uses all of rayon's threads from [`PARALLEL_ROWS`] rows on. Panics when the
/// query's length differs from the dimension.
pub fn exact_top_k(
    vectors: &Vectors,
    query: &[f32],
    k: usize,
    keep: impl Fn(u32) -> bool + Sync,
) -> Vec<(f32, u32)> {
    assert_eq!(
        query.len(),
        vectors.dim(),
        "query length differs from the dimension"
    );
    let n = vectors.len();
    if k == 0 || n == 0 {
        return Vec::new();
    }
    let best = if n >= PARALLEL_ROWS && rayon::current_num_threads() > 1 {
        (0..n.div_ceil(CHUNK_ROWS))
            .into_par_iter()
            .map(|c| {
                let rows = c * CHUNK_ROWS..((c + 1) * CHUNK_ROWS).min(n);
                scan(vectors, query, k, &keep, rows)
            })
            .reduce(TopK::default, |mut a, b| {
                for Reverse(c) in b.heap {
                    a.offer(k, c);
                }
                a
            })
    } else {
        scan(vectors, query, k, &keep, 0..n)
    };
    into_ranked(best.heap.into_iter().map(|Reverse(c)| c).collect())
}

/// The `k` best rows for every row of `queries`, as [`exact_top_k`] finds them one query at a
/// time (scores may differ in the last bits: the sums run in another order). The queries share
/// each pass over the rows, as a matrix product does, so a batch costs a fraction of its queries
/// asked one by one. Uses all of rayon's threads from [`PARALLEL_ROWS`] rows on. Panics when the
/// queries' dimension differs from the rows'.
pub fn exact_top_k_batch(
    vectors: &Vectors,
    queries: &Vectors,
    k: usize,
    keep: impl Fn(u32) -> bool + Sync,
) -> Vec<Vec<(f32, u32)>> {
    assert_eq!(
        queries.dim(),
        vectors.dim(),
        "query length differs from the dimension"
    );
    let (n, nq) = (vectors.len(), queries.len());
    let kernel = TileKernel::detect().filter(|_| nq > 1 && n > 0 && k > 0);
    let Some(kernel) = kernel else {
        let one = |i| exact_top_k(vectors, queries.row(i), k, &keep);
        return (0..nq).map(one).collect();
    };
    // Whole tiles of queries: the padding rows are zeros whose scores are never offered.
    let mut padded = queries.as_slice().to_vec();
    padded.resize(nq.next_multiple_of(kernel.mr) * queries.dim(), 0.0);
    let threads = rayon::current_num_threads();
    let parts = if n >= PARALLEL_ROWS { threads } else { 1 };
    let part_rows = n.div_ceil(parts).next_multiple_of(BLOCK_ROWS);
    let scan_part = |p: usize| {
        let rows = p * part_rows..((p + 1) * part_rows).min(n);
        scan_batch(kernel, vectors, &padded, nq, k, &keep, rows)
    };
    let merge = |mut a: Vec<TopK>, b: Vec<TopK>| {
        for (into, from) in a.iter_mut().zip(b) {
            for Reverse(c) in from.heap {
                into.offer(k, c);
            }
        }
        a
    };
    let tops = (0..n.div_ceil(part_rows))
        .into_par_iter()
        .map(scan_part)
        .reduce_with(merge)
        .unwrap_or_default();
    tops.into_iter()
        .map(|t| into_ranked(t.heap.into_iter().map(|Reverse(c)| c).collect()))
        .collect()
}

/// One part's rows against every query, a block of rows at a time: the block is packed into
/// panels once, then each tile of queries is scored against each panel.
fn scan_batch(
    kernel: TileKernel,
    vectors: &Vectors,
    padded_queries: &[f32],
    nq: usize,
    k: usize,
    keep: &(impl Fn(u32) -> bool + Sync),
    rows: std::ops::Range<usize>,
) -> Vec<TopK> {
    let (dim, mr, nr) = (vectors.dim(), kernel.mr, kernel.nr);
    // Rows past the part's end are packed as zeros (and never offered).
    let part = &vectors.as_slice()[..rows.end * dim];
    let mut tops: Vec<TopK> = (0..nq).map(|_| TopK::default()).collect();
    let mut packed = vec![0.0; BLOCK_ROWS.next_multiple_of(nr) * dim];
    let mut kept = vec![false; BLOCK_ROWS];
    let mut scores = vec![0.0; mr * nr];
    for block in rows.clone().step_by(BLOCK_ROWS) {
        let len = (rows.end - block).min(BLOCK_ROWS);
        let panels = len.div_ceil(nr);
        for (p, panel) in packed.chunks_exact_mut(nr * dim).take(panels).enumerate() {
            pack_panel(part, dim, block + p * nr, nr, panel);
        }
        for (j, kept) in kept[..len].iter_mut().enumerate() {
            *kept = keep((block + j) as u32);
        }
        for (g, tile) in padded_queries.chunks_exact(mr * dim).enumerate() {
            for (p, panel) in packed.chunks_exact(nr * dim).take(panels).enumerate() {
                kernel.scores(tile, dim, panel, &mut scores);
                let first = p * nr;
                let width = nr.min(len - first);
                for i in 0..mr.min(nq - g * mr) {
                    let top = &mut tops[g * mr + i];
                    for (j, &score) in scores[i * nr..i * nr + width].iter().enumerate() {
                        if kept[first + j] {
                            let id = (block + first + j) as u32;
                            top.offer(k, Candidate { score, id });
                        }
                    }
                }
            }
        }
    }
    tops
}

/// A bounded heap of the best `k` candidates seen, worst on top so it is replaced first.
#[derive(Default)]
struct TopK {
    heap: BinaryHeap<Reverse<Candidate>>,
}

impl TopK {
    #[inline]
    fn offer(&mut self, k: usize, c: Candidate) {
        if self.heap.len() < k {
            self.heap.push(Reverse(c));
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if c > worst.0 {
                *worst = Reverse(c);
            }
        }
    }
}

fn scan(
    vectors: &Vectors,
    query: &[f32],
    k: usize,
    keep: &(impl Fn(u32) -> bool + Sync),
    rows: std::ops::Range<usize>,
) -> TopK {
    let mut top = TopK {
        heap: BinaryHeap::with_capacity(k.min(rows.len()) + 1),
    };
    for i in rows {
        let id = i as u32;
        if keep(id) {
            let score = dot(query, vectors.row(i));
            top.offer(k, Candidate { score, id });
        }
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_and_truncation() {
        let mut v = Vectors::new(3);
        v.push(&[1.0, -0.5, f32::MIN_POSITIVE]);
        v.push(&[0.0, 2.5, -1e30]);
        let mut e = Encoder::default();
        v.encode(&mut e);
        let mut d = Decoder::new(&e.bytes);
        assert_eq!(Vectors::decode(&mut d).unwrap(), v);
        assert!(d.is_done());
        for cut in [0, 8, 10, e.bytes.len() - 1] {
            assert!(Vectors::decode(&mut Decoder::new(&e.bytes[..cut])).is_err());
        }
    }

    #[test]
    fn ties_rank_lower_ids_first() {
        let mut v = Vectors::new(2);
        for _ in 0..5 {
            v.push(&[1.0, 0.0]);
        }
        let ids: Vec<u32> = exact_top_k(&v, &[1.0, 0.0], 3, |_| true)
            .into_iter()
            .map(|h| h.1)
            .collect();
        assert_eq!(ids, [0, 1, 2]);
    }
}

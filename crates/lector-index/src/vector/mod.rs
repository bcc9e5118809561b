//! Vector search for the dense retriever: exact (flat) search and an HNSW graph.
//!
//! Rows are assumed L2-normalised, so the inner product ([`simd::dot`]) is the cosine
//! similarity and higher scores are better. Results are `(score, row)` pairs, best first, ties
//! broken by the lower row id so that exact search is reproducible. Both searches take a `keep`
//! predicate over row ids: the dense retriever passes "not deleted", since an immutable segment
//! keeps the vectors of documents deleted after it was written.
//!
//! [`Vectors`] and [`Hnsw`] encode to the crate's segment codec so a caller can store them
//! inside its own files; neither writes files itself.

mod flat;
mod hnsw;
pub mod simd;
mod tile;

pub use flat::{exact_top_k, exact_top_k_batch, normalize, Vectors};
pub use hnsw::{Hnsw, HnswParams};

use std::cmp::Ordering;

/// A scored row, ordered so that "greater" means "better": higher score, then lower id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    pub score: f32,
    pub id: u32,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        // total_cmp: a NaN score (a zero or corrupt vector) must not break the heap invariants.
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.id.cmp(&self.id))
    }
}

/// Candidates sorted best first, as the public `(score, id)` pairs.
pub(crate) fn into_ranked(mut list: Vec<Candidate>) -> Vec<(f32, u32)> {
    list.sort_unstable_by(|a, b| b.cmp(a));
    list.into_iter().map(|c| (c.score, c.id)).collect()
}

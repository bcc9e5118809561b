//! Dense and hybrid retrieval over an [`Index`], and one entry point for every [`Mode`].

use crate::bm25::Bm25Params;
use crate::docstore::DocumentStore;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::index::{Allowed, Index};
use crate::retriever::{fuse, Fusion, Hit, Mode, Retriever, RetrieverKind};
use std::sync::Arc;

/// How a query is run; [`SearchOptions::for_index`] gives the index's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// Which retriever(s).
    pub mode: Mode,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// How hybrid mode combines BM25 and dense rankings.
    pub fusion: Fusion,
    /// Candidates each retriever contributes to a hybrid fusion (at least `k`).
    pub fusion_depth: usize,
    /// HNSW beam width; `None` searches exactly (a full SIMD scan).
    pub ef: Option<usize>,
    /// Only documents that pass this filter come back; applied before ranking, so `k` hits come
    /// back whenever `k` passing passages match.
    pub filter: Option<Filter>,
    /// BM25 computes its collection statistics (N, df, mean length) over the passages that pass
    /// the filter alone, so that scores say nothing of documents outside it (a tenant's view);
    /// by default they count every live passage and a filter changes no score.
    pub statistics_within_filter: bool,
    /// A filtered dense search scans a segment exactly, instead of walking its HNSW graph, when
    /// at most this many of its passages pass the filter (default [`FILTERED_EXACT_BELOW`]).
    pub filtered_exact_below: usize,
}

/// Filtered dense search scans a segment exactly when at most this many of its passages pass:
/// the size below which segments get no graph at all, so a filtered scan costs no more than an
/// unfiltered small segment (about a millisecond), and its recall is exact. Measured in
/// BENCHMARKS.md (filtered HNSW recall by selectivity).
pub const FILTERED_EXACT_BELOW: usize = crate::dense::HNSW_MIN_VECTORS;

/// The HNSW beam width used unless told otherwise: recall@10 >= 0.98 on lector's benchmarks
/// (BENCHMARKS.md) at a fraction of an exact scan's cost on large segments.
pub const DEFAULT_EF: usize = 128;

/// Candidates per retriever for hybrid fusion: RRF needs rankings deeper than `k` to reward
/// passages both retrievers rank well but neither ranks first.
pub const DEFAULT_FUSION_DEPTH: usize = 100;

impl SearchOptions {
    /// `mode` with the store's BM25 parameters, RRF (k = 60), and approximate dense search.
    pub fn for_index(index: &(impl DocumentStore + ?Sized), mode: Mode) -> Self {
        SearchOptions {
            mode,
            bm25: index.settings().bm25,
            fusion: Fusion::Rrf { k: 60.0 },
            fusion_depth: DEFAULT_FUSION_DEPTH,
            ef: Some(DEFAULT_EF),
            filter: None,
            statistics_within_filter: false,
            filtered_exact_below: FILTERED_EXACT_BELOW,
        }
    }
}

impl Index {
    /// The retriever for `options.mode`; dense and hybrid need the index's `embedder` (the model
    /// that embedded its passages) to embed queries.
    pub fn retriever<'a>(
        &'a self,
        options: &SearchOptions,
        embedder: Option<&'a dyn Embedder>,
    ) -> Result<Box<dyn Retriever + 'a>> {
        let allowed =
            (options.filter.as_ref()).map(|f| self.allowed(f, options.statistics_within_filter));
        if options.mode == Mode::Tfidf {
            return Ok(Box::new(self.tfidf()?.only(allowed)));
        }
        let bm25 = self.bm25(options.bm25).only(allowed.clone());
        if options.mode == Mode::Bm25 {
            return Ok(Box::new(bm25));
        }
        let mut dense = self.dense(embedder, options.ef)?;
        dense.allowed = allowed;
        dense.exact_below = options.filtered_exact_below;
        Ok(match options.mode {
            Mode::Dense => Box::new(dense),
            _ => Box::new(HybridRetriever::new(
                Box::new(bm25),
                Box::new(dense),
                options,
            )),
        })
    }

    /// Embedding search with `embedder`, which must be the model the index was embedded with.
    pub fn dense<'a>(
        &'a self,
        embedder: Option<&'a dyn Embedder>,
        ef: Option<usize>,
    ) -> Result<DenseRetriever<'a>> {
        let Some(meta) = &self.manifest.dense else {
            return Err(Error::Config(format!(
                "index {} has no passage vectors; add them with `lector index add --dense` (any path, or none)",
                self.dir().display()
            )));
        };
        let Some(embedder) = embedder else {
            return Err(Error::Config(format!(
                "dense search of {} needs its embedder `{}`",
                self.dir().display(),
                meta.model
            )));
        };
        meta.check(embedder, &self.dir().display())?;
        Ok(DenseRetriever {
            index: self,
            embedder,
            ef,
            allowed: None,
            exact_below: FILTERED_EXACT_BELOW,
        })
    }
}

/// Cosine similarity between the query's embedding and each passage's.
pub struct DenseRetriever<'a> {
    index: &'a Index,
    embedder: &'a dyn Embedder,
    ef: Option<usize>,
    allowed: Option<Arc<Allowed>>,
    exact_below: usize,
}

impl DenseRetriever<'_> {
    /// Passages nearest to an already embedded query: (score, segment, passage), best first.
    fn nearest(&self, query: &[f32], k: usize) -> Vec<(f64, usize, u32)> {
        let mut scored = Vec::new();
        for (s, live) in self.index.segments.iter().enumerate() {
            let Some(vectors) = &live.vectors else {
                continue;
            };
            let found = match self.allowed.as_deref() {
                None => vectors.search(query, k, self.ef, |p| live.is_live(p)),
                Some(allowed) if allowed.passages[s] == 0 => continue,
                Some(allowed) => {
                    // A selective filter starves the graph walk of passing neighbours; a scan
                    // of the few passing rows is both exact and cheap.
                    let ef = self.ef.filter(|_| allowed.passages[s] > self.exact_below);
                    vectors.search(query, k, ef, |p| allowed.keeps(self.index, s, p))
                }
            };
            scored.extend(found.into_iter().map(|(v, p)| (f64::from(v), s, p)));
        }
        self.index.top(scored, k)
    }
}

impl Retriever for DenseRetriever<'_> {
    fn kind(&self) -> RetrieverKind {
        RetrieverKind::Dense
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let vector = crate::embed::embed_query(self.embedder, query)?;
        Ok(self
            .nearest(&vector, k)
            .into_iter()
            .enumerate()
            .map(|(i, (v, s, p))| self.index.hit(RetrieverKind::Dense, v, s, p, i + 1))
            .collect())
    }
}

/// BM25 and dense rankings fused ([`fuse`]); each hit keeps both retrievers' ranks and scores.
pub struct HybridRetriever<'a> {
    bm25: Box<dyn Retriever + 'a>,
    dense: Box<dyn Retriever + 'a>,
    fusion: Fusion,
    depth: usize,
}

impl<'a> HybridRetriever<'a> {
    /// Fuses the best `options.fusion_depth` (at least `k`) of each retriever by `options.fusion`.
    pub fn new(
        bm25: Box<dyn Retriever + 'a>,
        dense: Box<dyn Retriever + 'a>,
        options: &SearchOptions,
    ) -> Self {
        HybridRetriever {
            bm25,
            dense,
            fusion: options.fusion.clone(),
            depth: options.fusion_depth,
        }
    }
}

impl Retriever for HybridRetriever<'_> {
    fn kind(&self) -> RetrieverKind {
        RetrieverKind::Hybrid
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let depth = self.depth.max(k);
        let rankings = [
            self.bm25.retrieve(query, depth)?,
            self.dense.retrieve(query, depth)?,
        ];
        Ok(fuse(&rankings, &self.fusion, k))
    }
}

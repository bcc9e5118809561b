//! `--rerank DIR`: the cross-encoder that reorders retrieved passages, plugged into the index's
//! `PassageScorer` seam.

use anyhow::{bail, Context, Result};
use clap::Args;
use lector_index::{Hit, PassageScorer, Retriever, DEFAULT_RERANK_DEPTH};
use lector_models::CrossEncoder;
use std::path::PathBuf;

/// Reranking options of the commands that read passages.
#[derive(Args, Clone)]
pub struct RerankOptions {
    /// Cross-encoder checkpoint that reorders the retrieved passages (a one-label
    /// BertForSequenceClassification, such as tools/train_reranker.py makes).
    #[arg(long, value_name = "DIR")]
    pub rerank: Option<PathBuf>,
    /// Passages retrieved for the reranker to choose from (with --rerank).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RERANK_DEPTH, requires = "rerank")]
    pub rerank_depth: usize,
}

impl RerankOptions {
    /// The reranker and its depth, when --rerank is given.
    pub fn load(&self) -> Result<Option<(Reranker, usize)>> {
        let Some(dir) = &self.rerank else {
            return Ok(None);
        };
        if self.rerank_depth == 0 {
            bail!("--rerank-depth must be at least 1");
        }
        let model = CrossEncoder::load(dir)
            .with_context(|| format!("cannot load the reranker at {}", dir.display()))?;
        Ok(Some((Reranker(model), self.rerank_depth)))
    }

    /// The best `k` passages for `query` from `retriever`, reranked from the depth when --rerank
    /// is given (outside a pipeline: `lector search`, `ask --generate`).
    pub fn retrieve(&self, retriever: &dyn Retriever, query: &str, k: usize) -> Result<Vec<Hit>> {
        Ok(match self.load()? {
            Some((reranker, depth)) => {
                let hits = retriever.retrieve(query, k.max(depth))?;
                lector_index::rerank(&reranker, query, hits, k)?
            }
            None => retriever.retrieve(query, k)?,
        })
    }
}

/// `hits` with the first `depth` reordered by `reranker` and the rest after them in retrieval
/// order, so that rankings deeper than the depth stay complete (`lector eval retrieval`).
pub fn rerank_head(
    reranker: &Reranker,
    depth: usize,
    query: &str,
    mut hits: Vec<Hit>,
) -> Result<Vec<Hit>> {
    let tail = hits.split_off(depth.min(hits.len()));
    let mut head = lector_index::rerank(reranker, query, hits, depth)?;
    head.extend(tail);
    Ok(head)
}

/// A cross-encoder as the index's passage scorer.
pub struct Reranker(CrossEncoder);

impl PassageScorer for Reranker {
    fn score(&self, query: &str, passages: &[&str]) -> std::result::Result<Vec<f32>, String> {
        self.0.score(query, passages).map_err(|e| e.to_string())
    }
}

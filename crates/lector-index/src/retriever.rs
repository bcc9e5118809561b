//! The retriever interface shared by BM25, dense and hybrid retrieval.
//!
//! A [`Retriever`] turns a query into ranked [`Hit`]s. Every hit records which retrievers found
//! it, at what rank and with what score ([`Source`]), so a fused hybrid ranking stays explainable.
//! [`fuse`] combines rankings by reciprocal rank fusion or by a weighted sum of min-max-normalised
//! scores; hybrid retrieval is `fuse(&[bm25, dense], ..)`.

use crate::error::Result;
use crate::index::DocumentHit;
use crate::passage::Span;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Which retriever produced a score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrieverKind {
    /// Lexical BM25 over the inverted index.
    Bm25,
    /// Embedding similarity.
    Dense,
    /// BM25 and dense fused.
    Hybrid,
    /// TF-IDF over hashed unigrams and bigrams (DrQA's retriever).
    Tfidf,
    /// A reranker's reordering of another retriever's passages.
    Rerank,
}

/// How a query is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// BM25 alone.
    Bm25,
    /// The dense retriever alone.
    Dense,
    /// BM25 and dense fused.
    Hybrid,
    /// TF-IDF over hashed unigrams and bigrams, DrQA's document retriever (a baseline; the
    /// index must be created with n-gram postings).
    Tfidf,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "bm25" => Ok(Mode::Bm25),
            "dense" => Ok(Mode::Dense),
            "hybrid" => Ok(Mode::Hybrid),
            "tfidf" => Ok(Mode::Tfidf),
            _ => Err(format!("unknown mode `{s}` (bm25, dense, hybrid or tfidf)")),
        }
    }
}

impl Mode {
    /// The mode's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Bm25 => "bm25",
            Mode::Dense => "dense",
            Mode::Hybrid => "hybrid",
            Mode::Tfidf => "tfidf",
        }
    }

    /// Whether the mode embeds queries (and so needs the index's embedder).
    pub fn is_dense(self) -> bool {
        matches!(self, Mode::Dense | Mode::Hybrid)
    }
}

/// One retriever's opinion of a hit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// Which retriever.
    pub retriever: RetrieverKind,
    /// Its 1-based rank for this hit.
    pub rank: usize,
    /// Its raw score.
    pub score: f64,
}

/// A retrieved passage. Deserializable from what it serializes to, so a passage that left lector
/// (a Haystack `Document`) can be read again; `title`, `metadata`, `page`, `section` and
/// `sources` may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The document's id.
    pub doc_id: String,
    /// The document's title.
    #[serde(default)]
    pub title: Option<String>,
    /// The document's metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// The page (1-based) where the passage starts, for documents with pages (PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<usize>,
    /// The headings above the passage's start, for documents with sections (DOCX, Markdown, HTML, PDFs with an outline):
    /// `Installation > Linux`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// Position of the passage in its document (0-based).
    pub passage: usize,
    /// Where the passage lies in the document text.
    pub span: Span,
    /// The passage text (the document text sliced by `span`).
    pub text: String,
    /// The ranking score (the retriever's score, or the fused score).
    pub score: f64,
    /// The retrievers that found this passage.
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// Anything that ranks passages for a query.
pub trait Retriever {
    /// Which kind of retriever this is.
    fn kind(&self) -> RetrieverKind;
    /// The best `k` passages for `query`, best first.
    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>>;
}

/// How rankings are combined.
#[derive(Debug, Clone, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion: Σ 1 / (k + rank); k = 60 in the original paper.
    Rrf {
        /// The rank offset.
        k: f64,
    },
    /// Σ weight · min-max-normalised score, one weight per ranking.
    Weighted(Vec<f64>),
}

/// Fuses rankings of the same passages (matched by document id and passage position) into one
/// of at most `k` hits; a hit keeps the sources of every ranking that found it.
pub fn fuse(rankings: &[Vec<Hit>], fusion: &Fusion, k: usize) -> Vec<Hit> {
    let mut fused: Vec<Hit> = Vec::new();
    let mut slot: HashMap<(String, usize), usize> = HashMap::new();
    for (r, ranking) in rankings.iter().enumerate() {
        let (low, high) = score_range(ranking);
        for (i, hit) in ranking.iter().enumerate() {
            let contribution = match fusion {
                Fusion::Rrf { k } => 1.0 / (k + (i + 1) as f64),
                Fusion::Weighted(weights) => {
                    let w = weights.get(r).copied().unwrap_or(0.0);
                    w * if high > low {
                        (hit.score - low) / (high - low)
                    } else {
                        1.0
                    }
                }
            };
            let key = (hit.doc_id.clone(), hit.passage);
            let at = *slot.entry(key).or_insert_with(|| {
                fused.push(Hit {
                    score: 0.0,
                    sources: Vec::new(),
                    ..hit.clone()
                });
                fused.len() - 1
            });
            fused[at].score += contribution;
            fused[at].sources.extend(hit.sources.iter().copied());
        }
    }
    fused.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.doc_id.cmp(&b.doc_id))
            .then(a.passage.cmp(&b.passage))
    });
    fused.truncate(k);
    fused
}

/// Documents ranked by their best passage (MaxP) among `hits` (best first), at most `k`.
pub fn rank_documents(hits: &[Hit], k: usize) -> Vec<DocumentHit> {
    let mut seen = std::collections::HashSet::new();
    hits.iter()
        .filter(|h| seen.insert(h.doc_id.as_str()))
        .take(k)
        .map(|h| DocumentHit {
            doc_id: h.doc_id.clone(),
            score: h.score,
            best_passage: h.passage,
        })
        .collect()
}

fn score_range(hits: &[Hit]) -> (f64, f64) {
    hits.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), h| {
            (lo.min(h.score), hi.max(h.score))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(doc: &str, score: f64, rank: usize, retriever: RetrieverKind) -> Hit {
        let span = Span {
            byte_start: 0,
            byte_end: 1,
            char_start: 0,
            char_end: 1,
        };
        Hit {
            doc_id: doc.into(),
            title: None,
            metadata: None,
            page: None,
            section: None,
            passage: 0,
            span,
            text: "x".into(),
            score,
            sources: vec![Source {
                retriever,
                rank,
                score,
            }],
        }
    }

    #[test]
    fn rrf_rewards_agreement_and_keeps_sources() {
        let bm25 = vec![
            hit("a", 9.0, 1, RetrieverKind::Bm25),
            hit("b", 5.0, 2, RetrieverKind::Bm25),
        ];
        let dense = vec![
            hit("b", 0.9, 1, RetrieverKind::Dense),
            hit("c", 0.8, 2, RetrieverKind::Dense),
        ];
        let fused = fuse(&[bm25.clone(), dense.clone()], &Fusion::Rrf { k: 60.0 }, 10);
        let ids: Vec<&str> = fused.iter().map(|h| h.doc_id.as_str()).collect();
        assert_eq!(ids, ["b", "a", "c"]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(fused[0].sources.len(), 2);
        let weighted = fuse(&[bm25, dense], &Fusion::Weighted(vec![1.0, 0.0]), 1);
        assert_eq!(weighted[0].doc_id, "a");
    }

    #[test]
    fn documents_are_ranked_by_their_best_passage() {
        let mut second = hit("a", 3.0, 3, RetrieverKind::Dense);
        second.passage = 4;
        let hits = vec![
            hit("a", 9.0, 1, RetrieverKind::Dense),
            hit("b", 5.0, 2, RetrieverKind::Dense),
            second,
            hit("c", 1.0, 4, RetrieverKind::Dense),
        ];
        let docs = rank_documents(&hits, 2);
        let ids: Vec<(&str, usize)> = docs
            .iter()
            .map(|d| (d.doc_id.as_str(), d.best_passage))
            .collect();
        assert_eq!(ids, [("a", 0), ("b", 0)]);
    }
}

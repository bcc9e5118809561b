//! Reranking: a second, slower scorer that reads the query and each retrieved passage together
//! (a cross-encoder) and reorders the retriever's best passages.
//!
//! Retrieve `depth` passages cheaply, score each against the query, keep the best `k`: the
//! retrieve-and-rerank pattern of Haystack's `TransformersSimilarityRanker`. Every kept hit keeps
//! its retrieval sources and gains a [`RetrieverKind::Rerank`] one; its `score` becomes the
//! reranker's.

use crate::embed::passage_text;
use crate::error::{Error, Result};
use crate::retriever::{Hit, RetrieverKind, Source};

/// Passages retrieved for a reranker to choose from, by default (Haystack's usual retriever
/// depth before a ranker).
pub const DEFAULT_RERANK_DEPTH: usize = 20;

/// Scores how well passages answer a query, reading both together.
pub trait PassageScorer: Send + Sync {
    /// One score per passage, in order; higher is better.
    fn score(&self, query: &str, passages: &[&str]) -> std::result::Result<Vec<f32>, String>;
}

/// `hits` reordered by `scorer`, best first, cut to `k`. Passages are scored with their document
/// title in front, as they are embedded. Ties keep the retrieval order.
pub fn rerank(
    scorer: &dyn PassageScorer,
    query: &str,
    hits: Vec<Hit>,
    k: usize,
) -> Result<Vec<Hit>> {
    let texts: Vec<String> = hits
        .iter()
        .map(|h| passage_text(h.title.as_deref(), &h.text))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let scores = scorer.score(query, &refs).map_err(Error::Rerank)?;
    if scores.len() != hits.len() {
        return Err(Error::Rerank(format!(
            "{} scores for {} passages",
            scores.len(),
            hits.len()
        )));
    }
    let mut scored: Vec<(f32, Hit)> = scores.into_iter().zip(hits).collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    Ok(scored
        .into_iter()
        .take(k)
        .enumerate()
        .map(|(i, (score, mut hit))| {
            hit.score = f64::from(score);
            hit.sources.push(Source {
                retriever: RetrieverKind::Rerank,
                rank: i + 1,
                score: hit.score,
            });
            hit
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passage::Span;

    /// Scores a passage by how often the query's first word occurs in it.
    struct CountingScorer;

    impl PassageScorer for CountingScorer {
        fn score(&self, query: &str, passages: &[&str]) -> std::result::Result<Vec<f32>, String> {
            let word = query.split_whitespace().next().unwrap_or("");
            Ok(passages
                .iter()
                .map(|p| p.matches(word).count() as f32)
                .collect())
        }
    }

    fn hit(doc: &str, text: &str) -> Hit {
        Hit {
            doc_id: doc.into(),
            title: None,
            metadata: None,
            page: None,
            section: None,
            passage: 0,
            span: Span {
                byte_start: 0,
                byte_end: text.len(),
                char_start: 0,
                char_end: text.len(),
            },
            text: text.into(),
            score: 1.0,
            sources: vec![Source {
                retriever: RetrieverKind::Bm25,
                rank: 1,
                score: 1.0,
            }],
        }
    }

    #[test]
    fn hits_are_reordered_by_the_scorer_and_cut_to_k() {
        let hits = vec![
            hit("a", "cat"),
            hit("b", "cat cat cat"),
            hit("c", "cat cat"),
        ];
        let out = rerank(&CountingScorer, "cat", hits, 2).unwrap();
        let ids: Vec<&str> = out.iter().map(|h| h.doc_id.as_str()).collect();
        assert_eq!(ids, ["b", "c"]);
        assert_eq!(out[0].score, 3.0);
        let last = out[1].sources.last().unwrap();
        assert_eq!((last.retriever, last.rank), (RetrieverKind::Rerank, 2));
        assert_eq!(out[1].sources[0].retriever, RetrieverKind::Bm25);
    }

    #[test]
    fn a_scorer_that_loses_passages_is_an_error() {
        struct Short;
        impl PassageScorer for Short {
            fn score(&self, _: &str, _: &[&str]) -> std::result::Result<Vec<f32>, String> {
                Ok(vec![1.0])
            }
        }
        let err = rerank(&Short, "q", vec![hit("a", "x"), hit("b", "y")], 2).unwrap_err();
        assert!(err.to_string().contains("1 scores for 2 passages"), "{err}");
    }
}

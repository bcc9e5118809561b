//! What the drift report measures of each logged ask, on its own and against the index.

use super::DriftError;
use crate::AskRecord;
use lector_index::{Embedder, Index, Retriever, DEFAULT_EF};
use lector_pipeline::RetrievalConfig;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The measurements of one ask.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Question length in whitespace-separated words.
    pub words: f64,
    /// (terms outside the index's vocabulary, terms), analysed like the index analyses text;
    /// `None` without an index.
    pub oov: Option<(usize, usize)>,
    /// Whether the server gave no answer (abstained or refused).
    pub abstained: bool,
    /// The logged `confidence` (extractive asks only).
    pub confidence: Option<f64>,
    /// The retrieval score of the first passage read.
    pub top_score: Option<f64>,
    /// Cosine similarity of the question to its nearest indexed passage (dense indexes only).
    pub nearest: Option<f64>,
}

/// The index the questions are measured against, with its embedder when it has vectors.
pub struct Probe {
    index: Index,
    embedder: Option<Arc<dyn Embedder>>,
    in_vocabulary: HashMap<String, bool>,
    nearest: HashMap<String, Option<f64>>,
}

impl Probe {
    /// Opens the index at `dir` and, when it keeps passage vectors, loads its embedder
    /// (`embedder`, else the registry's, as `lector search` does); `notify` hears about
    /// downloads and other slow steps of loading it.
    pub fn open(
        dir: &Path,
        embedder: Option<PathBuf>,
        notify: &dyn Fn(&str),
    ) -> Result<Probe, DriftError> {
        let index = Index::open(dir)?;
        let config = RetrievalConfig {
            embedder,
            ..RetrievalConfig::default()
        };
        let embedder = config.embedder_for(&index, notify)?;
        Ok(Probe {
            index,
            embedder,
            in_vocabulary: HashMap::new(),
            nearest: HashMap::new(),
        })
    }

    /// Whether the index keeps passage vectors (so nearness can be measured).
    pub fn is_dense(&self) -> bool {
        self.embedder.is_some()
    }

    /// (terms of `question` the index has never seen, terms).
    fn oov(&mut self, question: &str) -> (usize, usize) {
        let terms = self.index.analyze(question);
        let index = &self.index;
        let unknown = terms
            .iter()
            .filter(|term| {
                let known = self
                    .in_vocabulary
                    .entry((*term).clone())
                    .or_insert_with(|| index.document_frequency(term) > 0);
                !*known
            })
            .count();
        (unknown, terms.len())
    }

    /// The cosine similarity of the passage nearest to `question` (`None`: no vectors, or an
    /// empty index). Repeated questions are embedded once.
    fn nearest(&mut self, question: &str) -> Result<Option<f64>, DriftError> {
        let Some(embedder) = &self.embedder else {
            return Ok(None);
        };
        if let Some(&known) = self.nearest.get(question) {
            return Ok(known);
        }
        let dense = self
            .index
            .dense(Some(embedder.as_ref()), Some(DEFAULT_EF))?;
        let similarity = dense
            .retrieve(question, 1)
            .map_err(|source| DriftError::Embed {
                question: question.to_string(),
                source,
            })?
            .first()
            .map(|hit| hit.score);
        self.nearest.insert(question.to_string(), similarity);
        Ok(similarity)
    }
}

/// Measures `ask`, against `probe` when there is an index.
pub fn measure(ask: &AskRecord, probe: Option<&mut Probe>) -> Result<Measured, DriftError> {
    let (oov, nearest) = match probe {
        Some(probe) => (
            Some(probe.oov(&ask.question)),
            probe.nearest(&ask.question)?,
        ),
        None => (None, None),
    };
    Ok(Measured {
        words: ask.question.split_whitespace().count() as f64,
        oov,
        abstained: ask.answer.is_none(),
        confidence: ask.confidence,
        top_score: ask.passages.first().map(|p| p.score),
        nearest,
    })
}

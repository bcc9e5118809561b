//! Hard negatives for open-domain training (`--negatives-from INDEX`): for each answerable
//! question, the passages BM25 ranks highest for it that do not contain its answer. They are the
//! distractors the reader meets after retrieval; trained to point at [CLS] there (and, with shared
//! normalisation, to score below the answer passage), it learns to compare passages.

use crate::error::Result;
use crate::examples::Example;
use lector_index::{Bm25Params, Index};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

/// Where negatives come from and how many.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Negatives {
    pub index: PathBuf,
    /// Negatives kept per question.
    pub per_question: usize,
    /// Passages retrieved per question to find them in.
    pub depth: usize,
}

/// `examples` with each answerable question followed by its negatives (same group, no answer).
pub fn add_negatives(
    examples: Vec<Example>,
    negatives: &Negatives,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<Example>> {
    use lector_index::retriever::Retriever;
    let index = Index::open(&negatives.index)?;
    let bm25 = index.bm25(Bm25Params::default());
    let total = examples.len();
    let mut out = Vec::with_capacity(examples.len() * (1 + negatives.per_question));
    for (done, example) in examples.into_iter().enumerate() {
        let answer = example
            .answer
            .map(|a| example.context[a.start..a.end].to_lowercase());
        let found = match &answer {
            Some(answer) => bm25
                .retrieve(&example.question, negatives.depth)?
                .into_iter()
                .filter(|hit| !hit.text.to_lowercase().contains(answer.as_str()))
                .filter(|hit| !example.context.contains(hit.text.as_str()))
                .take(negatives.per_question)
                .collect(),
            None => Vec::new(),
        };
        let negative = |(i, hit): (usize, lector_index::retriever::Hit)| Example {
            id: format!("{}#negative{i}", example.id),
            question: example.question.clone(),
            context: Arc::from(hit.text),
            answer: None,
            weight: example.weight,
            group: example.group,
        };
        let extra: Vec<Example> = found.into_iter().enumerate().map(negative).collect();
        out.push(example);
        out.extend(extra);
        if done % 256 == 0 {
            progress(done, total);
        }
    }
    Ok(out)
}

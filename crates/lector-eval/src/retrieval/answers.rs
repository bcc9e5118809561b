//! DPR-style answer-containment recall for open-domain QA retrieval.

use crate::error::Result;
use crate::input::read_jsonl;
use crate::normalize::normalized_tokens;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// One question with its gold answers and its retrieved passages, best first.
///
/// JSONL form: `{"qid": "q1", "answers": ["..."], "passages": [{"id": "p1", "text": "..."}]}`;
/// `qid` and passage `id` may be strings or integers; other fields are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerItem {
    /// The question id.
    #[serde(deserialize_with = "string_or_integer")]
    pub qid: String,
    /// The acceptable answers.
    pub answers: Vec<String>,
    /// The retrieved passages, ranked best first.
    pub passages: Vec<Passage>,
}

/// A retrieved passage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Passage {
    /// The passage id.
    #[serde(deserialize_with = "string_or_integer")]
    pub id: String,
    /// The passage text.
    pub text: String,
}

/// The outcome for one question.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AnswerQuery {
    /// The question id.
    pub qid: String,
    /// 1-based rank of the first passage containing an answer, over all its passages.
    pub first_hit: Option<usize>,
    /// How many passages were retrieved.
    pub num_passages: usize,
}

impl AnswerQuery {
    /// Whether an answer occurs in the top `k` passages.
    pub fn hit_at(&self, k: usize) -> bool {
        self.first_hit.is_some_and(|r| r <= k)
    }

    /// 1 / rank of the first hit, 0 without a hit.
    pub fn reciprocal_rank(&self) -> f64 {
        self.first_hit.map_or(0.0, |r| 1.0 / r as f64)
    }
}

/// The result of [`answer_recall`].
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerRecall {
    /// Per-question outcomes, in input order.
    pub queries: Vec<AnswerQuery>,
    /// `recall[k - 1]` is Recall@k (fraction of questions with a hit in the top k), k = 1..=max_k.
    pub recall: Vec<f64>,
    /// Mean reciprocal rank of the first hit (0 for a question without a hit).
    pub mrr: f64,
}

impl AnswerRecall {
    /// Recall@k, or `None` when `k` is 0 or beyond the computed curve.
    pub fn recall_at(&self, k: usize) -> Option<f64> {
        k.checked_sub(1).and_then(|i| self.recall.get(i).copied())
    }
}

/// Reads answer-containment items from a JSONL file (one [`AnswerItem`] per non-blank line).
pub fn read_answer_items(path: &Path) -> Result<Vec<AnswerItem>> {
    read_jsonl(path)
}

/// Whether `text` contains one of `answers` as a contiguous sequence of whole tokens, both sides
/// normalised like SQuAD (lowercase, no punctuation, no articles). Answers that normalise to
/// nothing never match.
pub fn contains_answer(answers: &[String], text: &str) -> bool {
    let answers: Vec<Vec<String>> = answers
        .iter()
        .map(|a| normalized_tokens(a))
        .filter(|t| !t.is_empty())
        .collect();
    has_any(&answers, &normalized_tokens(text))
}

fn has_any(answers: &[Vec<String>], tokens: &[String]) -> bool {
    answers
        .iter()
        .any(|answer| tokens.windows(answer.len()).any(|w| w == answer.as_slice()))
}

/// Answer-containment recall: for each question, the rank of the first passage that contains a
/// gold answer (see [`contains_answer`]); Recall@k for k = 1..=`max_k` and MRR over all
/// questions. Every question counts in the denominator, including questions without passages or
/// without a usable answer. With no question, recall and MRR are 0.
pub fn answer_recall(items: &[AnswerItem], max_k: usize) -> AnswerRecall {
    let queries: Vec<AnswerQuery> = items
        .iter()
        .map(|item| {
            let answers: Vec<Vec<String>> = item
                .answers
                .iter()
                .map(|a| normalized_tokens(a))
                .filter(|t| !t.is_empty())
                .collect();
            let first_hit = if answers.is_empty() {
                None
            } else {
                item.passages
                    .iter()
                    .position(|p| has_any(&answers, &normalized_tokens(&p.text)))
                    .map(|i| i + 1)
            };
            AnswerQuery {
                qid: item.qid.clone(),
                first_hit,
                num_passages: item.passages.len(),
            }
        })
        .collect();
    let n = queries.len();
    let mean = |sum: f64| if n == 0 { 0.0 } else { sum / n as f64 };
    let mut hits_at_rank = vec![0usize; max_k + 1];
    for q in &queries {
        if let Some(r) = q.first_hit.filter(|&r| r <= max_k) {
            hits_at_rank[r] += 1;
        }
    }
    let mut cumulative = 0;
    let recall = (1..=max_k)
        .map(|k| {
            cumulative += hits_at_rank[k];
            mean(cumulative as f64)
        })
        .collect();
    let mrr = mean(queries.iter().map(AnswerQuery::reciprocal_rank).sum());
    AnswerRecall {
        queries,
        recall,
        mrr,
    }
}

fn string_or_integer<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    struct IdVisitor;
    impl Visitor<'_> for IdVisitor {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string or an integer")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<String, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<String, E> {
            Ok(v.to_string())
        }
    }
    d.deserialize_any(IdVisitor)
}

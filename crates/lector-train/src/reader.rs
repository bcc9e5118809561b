//! `lector train reader`: an extractive reader fine-tuned on SQuAD-format questions.

use crate::error::{Error, Result};
use crate::examples::TrainFile;
use crate::features::{build_features, Feature, Tokenization, WindowParams};
use crate::loss::{shared_norm_loss, span_loss, Groups, Targets};
use crate::model::{Batch, Network};
use crate::negatives::Negatives;
use crate::rng::Rng;
use crate::save::DevScores;
use crate::train::{
    prepare_out, training_examples, DevEval, Event, Objective, Outcome, Schedule, Trainer,
};
use candle_core::{Device, Tensor};
use lector_eval::squad;
use lector_reader::{Query, ReadParams, Reader};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Everything that defines a reader training run. Saved as `run.json` in the output directory,
/// which is how `--resume` continues the same run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReaderRun {
    /// The checkpoint to start from (a reader, or a bare encoder: a fresh head is drawn).
    pub model: PathBuf,
    pub train: Vec<TrainFile>,
    /// A SQuAD file evaluated after every epoch; the best checkpoint is kept in `best/`.
    pub dev: Option<PathBuf>,
    pub windows: WindowParams,
    /// Shared normalisation over each question's windows (see [`crate::loss::Groups`]).
    pub shared_norm: bool,
    /// Hard negative passages retrieved from an index.
    pub negatives: Option<Negatives>,
    pub schedule: Schedule,
}

impl ReaderRun {
    /// A run with [`Schedule::default`] and the reader's window geometry.
    pub fn new(model: PathBuf, train: Vec<TrainFile>) -> Self {
        Self {
            model,
            train,
            dev: None,
            windows: WindowParams::default(),
            shared_norm: false,
            negatives: None,
            schedule: Schedule::default(),
        }
    }
}

/// Trains a reader into `out`. A fresh run refuses a directory that already holds one; with
/// `resume`, the run continues from the last checkpoint in `out`.
pub fn train_reader(
    run: &ReaderRun,
    out: &Path,
    resume: bool,
    events: &mut dyn FnMut(Event),
) -> Result<Outcome> {
    run.schedule.check()?;
    if run.train.is_empty() {
        return Err(Error::Params("no training file given".into()));
    }
    prepare_out(run, out, resume)?;
    let net = Network::load(&run.model, run.schedule.seed)?;
    let tokenizer = lector_models::checkpoint::load_tokenizer(&run.model.join("tokenizer.json"))?;
    let cls_token_id =
        lector_models::checkpoint::cls_token_id(&run.model, &tokenizer).ok_or_else(|| {
            Error::Checkpoint {
                path: run.model.clone(),
                message: "the tokenizer has no [CLS] token (needed for the no-answer target)"
                    .into(),
            }
        })?;
    let examples = training_examples(&run.train, run.negatives.as_ref(), out, resume, events)?;
    let tok = Tokenization {
        tokenizer: &tokenizer,
        cls_token_id,
    };
    let total = examples.len();
    let features = build_features(&examples, &tok, &run.windows, &mut |done| {
        events(Event::Preparing { done, total })
    })?;
    drop(examples);
    let objective = ReaderObjective {
        units: units(&features, run.shared_norm),
        features,
        shared_norm: run.shared_norm,
    };
    let windows = run.windows;
    let score = move |dir: &Path, dev: &Path, epoch: usize, step: usize| {
        score_dev(dir, dev, &windows, epoch, step)
    };
    let trainer = Trainer {
        schedule: &run.schedule,
        out,
        source: &run.model,
        net,
        objective: &objective,
        dev: run.dev.as_deref().map(|file| DevEval {
            file,
            score: &score,
        }),
    };
    trainer.run(resume, events)
}

struct ReaderObjective {
    features: Vec<Feature>,
    /// Single windows, or each question's windows together (for shared normalisation).
    units: Vec<Vec<u32>>,
    shared_norm: bool,
}

impl Objective for ReaderObjective {
    fn units(&self) -> &[Vec<u32>] {
        &self.units
    }

    fn loss(
        &self,
        net: &Network,
        items: &[u32],
        dropout: Option<&mut Rng>,
    ) -> Result<(Tensor, usize)> {
        let feats: Vec<&Feature> = items.iter().map(|&f| &self.features[f as usize]).collect();
        let rows: Vec<(&[u32], &[u32])> = feats
            .iter()
            .map(|f| (f.ids.as_slice(), f.type_ids.as_slice()))
            .collect();
        let batch = Batch::new(&rows, &net.config)?;
        let targets = Targets::new(
            feats.iter().map(|f| f.start).collect(),
            feats.iter().map(|f| f.end).collect(),
            feats.iter().map(|f| f.weight).collect(),
        )?;
        let (start, end) = net.forward(&batch, dropout)?;
        let mut loss = span_loss(&start, &end, &batch, &targets)?;
        if self.shared_norm {
            loss = (loss + shared_norm_loss(&start, &end, &groups(&feats, batch.seq_len)?)?)?;
        }
        Ok((loss, feats.len()))
    }
}

/// The shared-normalisation groups of a batch whose windows come question by question.
fn groups(feats: &[&Feature], seq_len: usize) -> Result<Groups> {
    let mut groups = Groups {
        all: Vec::new(),
        gold_starts: Vec::new(),
        gold_ends: Vec::new(),
        cls: Tensor::from_vec(
            feats.iter().map(|f| f.cls).collect::<Vec<u32>>(),
            (feats.len(), 1),
            &Device::Cpu,
        )?,
    };
    let index = |v: Vec<u32>| Tensor::from_vec(v.clone(), v.len(), &Device::Cpu);
    let mut row = 0;
    while row < feats.len() {
        let question = feats[row].question;
        let end = (row..feats.len())
            .find(|&r| feats[r].question != question)
            .unwrap_or(feats.len());
        let flat = |r: usize, p: u32| (r * seq_len) as u32 + p;
        let answered: Vec<usize> = (row..end).filter(|&r| feats[r].has_answer()).collect();
        if !answered.is_empty() {
            let all: Vec<u32> = (row..end)
                .flat_map(|r| feats[r].context.clone().map(move |p| flat(r, p)))
                .collect();
            groups.all.push(index(all)?);
            groups.gold_starts.push(index(
                answered.iter().map(|&r| flat(r, feats[r].start)).collect(),
            )?);
            groups.gold_ends.push(index(
                answered.iter().map(|&r| flat(r, feats[r].end)).collect(),
            )?);
        }
        row = end;
    }
    Ok(groups)
}

/// Single windows, or each question's windows together (for shared normalisation).
fn units(features: &[Feature], by_question: bool) -> Vec<Vec<u32>> {
    if !by_question {
        return (0..features.len() as u32).map(|f| vec![f]).collect();
    }
    let mut units: Vec<Vec<u32>> = Vec::new();
    for (i, f) in features.iter().enumerate() {
        match units.last_mut() {
            Some(unit) if features[unit[0] as usize].question == f.question => unit.push(i as u32),
            _ => units.push(vec![i as u32]),
        }
    }
    units
}

/// Reads `dev` with the reader saved in `dir` and scores it as the official scripts do.
fn score_dev(
    dir: &Path,
    dev: &Path,
    windows: &WindowParams,
    epoch: usize,
    step: usize,
) -> Result<DevScores> {
    let reader = Reader::load(dir)?;
    let dataset = squad::read_dataset(dev)?;
    let queries: Vec<Query> = dataset
        .questions
        .iter()
        .map(|q| Query {
            question: &q.question,
            context: &q.context,
        })
        .collect();
    let params = ReadParams {
        max_seq_len: windows.max_seq_len,
        doc_stride: windows.doc_stride,
        max_question_len: windows.max_question_len,
        ..ReadParams::default()
    };
    let predictions = reader.answer_batch(&queries, &params, &mut |_| {})?;
    let ids = dataset.questions.iter().map(|q| q.id.clone());
    let answers: squad::Predictions = ids
        .clone()
        .zip(&predictions)
        .map(|(id, p)| {
            (
                id,
                p.answers
                    .first()
                    .map(|a| a.answer.clone())
                    .unwrap_or_default(),
            )
        })
        .collect();
    let na_probs: squad::NaProbs = ids
        .zip(&predictions)
        .map(|(id, p)| (id, p.na_prob))
        .collect();
    let v2 = dataset.version == squad::SquadVersion::V2_0;
    let no_answer = squad::NoAnswer {
        probs: v2.then_some(&na_probs),
        threshold: 1.0,
    };
    let summary = squad::evaluate(&dataset, &answers, &no_answer)?.summary;
    let get = |key: &str| summary.get(key).and_then(|v| v.as_f64());
    Ok(DevScores {
        epoch,
        step,
        exact: get("exact").unwrap_or(0.0),
        f1: get("f1").unwrap_or(0.0),
        best_f1: get("best_f1"),
        best_f1_thresh: get("best_f1_thresh"),
    })
}

//! Training windows: each question cut into the windows the reader builds at inference
//! (`lector_reader::window::question_windows`), each with its target. A window that does not hold
//! the whole answer, and every window of an unanswerable question, targets [CLS] (as the
//! transformers question-answering examples do).

use crate::error::{Error, Result};
use crate::examples::{AnswerBytes, Example};
use lector_reader::window::{question_windows, Window};
use lector_reader::ReadParams;
use std::ops::Range;
use std::sync::Arc;
use tokenizers::{Encoding, Tokenizer};

/// Window geometry, as the reader's (see [`ReadParams`]).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct WindowParams {
    pub max_seq_len: usize,
    pub doc_stride: usize,
    pub max_question_len: usize,
}

impl Default for WindowParams {
    fn default() -> Self {
        let read = ReadParams::default();
        Self {
            max_seq_len: read.max_seq_len,
            doc_stride: read.doc_stride,
            max_question_len: read.max_question_len,
        }
    }
}

impl WindowParams {
    fn read_params(&self) -> ReadParams {
        ReadParams {
            max_seq_len: self.max_seq_len,
            doc_stride: self.doc_stride,
            max_question_len: self.max_question_len,
            ..ReadParams::default()
        }
    }
}

/// One model input with its target.
#[derive(Debug, Clone)]
pub struct Feature {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// Target start and end positions in `ids` (both the [CLS] position for "no answer here").
    pub start: u32,
    pub end: u32,
    /// Position of [CLS], which carries the no-answer score.
    pub cls: u32,
    /// Positions of the context tokens.
    pub context: Range<u32>,
    pub weight: f32,
    /// The question this window belongs to ([`Example::group`]).
    pub question: u32,
}

impl Feature {
    pub fn has_answer(&self) -> bool {
        self.start != self.cls
    }
}

/// The tokenizer and [CLS] id of the model being trained.
pub struct Tokenization<'a> {
    pub tokenizer: &'a Tokenizer,
    pub cls_token_id: u32,
}

/// The windows of every example, in example order.
pub fn build_features(
    examples: &[Example],
    tok: &Tokenization,
    params: &WindowParams,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Feature>> {
    let read = params.read_params();
    let mut features = Vec::new();
    let mut cached: Option<(Arc<str>, Encoding)> = None;
    for (done, example) in examples.iter().enumerate() {
        if !matches!(&cached, Some((text, _)) if Arc::ptr_eq(text, &example.context)) {
            let encoding = tok
                .tokenizer
                .encode(&*example.context, false)
                .map_err(|e| Error::Params(format!("tokenizing `{}`: {e}", example.id)))?;
            cached = Some((Arc::clone(&example.context), encoding));
        }
        let context = &cached.as_ref().expect("encoded above").1;
        let (windows, _) = question_windows(
            tok.tokenizer,
            Some(tok.cls_token_id),
            &example.question,
            context,
            &read,
        )?;
        let span = example.answer.and_then(|a| answer_tokens(context, a));
        for window in windows {
            features.push(feature(window, span, tok.cls_token_id, example)?);
        }
        if done % 256 == 0 {
            progress(done);
        }
    }
    progress(examples.len());
    Ok(features)
}

/// First and last context tokens of the answer (inclusive), if any token overlaps it.
fn answer_tokens(context: &Encoding, answer: AnswerBytes) -> Option<(usize, usize)> {
    let offsets = context.get_offsets();
    let first = offsets.iter().position(|&(_, end)| end > answer.start)?;
    let last = offsets.iter().rposition(|&(start, _)| start < answer.end)?;
    (first <= last).then_some((first, last))
}

fn feature(
    window: Window,
    span: Option<(usize, usize)>,
    cls_token_id: u32,
    example: &Example,
) -> Result<Feature> {
    let cls = window
        .ids
        .iter()
        .position(|&id| id == cls_token_id)
        .ok_or_else(|| Error::Params("the tokenizer's post-processor adds no [CLS] token".into()))?
        as u32;
    let inside = |(first, last): (usize, usize)| {
        let r = &window.context_tokens;
        (first >= r.start && last < r.end).then(|| {
            let at = |t: usize| (window.first_context_pos + t - r.start) as u32;
            (at(first), at(last))
        })
    };
    let (start, end) = span.and_then(inside).unwrap_or((cls, cls));
    let first = window.first_context_pos as u32;
    Ok(Feature {
        context: first..first + window.context_tokens.len() as u32,
        ids: window.ids,
        type_ids: window.type_ids,
        start,
        end,
        cls,
        weight: example.weight,
        question: example.group as u32,
    })
}

//! Running a chunk of queries: tokenize, cut windows, run windows sorted by length in padded
//! batches (the encoder skips the padding; sorted windows keep the padded inputs small), then
//! decode each query's windows in order.

use crate::answer::{merge, null_answer, rank, Answer, EncodedContext};
use crate::decode::{masked_softmax, score_window};
use crate::error::{Error, Result};
use crate::window::{question_windows, Window};
use crate::{Prediction, Query, ReadParams, MAX_CONTEXT_BYTES};
use lector_models::{Checkpoint, Inputs, QaModel};
use std::rc::Rc;

/// A query ready to run: its context and its windows (indices into the chunk's window list).
struct Prepared<'a> {
    context: Rc<EncodedContext<'a>>,
    windows: std::ops::Range<usize>,
    question_truncated: bool,
}

/// Start and end logits of one window, padding removed.
type WindowLogits = (Vec<f32>, Vec<f32>);

/// The models a reader runs.
pub(crate) struct Models<'a> {
    pub checkpoint: &'a Checkpoint,
    /// A float32 copy of the checkpoint's model when that one runs in bfloat16.
    pub float32: Option<&'a QaModel>,
}

impl Models<'_> {
    /// The model whose numbers are the reference: float32 when there is a copy.
    fn exact(&self) -> &QaModel {
        self.float32.unwrap_or(&self.checkpoint.model)
    }
}

pub(crate) fn answer_chunk(
    models: &Models,
    queries: &[Query],
    params: &ReadParams,
) -> Result<Vec<Prediction>> {
    let ckpt = models.checkpoint;
    let mut windows = Vec::new();
    let mut prepared: Vec<Prepared> = Vec::with_capacity(queries.len());
    for query in queries {
        let previous = prepared.last().map(|p| Rc::clone(&p.context));
        let context = match previous {
            Some(ctx) if ctx.text == query.context => ctx,
            _ => Rc::new(encode_context(ckpt, query.context)?),
        };
        let first = windows.len();
        let question_truncated =
            push_windows(ckpt, query.question, &context, params, &mut windows)?;
        prepared.push(Prepared {
            context,
            windows: first..windows.len(),
            question_truncated,
        });
    }
    let pad = ckpt.config.pad_token_id;
    let every: Vec<usize> = (0..windows.len()).collect();
    let mut logits = run_windows(&ckpt.model, pad, &windows, &every, params.batch_size)?;
    let mut decoded: Vec<(Prediction, f64)> = prepared
        .iter()
        .map(|p| decode_query(p, &windows, &logits, params))
        .collect();
    if let Some(float32) = models.float32 {
        // Near-ties are where bfloat16 rounding can swap two answers: read those again exactly.
        let unsure: Vec<usize> = (0..decoded.len())
            .filter(|&q| decoded[q].1 < params.recheck_margin)
            .collect();
        let again: Vec<usize> = unsure
            .iter()
            .flat_map(|&q| prepared[q].windows.clone())
            .collect();
        let exact = run_windows(float32, pad, &windows, &again, params.batch_size)?;
        for (i, window_logits) in again.into_iter().zip(exact) {
            logits[i] = window_logits;
        }
        for q in unsure {
            decoded[q] = decode_query(&prepared[q], &windows, &logits, params);
        }
    }
    Ok(decoded
        .into_iter()
        .map(|(prediction, _)| prediction)
        .collect())
}

/// One context token of a window with its start and end probabilities.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TokenProbability {
    /// Character offsets of the token in the context (`start..end`).
    pub start: usize,
    pub end: usize,
    /// Probability that the answer starts at this token.
    pub p_start: f32,
    /// Probability that the answer ends at this token.
    pub p_end: f32,
}

/// The probabilities of one window over its context tokens.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WindowProbabilities {
    /// The window's context tokens, in order.
    pub tokens: Vec<TokenProbability>,
    /// `p_start[CLS] * p_end[CLS]`.
    pub null_score: f32,
}

/// The masked start/end softmax of every window of one query (see
/// [`crate::Reader::token_probabilities`]).
pub(crate) fn token_probabilities(
    models: &Models,
    query: Query,
    params: &ReadParams,
) -> Result<Vec<WindowProbabilities>> {
    let ckpt = models.checkpoint;
    let context = encode_context(ckpt, query.context)?;
    let mut windows = Vec::new();
    push_windows(ckpt, query.question, &context, params, &mut windows)?;
    let every: Vec<usize> = (0..windows.len()).collect();
    let pad = ckpt.config.pad_token_id;
    let logits = run_windows(models.exact(), pad, &windows, &every, params.batch_size)?;
    let offsets = context.encoding.get_offsets();
    Ok(windows
        .iter()
        .zip(&logits)
        .map(|(window, (start, end))| {
            let p_start = masked_softmax(start, &window.desired);
            let p_end = masked_softmax(end, &window.desired);
            let tokens = (0..window.ids.len())
                .filter_map(|pos| {
                    let token = window.context_token(pos)?;
                    let (from, to) = offsets[token];
                    Some(TokenProbability {
                        start: context.char_offset(from),
                        end: context.char_offset(to),
                        p_start: p_start[pos],
                        p_end: p_end[pos],
                    })
                })
                .collect();
            WindowProbabilities {
                tokens,
                null_score: p_start[0] * p_end[0],
            }
        })
        .collect())
}

fn encode_context<'a>(ckpt: &Checkpoint, context: &'a str) -> Result<EncodedContext<'a>> {
    if context.trim().is_empty() {
        return Err(Error::EmptyContext);
    }
    if context.len() > MAX_CONTEXT_BYTES {
        return Err(Error::ContextTooLong(context.len()));
    }
    let encoding = ckpt
        .tokenizer
        .encode(context, false)
        .map_err(|e| Error::Tokenizer(e.to_string()))?;
    Ok(EncodedContext::new(context, encoding))
}

/// Appends the windows of one query; returns whether the question was truncated.
fn push_windows(
    ckpt: &Checkpoint,
    question: &str,
    context: &EncodedContext,
    params: &ReadParams,
    windows: &mut Vec<Window>,
) -> Result<bool> {
    let (question_windows, truncated) = question_windows(
        &ckpt.tokenizer,
        ckpt.cls_token_id,
        question,
        &context.encoding,
        params,
    )?;
    windows.extend(question_windows);
    Ok(truncated)
}

/// Padded tokens per forward pass at most: a few parts per thread for the encoder (see
/// `lector_models`' encoder), while bounding the activations held at once.
const MAX_BATCH_TOKENS: usize = 4096;

/// Runs the `selected` windows through `model`, longest first, at most `batch_size` at a time;
/// their logits come back in the order of `selected`.
fn run_windows(
    model: &QaModel,
    pad_id: u32,
    windows: &[Window],
    selected: &[usize],
    batch_size: usize,
) -> Result<Vec<WindowLogits>> {
    let mut order: Vec<usize> = (0..selected.len()).collect();
    order.sort_by_key(|&s| std::cmp::Reverse(windows[selected[s]].ids.len()));
    let chosen: Vec<&Window> = selected.iter().map(|&i| &windows[i]).collect();
    let mut logits = vec![(Vec::new(), Vec::new()); selected.len()];
    for group in groups(&order, &chosen, batch_size) {
        let inputs = pad_batch(group.iter().map(|&s| chosen[s]), pad_id);
        let out = model.forward(&inputs)?;
        for (row, &s) in group.iter().enumerate() {
            let (start, end) = out.row(row);
            let len = chosen[s].ids.len();
            logits[s] = (start[..len].to_vec(), end[..len].to_vec());
        }
    }
    Ok(logits)
}

/// Consecutive runs of `order` (longest first) with at most `batch_size` windows and
/// [`MAX_BATCH_TOKENS`] padded tokens (a single window may exceed it).
fn groups<'o>(order: &'o [usize], windows: &[&Window], batch_size: usize) -> Vec<&'o [usize]> {
    let mut groups = Vec::new();
    let mut rest = order;
    while let Some(&first) = rest.first() {
        let longest = windows[first].ids.len().max(1);
        let n = (MAX_BATCH_TOKENS / longest)
            .clamp(1, batch_size)
            .min(rest.len());
        let (group, tail) = rest.split_at(n);
        groups.push(group);
        rest = tail;
    }
    groups
}

/// Right-pads windows to the longest one, as a batch of the pipeline's inputs would be.
fn pad_batch<'w>(windows: impl Iterator<Item = &'w Window> + Clone, pad_id: u32) -> Inputs {
    let seq_len = windows.clone().map(|w| w.ids.len()).max().unwrap_or(0);
    let mut inputs = Inputs {
        seq_len,
        ..Inputs::default()
    };
    for w in windows {
        let pad = seq_len - w.ids.len();
        inputs.ids.extend(
            w.ids
                .iter()
                .copied()
                .chain(std::iter::repeat_n(pad_id, pad)),
        );
        inputs.type_ids.extend(
            w.type_ids
                .iter()
                .copied()
                .chain(std::iter::repeat_n(0, pad)),
        );
        inputs
            .mask
            .extend(std::iter::repeat_n(1, w.ids.len()).chain(std::iter::repeat_n(0, pad)));
        inputs.batch += 1;
    }
    inputs
}

/// The pipeline's `postprocess` for one question, and how close its ranking came to a tie
/// (see [`closest_call`]).
fn decode_query(
    p: &Prepared,
    windows: &[Window],
    logits: &[WindowLogits],
    params: &ReadParams,
) -> (Prediction, f64) {
    // The pipeline keeps `top_k * 2 + 10` candidates per window before aligning to words.
    let per_window = params.top_k * 2 + 10;
    let mut answers: Vec<Answer> = Vec::new();
    let mut null = f64::INFINITY;
    for i in p.windows.clone() {
        let (start, end) = &logits[i];
        let scores = score_window(
            start,
            end,
            &windows[i].desired,
            per_window,
            params.max_answer_len,
        );
        null = null.min(f64::from(scores.null_score));
        for span in &scores.spans {
            if let Some(answer) = p.context.answer_for(&windows[i], span) {
                merge(&mut answers, answer);
            }
        }
    }
    finish(answers, null, p.question_truncated, params)
}

fn finish(
    mut answers: Vec<Answer>,
    null: f64,
    question_truncated: bool,
    params: &ReadParams,
) -> (Prediction, f64) {
    let best = answers.iter().map(|a| a.score).fold(0.0, f64::max);
    let na_prob = if null + best > 0.0 {
        null / (null + best)
    } else {
        1.0
    };
    if params.handle_impossible_answer {
        answers.push(null_answer(null));
    }
    rank(&mut answers);
    let closest = closest_call(&answers[..answers.len().min(params.top_k + 1)]);
    answers.truncate(params.top_k);
    let prediction = Prediction {
        answers,
        null_score: null,
        na_prob,
        question_truncated,
    };
    (prediction, closest)
}

/// The smallest `ln(a / b)` between neighbours of the ranked `answers` (infinite for fewer than
/// two): how little it would take to change what is returned.
fn closest_call(answers: &[Answer]) -> f64 {
    let ratio = |a: f64, b: f64| match (a > 0.0, b > 0.0) {
        (_, true) => (a / b).ln(),
        (true, false) => f64::INFINITY,
        (false, false) => 0.0,
    };
    answers
        .windows(2)
        .map(|pair| ratio(pair[0].score, pair[1].score))
        .fold(f64::INFINITY, f64::min)
}

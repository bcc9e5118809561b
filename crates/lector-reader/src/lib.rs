//! lector-reader: extractive question answering that gives the same answers as the Hugging Face
//! `question-answering` pipeline (transformers 4.57), batched across windows and questions.
//!
//! ```no_run
//! # fn main() -> Result<(), lector_reader::Error> {
//! let reader = lector_reader::Reader::load(std::path::Path::new("models/reader-minilm-squad"))?;
//! let params = lector_reader::ReadParams::default();
//! let prediction = reader.answer("Who wrote it?", "It was written by Ada.", &params)?;
//! println!("{}", prediction.answers[0].answer);
//! # Ok(()) }
//! ```
//!
//! ## No-answer probability
//! [`Prediction::na_prob`] is `null / (null + best)`, where `null` is the pipeline's null score
//! (the minimum over windows of `p_start[CLS] * p_end[CLS]`) and `best` the score of the best
//! span answer (after merging equal answers). It lies in [0, 1], grows as abstaining becomes more
//! likely, and is 1 when no span exists. The pipeline itself abstains (with
//! `handle_impossible_answer`) exactly when `null > best`, i.e. when `na_prob > 0.5`; a threshold
//! tuned on held-out data (`lector eval squad --na-prob-file`) usually does better.

pub mod answer;
mod batch;
pub mod decode;
pub mod error;
pub mod window;

pub use answer::Answer;
pub use batch::{TokenProbability, WindowProbabilities};
pub use error::{Error, Result};
use lector_models::{Checkpoint, Precision, QaModel};
use std::path::Path;

/// Contexts above this size are refused rather than silently taking minutes: 1 MiB of English is
/// about 250,000 tokens, some 2,000 windows (tens of seconds on two cores). Split larger texts.
pub const MAX_CONTEXT_BYTES: usize = 1 << 20;

/// [`ReadParams::recheck_margin`]'s default: about the 99th percentile of how far bfloat16
/// moves the gap between a question's two best answers, and twice the widest gap it swapped
/// (measured on SQuAD *train* questions, see the README).
pub const DEFAULT_RECHECK_MARGIN: f64 = 0.07;

/// Reading parameters; the defaults are the pipeline's.
#[derive(Debug, Clone)]
pub struct ReadParams {
    /// Tokens per model input (question + context window + special tokens).
    pub max_seq_len: usize,
    /// Tokens shared by consecutive windows of a long context.
    pub doc_stride: usize,
    /// Longer questions are truncated to this many tokens (see [`Prediction::question_truncated`]).
    pub max_question_len: usize,
    /// Longest answer, in tokens.
    pub max_answer_len: usize,
    /// Answers to return per question.
    pub top_k: usize,
    /// Append the no-answer answer (empty text, the null score) before ranking.
    pub handle_impossible_answer: bool,
    /// Windows per forward pass.
    pub batch_size: usize,
    /// With bfloat16 or int8 products ([`lector_models::active_precision`]): a question whose ranked answers
    /// (the first `top_k + 1`, the no-answer one included) have two scores within this factor
    /// of each other, as a natural log (`ln(a / b) < margin`), is read again in float32 and
    /// answered from that reading. Such near-ties are where rounding can swap two answers. 0
    /// never re-reads; float32 models ignore it.
    pub recheck_margin: f64,
}

/// The most answers [`ReadParams::top_k`] may ask for.
pub const MAX_TOP_K: usize = 1000;

/// The most windows [`ReadParams::batch_size`] may put in one forward pass.
pub const MAX_BATCH_SIZE: usize = 1024;

/// The longest [`ReadParams::max_seq_len`] (no checkpoint lector reads has more positions).
pub const MAX_SEQ_LEN: usize = 4096;

impl ReadParams {
    /// Checks each parameter against its bounds, naming the first one out of them: every face
    /// (CLI, server, Python) is checked here.
    pub fn validate(&self) -> Result<()> {
        let bounded = [
            ("max_seq_len", self.max_seq_len, 1, MAX_SEQ_LEN),
            ("max_answer_len", self.max_answer_len, 1, MAX_SEQ_LEN),
            ("max_question_len", self.max_question_len, 0, MAX_SEQ_LEN),
            ("doc_stride", self.doc_stride, 0, MAX_SEQ_LEN),
            ("top_k", self.top_k, 1, MAX_TOP_K),
            ("batch_size", self.batch_size, 1, MAX_BATCH_SIZE),
        ];
        if let Some((name, value, low, high)) = bounded
            .iter()
            .find(|(_, value, low, high)| !(low..=high).contains(&value))
        {
            return Err(Error::Params(format!(
                "{name} must be between {low} and {high}, not {value}"
            )));
        }
        if self.recheck_margin.is_nan() || self.recheck_margin < 0.0 {
            return Err(Error::Params(format!(
                "recheck_margin must be 0 or more, not {}",
                self.recheck_margin
            )));
        }
        Ok(())
    }
}

impl Default for ReadParams {
    fn default() -> Self {
        Self {
            max_seq_len: 384,
            doc_stride: 128,
            max_question_len: 64,
            max_answer_len: 15,
            top_k: 1,
            handle_impossible_answer: false,
            batch_size: 32,
            recheck_margin: DEFAULT_RECHECK_MARGIN,
        }
    }
}

/// One question about one context.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub question: &'a str,
    pub context: &'a str,
}

/// The answers to one question.
#[derive(Debug, Clone)]
pub struct Prediction {
    /// Best first, at most `top_k`; may be empty when the context has no usable span.
    pub answers: Vec<Answer>,
    /// Minimum over windows of `p_start[CLS] * p_end[CLS]`.
    pub null_score: f64,
    /// `null / (null + best span score)`; see the crate documentation.
    pub na_prob: f64,
    /// The question had more than `max_question_len` tokens and was cut.
    pub question_truncated: bool,
}

/// A loaded reader.
pub struct Reader {
    checkpoint: Checkpoint,
    /// The model again in float32, when the checkpoint's runs in bfloat16 or int8: near-ties are
    /// re-read with it (see [`ReadParams::recheck_margin`]).
    float32: Option<QaModel>,
}

impl Reader {
    /// Loads the checkpoint in `dir`, in the precision set by [`lector_models::set_precision`]
    /// (with bfloat16 or int8, a float32 copy of the model is loaded too, for re-reading near-ties).
    pub fn load(dir: &Path) -> Result<Self> {
        Self::new(Checkpoint::load(dir)?)
    }

    /// A reader around a loaded checkpoint (see [`Reader::load`]).
    pub fn new(checkpoint: Checkpoint) -> Result<Self> {
        let float32 = match lector_models::active_precision() != Precision::F32 {
            true => Some(checkpoint.load_model(Precision::F32)?),
            false => None,
        };
        Ok(Self {
            checkpoint,
            float32,
        })
    }

    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    fn models(&self) -> batch::Models<'_> {
        batch::Models {
            checkpoint: &self.checkpoint,
            float32: self.float32.as_ref(),
        }
    }

    /// Answers one question.
    pub fn answer(&self, question: &str, context: &str, params: &ReadParams) -> Result<Prediction> {
        let mut predictions =
            self.answer_batch(&[Query { question, context }], params, &mut |_| {})?;
        Ok(predictions.remove(0))
    }

    /// The start and end probabilities the decoder ranks spans with, per window of `context`:
    /// the pipeline's masked softmax over each window (question and special tokens get 0; the
    /// CLS position's product is the window's null score). Only context tokens are listed, with
    /// character offsets into `context`. For explaining an answer; [`Reader::answer`] computes
    /// the same probabilities and is unaffected by this call.
    pub fn token_probabilities(
        &self,
        question: &str,
        context: &str,
        params: &ReadParams,
    ) -> Result<Vec<WindowProbabilities>> {
        params.validate()?;
        batch::token_probabilities(&self.models(), Query { question, context }, params)
    }

    /// Answers many questions, batching windows across questions; `progress` is called with the
    /// number of questions finished so far. Consecutive queries with the same context share its
    /// tokenization.
    pub fn answer_batch(
        &self,
        queries: &[Query],
        params: &ReadParams,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Prediction>> {
        params.validate()?;
        let chunk_size = (params.batch_size * 8).max(64);
        let mut predictions = Vec::with_capacity(queries.len());
        for chunk in queries.chunks(chunk_size) {
            predictions.extend(batch::answer_chunk(&self.models(), chunk, params)?);
            progress(predictions.len());
        }
        Ok(predictions)
    }
}

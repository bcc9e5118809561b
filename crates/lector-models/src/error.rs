//! Errors of the models crate: each one says which file or checkpoint is at fault and why.

use std::path::PathBuf;

// Causes are embedded in the messages (fields named `error`, not `source`), so that `{:#}` in the
// CLI prints each cause once.

/// Everything that can go wrong while loading a checkpoint, running it, or fetching a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file the checkpoint needs is not there.
    #[error("{path}: missing {what}", path = .path.display())]
    MissingFile { path: PathBuf, what: &'static str },
    /// A file exists but could not be read.
    #[error("{path}: {error}", path = .path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// `config.json` is not valid JSON or lacks a field the architecture needs.
    #[error("{path}: invalid config: {message}", path = .path.display())]
    Config { path: PathBuf, message: String },
    /// `config.json` names an architecture lector does not implement.
    #[error(
        "{path}: unknown model_type {model_type:?} (supported: bert, distilbert, roberta, xlm-roberta)",
        path = .path.display()
    )]
    UnknownModelType { path: PathBuf, model_type: String },
    /// The weights have an encoder but no `qa_outputs` layer.
    #[error("{path}: checkpoint has no qa_outputs weights: not a question-answering model", path = .path.display())]
    NoQaHead { path: PathBuf },
    /// The checkpoint is not a cross-encoder lector can rerank with.
    #[error("{path}: not a reranker: {why}", path = .path.display())]
    NoRerankHead { path: PathBuf, why: String },
    /// The weights could not be read or have the wrong names or shapes.
    #[error("{path}: cannot load weights: {error}", path = .path.display())]
    Weights {
        path: PathBuf,
        error: candle_core::Error,
    },
    /// `tokenizer.json` could not be parsed.
    #[error("{path}: cannot load tokenizer: {message}", path = .path.display())]
    Tokenizer { path: PathBuf, message: String },
    /// The tokenizer can emit ids the model has no embedding for.
    #[error(
        "{path}: tokenizer vocabulary ({tokenizer} tokens) is larger than the model's vocab_size ({model}): \
         tokenizer.json does not belong to this model",
        path = .path.display()
    )]
    VocabMismatch {
        path: PathBuf,
        tokenizer: usize,
        model: usize,
    },
    /// A forward pass failed (shapes, memory).
    #[error("model computation failed: {0}")]
    Compute(#[from] candle_core::Error),
    /// Fetching or unpacking a model failed.
    #[error("{0}")]
    Fetch(String),
    /// A layer was asked of a model that does not have it.
    #[error(
        "{path}: the model has {layers} layers (0 is the embedding output, {layers} the last), not {layer}",
        path = .path.display()
    )]
    NoSuchLayer {
        path: PathBuf,
        layer: usize,
        layers: usize,
    },
    /// BERTScore's matching refused its inputs (see [`crate::bertscore`]).
    #[error("{0}")]
    Score(lector_eval::Error),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |error| Error::Io { path, error }
}

//! Errors of the generation crate: each one names the file, the endpoint or the setting at fault.

use std::path::PathBuf;

/// Everything that can go wrong while loading a generator, prompting it, or calling an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A GGUF file could not be opened or read.
    #[error("{path}: {error}", path = .path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The file is not GGUF, or its metadata lacks or mistypes a key the model needs.
    #[error("{path}: invalid GGUF: {message}", path = .path.display())]
    Gguf { path: PathBuf, message: String },
    /// `general.architecture` names an architecture lector does not run.
    #[error(
        "{path}: unsupported architecture {architecture:?} (supported: llama, qwen2)",
        path = .path.display()
    )]
    UnsupportedArchitecture { path: PathBuf, architecture: String },
    /// The tokenizer described by the metadata cannot be built.
    #[error("{path}: tokenizer: {message}", path = .path.display())]
    Tokenizer { path: PathBuf, message: String },
    /// The chat template does not parse or fails to render.
    #[error("chat template: {0}")]
    Template(String),
    /// A prompt file or template is invalid or fails to render (`origin` names the file).
    #[error("{origin}: {message}")]
    Prompt { origin: String, message: String },
    /// Invalid generation settings or input (empty prompt, zero beams, ...).
    #[error("{0}")]
    Invalid(String),
    /// The prompt and the tokens to generate do not fit the model's context window.
    #[error(
        "the prompt is {prompt} tokens; with {max_new} new tokens that exceeds the context window of {window} tokens"
    )]
    ContextOverflow {
        prompt: usize,
        max_new: usize,
        window: usize,
    },
    /// A forward pass failed (shapes, memory).
    #[error("model computation failed: {0}")]
    Compute(#[from] candle_core::Error),
    /// Answering one question of an evaluation failed.
    #[error("question `{id}`: {source}")]
    Question { id: String, source: Box<Error> },
    /// Evaluation data could not be read or scored.
    #[error(transparent)]
    Eval(#[from] lector_eval::Error),
    /// An OpenAI-compatible endpoint could not be reached or answered with an error.
    #[error("{url}: {message}")]
    Endpoint { url: String, message: String },
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Maps an I/O error on `path` to [`Error::Io`].
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |error| Error::Io {
        path: path.to_path_buf(),
        error,
    }
}

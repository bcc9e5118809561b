//! Errors of the pipeline: the index's and the reader's, plus its own input and file errors.

use std::path::PathBuf;

/// Everything that can go wrong while answering or calibrating.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening or searching the index failed.
    #[error(transparent)]
    Index(#[from] lector_index::Error),
    /// Loading or running the reader failed.
    #[error(transparent)]
    Reader(#[from] lector_reader::Error),
    /// A model (reader, embedder, reranker) could not be found or loaded.
    #[error("cannot load the {what} at {path}: {message}", path = .path.display())]
    Model {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    /// Reading or scoring evaluation data failed.
    #[error(transparent)]
    Eval(#[from] lector_eval::Error),
    /// A canary run's baseline or questions could not be used (boxed: it is large, and every
    /// result of the pipeline carries this error type).
    #[error(transparent)]
    Canary(Box<lector_eval::canary::CanaryError>),
    /// A file to index could not be read.
    #[error(transparent)]
    Ingest(#[from] lector_ingest::Error),
    /// A prompt, its examples or a generation failed.
    #[error(transparent)]
    Generate(#[from] lector_generate::Error),
    /// The question is empty or only whitespace.
    #[error("the question is empty")]
    EmptyQuestion,
    /// Decomposing a question into sub-questions failed (e.g. the language model's endpoint).
    #[error("decomposing the question failed: {0}")]
    Decompose(String),
    /// Answering one question of a run failed.
    #[error("question {id}: {source}")]
    Question { id: String, source: Box<Error> },
    /// Options that cannot work (e.g. `k = 0`).
    #[error("invalid options: {0}")]
    Options(String),
    /// A calibration file that cannot be used (file, reason).
    #[error("{path}: {message}", path = .path.display())]
    Calibration { path: PathBuf, message: String },
    /// A file could not be read or written.
    #[error("{path}: {source}", path = .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps an I/O error with the path it concerns.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}

impl From<lector_eval::canary::CanaryError> for Error {
    fn from(err: lector_eval::canary::CanaryError) -> Self {
        Error::Canary(Box::new(err))
    }
}

//! Errors of training: each names the file, question or setting at fault.

use std::path::PathBuf;

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// What can go wrong while training.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {message}")]
    Data { path: PathBuf, message: String },
    #[error("{path}: question `{id}`: {message}")]
    Question {
        path: PathBuf,
        id: String,
        message: String,
    },
    #[error("{path}: {message}")]
    Checkpoint { path: PathBuf, message: String },
    #[error("{0}")]
    Params(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    // The errors of other crates are boxed: some are large, and every `Result` here carries them.
    #[error(transparent)]
    Model(Box<lector_models::Error>),
    #[error(transparent)]
    Reader(Box<lector_reader::Error>),
    #[error(transparent)]
    Eval(Box<lector_eval::Error>),
    #[error(transparent)]
    Index(Box<lector_index::Error>),
    #[error("tensor computation: {0}")]
    Tensor(Box<candle_core::Error>),
}

macro_rules! boxed_from {
    ($($source:ty => $variant:ident),*) => {$(
        impl From<$source> for Error {
            fn from(error: $source) -> Self {
                Error::$variant(Box::new(error))
            }
        }
    )*};
}

boxed_from!(
    lector_models::Error => Model,
    lector_reader::Error => Reader,
    lector_eval::Error => Eval,
    lector_index::Error => Index,
    candle_core::Error => Tensor
);

/// Wraps an I/O error with the path it concerns.
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

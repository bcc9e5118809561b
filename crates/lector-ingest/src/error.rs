//! Errors of ingestion: each names the file, and the line where it applies.

use std::path::PathBuf;

/// Everything that can go wrong while reading documents.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("{path}: {source}", path = .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An input document is malformed or too large (file, 1-based line where it applies, reason).
    #[error("{path}{line}: {message}", path = .path.display(), line = .line.map_or(String::new(), |l| format!(":{l}")))]
    InvalidInput {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// The caller's `emit` stopped reading with its own error (e.g. an index that failed to
    /// commit), passed through unchanged.
    #[error(transparent)]
    Stopped(Box<dyn std::error::Error + Send + Sync>),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps an I/O error with the path it concerns.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}

/// An invalid-input error for `path` (and `line`).
pub(crate) fn invalid(
    path: impl Into<PathBuf>,
    line: Option<usize>,
    message: impl Into<String>,
) -> Error {
    Error::InvalidInput {
        path: path.into(),
        line,
        message: message.into(),
    }
}

/// A JSON error's message with its column in front and without serde's " at line L column C"
/// (the line is reported by the caller, in the error's own place).
pub(crate) fn json_message(e: &serde_json::Error) -> String {
    let message = e.to_string();
    match message.rfind(" at line ") {
        Some(i) => format!("column {}: {}", e.column(), &message[..i]),
        None => message,
    }
}

//! Errors of ingestion: each names the file, and the line where it applies.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

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

/// Runs a parser of untrusted input on the file at `path`: the reason it gives, or a panic inside
/// it (caught, so one bad file never stops a folder), becomes an invalid-input error naming the
/// file; `format` names what failed to parse ("PDF", "DOCX").
pub(crate) fn parse_guarded<T>(
    path: &Path,
    format: &str,
    parse: impl FnOnce() -> std::result::Result<T, String>,
) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(parse)) {
        Ok(Ok(parsed)) => Ok(parsed),
        Ok(Err(message)) => Err(invalid(path, None, message)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let message = format!("unreadable {format} (the parser failed: {what})");
            Err(invalid(path, None, message))
        }
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

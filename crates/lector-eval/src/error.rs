//! Errors of the evaluation crate: each one names the file and, where known, the line and column.

use std::path::PathBuf;

/// Everything that can go wrong while reading evaluation inputs or scoring them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{path}: {source}", path = .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not valid JSON / JSONL / TSV at this position.
    #[error("{path}:{line}:{column}: {message}", path = .path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// The file parses but a field has the wrong shape or value.
    #[error("{path}: {message}", path = .path.display())]
    Invalid { path: PathBuf, message: String },
    /// Two inputs that must agree do not (e.g. different question sets).
    #[error("{0}")]
    Mismatch(String),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

//! Errors of the index crate: each names the file (and line) or the index directory involved.

use std::path::PathBuf;

/// Everything that can go wrong while storing or searching.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}", path = .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Another writer holds the index's lock file.
    #[error(
        "index {dir} is being written by another process (lock {lock} is held); \
         wait for it to finish and retry",
        dir = .dir.display(),
        lock = .lock.display()
    )]
    Locked { dir: PathBuf, lock: PathBuf },
    /// The index on disk is damaged or was written by a newer version.
    #[error("index {dir}: {message}", dir = .dir.display())]
    Corrupt { dir: PathBuf, message: String },
    /// There is no index at this directory.
    #[error("no index at {dir} (create one with `lector index add PATH --index {dir}`)", dir = .dir.display())]
    NoIndex { dir: PathBuf },
    /// A setting conflicts with the index (e.g. different passage size than it was built with).
    #[error("{0}")]
    Config(String),
    /// An external document store cannot be reached, or failed or timed out mid-request; the
    /// same call may succeed once it is back. `location` never holds credentials.
    #[error("the document store {location} is unavailable: {reason}")]
    Unavailable { location: String, reason: String },
    /// The embedder failed or returned malformed vectors.
    #[error("embedding failed: {0}")]
    Embed(String),
    /// The reranker failed or returned the wrong number of scores.
    #[error("reranking failed: {0}")]
    Rerank(String),
    /// A segment merge panicked (a bug): the index is unchanged, and the merge is planned again
    /// after the next commit.
    #[error("a segment merge panicked: {0}")]
    MergePanicked(String),
    /// The caller asked [`crate::add_files`] to stop (a user's interrupt).
    #[error("interrupted")]
    Interrupted,
    /// [`crate::add_files`] stopped at `cause` (a failed batch commit, or in strict mode a walk
    /// error or invalid file or line, which names the file and line), `before_adding` anything
    /// or while reading. Nothing staged since the last commit is stored unless the caller
    /// commits it; the index keeps that commit of `kept` documents.
    #[error(
        "{cause}\n(stopped{}; the index keeps its last commit, {kept} documents{})",
        if *.before_adding { " before adding anything" } else { "" },
        if *.before_adding { "" } else { ", and nothing staged since" }
    )]
    AddStopped {
        cause: lector_ingest::Error,
        kept: usize,
        before_adding: bool,
    },
}

/// An index error stops ingestion when returned by the `emit` of `lector_ingest::read_file`
/// (e.g. a commit that failed while documents were being added).
impl From<Error> for lector_ingest::Error {
    fn from(err: Error) -> Self {
        lector_ingest::Error::Stopped(Box::new(err))
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps an I/O error with the path it concerns.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}

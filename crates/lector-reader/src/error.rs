//! Errors of the reader.

/// Everything that can go wrong while reading.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading or running the model failed.
    #[error(transparent)]
    Model(#[from] lector_models::Error),
    /// The tokenizer rejected the input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The question is empty or only whitespace.
    #[error("the question is empty")]
    EmptyQuestion,
    /// The context is empty or only whitespace.
    #[error("the context is empty")]
    EmptyContext,
    /// The context is longer than [`crate::MAX_CONTEXT_BYTES`].
    #[error("the context is {0} bytes; the reader accepts at most {max} bytes per context (split it into passages)", max = crate::MAX_CONTEXT_BYTES)]
    ContextTooLong(usize),
    /// Reading parameters that cannot work together.
    #[error("invalid parameters: {0}")]
    Params(String),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

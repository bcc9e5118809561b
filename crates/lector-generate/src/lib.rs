//! lector-generate: generative question answering.
//!
//! - [`Generator`]: the interface every generator implements — chat messages in, text out,
//!   streamed token by token through a callback that can stop the generation (a server
//!   forwards each piece to its client and stops when the client goes away).
//! - [`LocalGenerator`]: a GGUF model (Llama or Qwen2 architecture, quantized weights) run on
//!   the CPU with candle; its tokenizer and chat template come from the GGUF metadata
//!   ([`tokenizer`], [`template`]). Greedy decoding, sampling (temperature, top-p, seeded),
//!   beam search (beam size, length penalty), stop sequences.
//! - [`OpenAiGenerator`]: any OpenAI-compatible chat-completions endpoint, with timeouts and
//!   retries.
//! - [`grounded`]: open-book prompts with numbered passages, fitting them to the context window,
//!   citations and a support check of every answer sentence; closed-book prompts.
//!
//! ```no_run
//! # fn main() -> Result<(), lector_generate::Error> {
//! use lector_generate::{GenerateOptions, Generator, LocalGenerator, Message};
//! use std::ops::ControlFlow;
//! let generator = LocalGenerator::load(std::path::Path::new("SmolLM2-135M-Instruct.Q4_1.gguf"))?;
//! let messages = [Message::user("What is the capital of France?")];
//! let generation = generator.generate(&messages, &GenerateOptions::default(), &mut |piece| {
//!     print!("{piece}");
//!     ControlFlow::Continue(())
//! })?;
//! println!("\n{} tokens/s", generation.timings.tokens_per_second());
//! # Ok(()) }
//! ```

pub mod attend;
pub mod claims;
pub mod decode;
pub mod error;
pub mod evaluate;
pub mod gguf;
pub mod grounded;
pub mod judge;
pub mod local;
pub mod model;
pub mod openai;
pub mod options;
pub mod prompt;
pub mod qmatmul;
pub mod template;
pub mod tokenizer;

pub use error::{Error, Result};
pub use local::LocalGenerator;
pub use openai::{OpenAiConfig, OpenAiGenerator};
pub use options::{Decoding, FinishReason, GenerateOptions, Generation, Timings, MAX_NEW_TOKENS};

use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: "system".into(),
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: "user".into(),
            content: content.into(),
        }
    }

    /// An assistant message (an earlier answer: a few-shot example).
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: "assistant".into(),
            content: content.into(),
        }
    }
}

/// Receives the generated text piece by piece; `Break` stops the generation
/// ([`FinishReason::Cancelled`]).
pub type OnToken<'a> = dyn FnMut(&str) -> ControlFlow<()> + 'a;

/// A text generator. Implementations are shareable across threads: one loaded model serves
/// concurrent generations.
pub trait Generator: Send + Sync {
    /// A name for reports (the model's).
    fn name(&self) -> String;

    /// The context window in tokens (prompt plus generated tokens).
    fn context_window(&self) -> usize;

    /// The prompt tokens `messages` take once formatted for the model. Exact for local models;
    /// an estimate (characters / 3, rounded up, plus 8 per message) for remote ones.
    fn count_tokens(&self, messages: &[Message]) -> Result<usize>;

    /// Strings the model's tokenizer turns into special tokens (chat-turn markers), which
    /// untrusted text must not contain.
    fn special_tokens(&self) -> Vec<String> {
        Vec::new()
    }

    /// Generates the assistant's reply to `messages`, calling `on_token` with each new piece of
    /// text as it is produced (beam search produces its text at the end, in one piece).
    fn generate(
        &self,
        messages: &[Message],
        options: &GenerateOptions,
        on_token: &mut OnToken<'_>,
    ) -> Result<Generation>;
}

/// Checks that `messages` have some content.
pub(crate) fn check_messages(messages: &[Message]) -> Result<()> {
    if messages.iter().all(|m| m.content.trim().is_empty()) {
        return Err(Error::Invalid("the prompt is empty".into()));
    }
    Ok(())
}

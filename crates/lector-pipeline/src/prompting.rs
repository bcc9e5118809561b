//! The prompt a generated answer is asked with, from a user's choices: a prompt file or shipped
//! name, and few-shot examples (fixed, or nearest the question by the embedder). One loader for
//! the CLI, the server and Python.

use crate::config::load_embedder;
use crate::Result;
use lector_generate::prompt::{self, ExamplePool, ExampleSelection, Prompt, Prompting};
use lector_index::Embedder;
use std::path::PathBuf;
use std::sync::Arc;

/// What to prompt with.
#[derive(Debug, Clone, Default)]
pub struct PromptSpec {
    /// A prompt file (TOML or YAML) or a shipped prompt's name; `None`: the default prompt.
    pub prompt: Option<String>,
    /// Few-shot examples (JSON lines, a JSON array, or a SQuAD file).
    pub examples: Option<PathBuf>,
    /// Examples shown per question.
    pub shots: usize,
    pub select: ExampleSelection,
    /// The embedder of `Similar` selection [default: the registry's].
    pub embedder: Option<PathBuf>,
}

/// Loads the prompt and the examples `spec` names; with `Similar` selection, embeds the examples'
/// questions now (`notify` hears of model fetches, `on_progress` of examples embedded).
pub fn load(
    spec: &PromptSpec,
    notify: &dyn Fn(&str),
    on_progress: &mut dyn FnMut(usize, usize),
) -> Result<Prompting> {
    let prompt = match &spec.prompt {
        Some(name) => Prompt::resolve(name)?,
        None => Prompt::default(),
    };
    let examples = match &spec.examples {
        None => None,
        Some(path) => {
            let examples = prompt::load_examples(path)?;
            let total = examples.len();
            let pool = match spec.select {
                ExampleSelection::Fixed => ExamplePool::fixed(examples, spec.shots),
                ExampleSelection::Similar => {
                    let embedder = load_embedder(spec.embedder.as_deref(), notify)?;
                    let embed = Box::new(move |texts: &[&str]| embedder.embed_queries(texts));
                    ExamplePool::similar(examples, spec.shots, embed, &mut |done| {
                        on_progress(done, total)
                    })?
                }
            };
            Some(Arc::new(pool))
        }
    };
    Ok(Prompting {
        prompt: Arc::new(prompt),
        examples,
    })
}

//! How a bridge question is split into sub-questions: by rule ([`RuleDecomposer`]) or by a
//! language model ([`LlmDecomposer`]), both behind [`Decomposer`].

use super::question;
use lector_generate::{GenerateOptions, Generator, Message};
use std::ops::ControlFlow;
use std::sync::Arc;

/// Splits a question into sub-questions (for example a language model prompted to); a later
/// sub-question refers to an earlier one's answer as `#1`, `#2`, ...
pub trait Decomposer {
    /// The sub-questions, in order; one (or none) when the question is already simple.
    fn decompose(&self, question: &str) -> std::result::Result<Vec<String>, String>;

    /// Whether the last sub-answer replaces the passage pairs' answer (otherwise the sub-answers
    /// only join the second hop's bridges and the chain).
    fn answers(&self) -> bool {
        true
    }
}

/// Which decomposer a user asked for (`lector ask --decompose`, the API's `decompose`):
/// `rules` [default], `llm` (a language model writes the sub-questions) or `none` (the passage
/// pairs alone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decomposition {
    #[default]
    Rules,
    Llm,
    None,
}

impl Decomposition {
    /// The decomposer this choice names: `llm` must be the loaded language-model decomposer
    /// when the choice is [`Decomposition::Llm`] (without one, the pairs alone).
    pub fn decomposer(self, llm: Option<&LlmDecomposer>) -> Option<&dyn Decomposer> {
        match self {
            Decomposition::Rules => Some(&RuleDecomposer),
            Decomposition::Llm => llm.map(|d| d as &dyn Decomposer),
            Decomposition::None => None,
        }
    }
}

impl std::str::FromStr for Decomposition {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "rules" => Ok(Decomposition::Rules),
            "llm" => Ok(Decomposition::Llm),
            "none" => Ok(Decomposition::None),
            other => Err(format!(
                "unknown decomposition `{other}`: use rules, llm or none"
            )),
        }
    }
}

/// The default decomposer: the first "the N of E" phrase of a bridge question is asked first
/// ([`question::bridge_sub_questions`]).
pub struct RuleDecomposer;

impl Decomposer for RuleDecomposer {
    fn decompose(&self, question: &str) -> std::result::Result<Vec<String>, String> {
        Ok(question::bridge_sub_questions(question)
            .map(Vec::from)
            .unwrap_or_default())
    }

    /// Measured on the first half of the HotpotQA sample, letting the rule's last sub-answer be
    /// the answer lowered F1 (37.24 -> 36.67): its sub-questions find better bridges than answers.
    fn answers(&self) -> bool {
        false
    }
}

/// A language model that writes sub-questions: one per line, numbered, `#1` standing for the
/// first one's answer ([`parse_sub_questions`] reads its reply).
pub struct LlmDecomposer {
    generator: Arc<dyn Generator>,
}

/// The instruction and one worked example (the format is what matters to a small model).
const DECOMPOSE_PROMPT: &str = "Split the question into simple questions that can each be \
answered from one document. Write one question per line, numbered. Write #1 where a later \
question needs the answer to question 1. If the question is already simple, write it alone.

Question: Where was the director of Inception born?
1. Who directed Inception?
2. Where was #1 born?";

/// Enough for a few short sub-questions; a longer reply is chatter.
const MAX_REPLY_TOKENS: usize = 96;

impl LlmDecomposer {
    /// Decomposes with `generator` (greedy decoding, at most 96 new tokens per question).
    pub fn new(generator: Arc<dyn Generator>) -> Self {
        LlmDecomposer { generator }
    }
}

impl Decomposer for LlmDecomposer {
    fn decompose(&self, question: &str) -> std::result::Result<Vec<String>, String> {
        let messages = [
            Message::system(DECOMPOSE_PROMPT),
            Message::user(format!("Question: {question}")),
        ];
        let options = GenerateOptions {
            max_new_tokens: MAX_REPLY_TOKENS,
            ..GenerateOptions::default()
        };
        let generation = self
            .generator
            .generate(&messages, &options, &mut |_| ControlFlow::Continue(()))
            .map_err(|e| e.to_string())?;
        Ok(parse_sub_questions(&generation.text))
    }
}

/// The numbered lines of a reply ("1. ...", "2) ..."), without their numbers; unnumbered text
/// is ignored, so a chatty reply yields only its questions.
pub fn parse_sub_questions(reply: &str) -> Vec<String> {
    reply
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let digits = line.chars().take_while(char::is_ascii_digit).count();
            let rest = line[digits..].strip_prefix(['.', ')'])?;
            (digits > 0 && !rest.trim().is_empty()).then(|| rest.trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_questions_are_the_numbered_lines() {
        let reply =
            "Sure! Here they are:\n1. Who directed Inception?\n 2) Where was #1 born?\n3.\nThanks";
        assert_eq!(
            parse_sub_questions(reply),
            ["Who directed Inception?", "Where was #1 born?"]
        );
        assert!(parse_sub_questions("no numbers here").is_empty());
    }
}

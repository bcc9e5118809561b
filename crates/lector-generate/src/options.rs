//! Generation settings and results.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// How the next token is chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Decoding {
    /// The most likely token.
    Greedy,
    /// A token drawn from the distribution at `temperature`, restricted to the smallest set of
    /// tokens whose probability reaches `top_p` (nucleus sampling; 1.0 keeps all). The same
    /// seed, prompt and settings give the same text.
    Sample {
        temperature: f64,
        top_p: f64,
        seed: u64,
    },
    /// Beam search over `beams` hypotheses; finished hypotheses are ranked by their summed
    /// log-probability divided by `length ^ length_penalty` (Hugging Face's rule; > 0 favours
    /// longer answers).
    Beam { beams: usize, length_penalty: f64 },
}

/// The most tokens one generation may ask for: above the context window of any model lector
/// runs (SmolLM2's is 8,192 tokens, the largest common ones 131,072), so it never refuses a
/// generation that could fit, and far enough below `usize::MAX` that adding a prompt's length
/// to it cannot overflow.
pub const MAX_NEW_TOKENS: usize = 1 << 20;

/// Settings of one generation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GenerateOptions {
    pub decoding: Decoding,
    /// The most tokens to generate (1 to [`MAX_NEW_TOKENS`]).
    pub max_new_tokens: usize,
    /// Generation stops before the first occurrence of any of these strings.
    pub stop: Vec<String>,
    /// Divides (positive logits) or multiplies (negative ones) the logits of tokens already
    /// generated; 1.0 disables it. Local models only.
    pub repeat_penalty: f32,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            decoding: Decoding::Greedy,
            max_new_tokens: 256,
            stop: Vec::new(),
            repeat_penalty: 1.0,
        }
    }
}

impl GenerateOptions {
    /// Rejects settings that cannot work.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        if self.max_new_tokens == 0 {
            return bad("max_new_tokens must be at least 1".into());
        }
        if self.max_new_tokens > MAX_NEW_TOKENS {
            return bad(format!(
                "max_new_tokens {} is more than the limit of {MAX_NEW_TOKENS}",
                self.max_new_tokens
            ));
        }
        if self.stop.iter().any(String::is_empty) {
            return bad("a stop sequence is empty".into());
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return bad(format!(
                "repeat penalty {} must be positive",
                self.repeat_penalty
            ));
        }
        match self.decoding {
            Decoding::Greedy => Ok(()),
            Decoding::Sample {
                temperature, top_p, ..
            } => {
                if !(temperature.is_finite() && temperature > 0.0) {
                    return bad(format!("temperature {temperature} must be positive"));
                }
                if !(top_p > 0.0 && top_p <= 1.0) {
                    return bad(format!("top-p {top_p} must be in (0, 1]"));
                }
                Ok(())
            }
            Decoding::Beam {
                beams,
                length_penalty,
            } => {
                if beams == 0 {
                    return bad("beam search needs at least 1 beam".into());
                }
                if !length_penalty.is_finite() {
                    return bad(format!("length penalty {length_penalty} must be finite"));
                }
                Ok(())
            }
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model ended its turn (an end-of-generation token).
    EndOfText,
    /// A stop sequence appeared (it is not part of the text).
    Stop(String),
    /// `max_new_tokens` were generated.
    Length,
    /// The callback asked to stop.
    Cancelled,
}

/// Where the time went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Time to process the prompt (until the first new token's logits), in ms.
    pub prompt_ms: f64,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Time to generate them after the prompt, in ms.
    pub generate_ms: f64,
}

impl Timings {
    /// Prompt tokens processed per second.
    pub fn prompt_tokens_per_second(&self) -> f64 {
        per_second(self.prompt_tokens, self.prompt_ms)
    }

    /// Tokens generated per second (after the prompt).
    pub fn tokens_per_second(&self) -> f64 {
        per_second(self.generated_tokens, self.generate_ms)
    }
}

fn per_second(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1000.0 / ms
    } else {
        0.0
    }
}

/// A finished generation.
#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    /// The generated text (without the stop sequence).
    pub text: String,
    pub finish_reason: FinishReason,
    pub timings: Timings,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_settings_are_refused() {
        let with = |decoding| GenerateOptions {
            decoding,
            ..GenerateOptions::default()
        };
        assert!(with(Decoding::Beam {
            beams: 0,
            length_penalty: 1.0
        })
        .validate()
        .is_err());
        assert!(with(Decoding::Sample {
            temperature: 0.0,
            top_p: 1.0,
            seed: 1
        })
        .validate()
        .is_err());
        assert!(with(Decoding::Sample {
            temperature: 0.7,
            top_p: 1.5,
            seed: 1
        })
        .validate()
        .is_err());
        let zero = GenerateOptions {
            max_new_tokens: 0,
            ..GenerateOptions::default()
        };
        assert!(zero.validate().is_err());
        assert!(GenerateOptions::default().validate().is_ok());
    }
}

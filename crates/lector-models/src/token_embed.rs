//! Contextual token embeddings at a chosen layer, for BERTScore: each text tokenised as the
//! `bert-score` package (0.3.13) does in `sent_encode`, run through the first `layer` layers of
//! the encoder, and every token's hidden state returned, special tokens included.
//!
//! Layer 0 is the embedding output and layer `n` the output of the `n`-th transformer layer,
//! as `output_hidden_states[n]` in transformers (the package drops the layers above `n` and
//! reads the last hidden state, which is the same thing).

use crate::checkpoint::{cls_token_id, load_tokenizer, weights_path};
use crate::config::{Architecture, Config};
use crate::error::{Error, Result};
use crate::qa::{open_weights, Encoder};
use crate::Inputs;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{Tokenizer, TruncationParams};

/// Texts per forward pass. Texts are sorted by length first, so a batch pads little (and the
/// encoder never computes padding anyway).
const BATCH: usize = 32;

/// One text after the encoder: its token ids and the hidden state of each token.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// Token ids, special tokens included (`[CLS] ... [SEP]`, `<s> ... </s>`).
    pub ids: Vec<u32>,
    /// Hidden states, `(ids.len(), dim)` row-major, float32 as the model computes them.
    pub states: Vec<f32>,
}

/// A loaded encoder that returns per-token hidden states at any layer.
pub struct TokenEncoder {
    dir: PathBuf,
    config: Config,
    encoder: Encoder,
    tokenizer: Tokenizer,
    max_tokens: usize,
    prefix_space: bool,
    cls: Option<u32>,
    sep: Option<u32>,
}

impl TokenEncoder {
    /// Loads the checkpoint in `dir` (`config.json`, weights, `tokenizer.json`); a task head,
    /// if present, is ignored. Texts are truncated to the tokenizer's `model_max_length`
    /// (`tokenizer_config.json`), never beyond the model's position table.
    pub fn load(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::MissingFile {
                path: dir.to_path_buf(),
                what: "checkpoint directory",
            });
        }
        let config = Config::load(&dir.join("config.json"))?;
        let mut tokenizer = load_tokenizer(&dir.join("tokenizer.json"))?;
        let weights = weights_path(dir)?;
        let encoder = Encoder::load(&open_weights(&weights)?, &config, &weights)?;
        let max_tokens = max_tokens(dir, &config);
        let truncation = TruncationParams {
            max_length: max_tokens,
            ..TruncationParams::default()
        };
        tokenizer
            .with_truncation(Some(truncation))
            .map_err(|e| Error::Tokenizer {
                path: dir.join("tokenizer.json"),
                message: e.to_string(),
            })?;
        Ok(Self {
            prefix_space: is_byte_level(&tokenizer),
            cls: cls_token_id(dir, &tokenizer),
            sep: special_token_id(dir, &tokenizer, "sep_token", &["[SEP]", "</s>"]),
            dir: dir.to_path_buf(),
            config,
            encoder,
            tokenizer,
            max_tokens,
        })
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The checkpoint's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The number of transformer layers: [`TokenEncoder::encode`] takes `0..=layers()`.
    pub fn layers(&self) -> usize {
        self.config.num_layers
    }

    /// Width of a hidden state.
    pub fn dim(&self) -> usize {
        self.config.hidden_size
    }

    /// Tokens per text after truncation, special tokens included.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The id of the tokenizer's `cls_token` (`[CLS]`, `<s>`), if it has one.
    pub fn cls_token_id(&self) -> Option<u32> {
        self.cls
    }

    /// The id of the tokenizer's `sep_token` (`[SEP]`, `</s>`), if it has one.
    pub fn sep_token_id(&self) -> Option<u32> {
        self.sep
    }

    /// Token ids of each text as the package's `sent_encode`: the text stripped of surrounding
    /// whitespace (Python's `str.strip`), special tokens added, truncated; an empty text is its
    /// special tokens alone. Byte-level BPE tokenizers (RoBERTa's) get a leading space, the
    /// package's `add_prefix_space=True`.
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let prepared: Vec<String> = texts.iter().map(|t| self.prepare(t)).collect();
        let encodings =
            self.tokenizer
                .encode_batch(prepared, true)
                .map_err(|e| Error::Tokenizer {
                    path: self.dir.join("tokenizer.json"),
                    message: e.to_string(),
                })?;
        Ok(encodings.iter().map(|e| e.get_ids().to_vec()).collect())
    }

    fn prepare(&self, text: &str) -> String {
        let text = python_strip(text);
        if self.prefix_space && !text.is_empty() {
            format!(" {text}")
        } else {
            text.to_string()
        }
    }

    /// Each text tokenised ([`TokenEncoder::tokenize`]) and run through the first `layer`
    /// layers (0: the embedding output).
    pub fn encode(&self, texts: &[&str], layer: usize) -> Result<Vec<Encoded>> {
        let ids = self.tokenize(texts)?;
        let states = self.states(&ids, layer)?;
        Ok(ids
            .into_iter()
            .zip(states)
            .map(|(ids, states)| Encoded { ids, states })
            .collect())
    }

    /// The hidden states at `layer` of already tokenised rows, `(row.len(), dim)` each.
    pub fn states(&self, rows: &[Vec<u32>], layer: usize) -> Result<Vec<Vec<f32>>> {
        if layer > self.layers() {
            return Err(Error::Config {
                path: self.dir.join("config.json"),
                message: format!(
                    "layer {layer} asked of a model with {} layers (0 is the embedding output, {} the last layer)",
                    self.layers(),
                    self.layers()
                ),
            });
        }
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| rows[i].len());
        let mut out = vec![Vec::new(); rows.len()];
        for batch in order.chunks(BATCH) {
            let batch_rows: Vec<&[u32]> = batch.iter().map(|&i| rows[i].as_slice()).collect();
            let inputs = pad(&batch_rows, self.config.pad_token_id);
            let hidden = self.encoder.hidden_upto(&inputs, layer)?;
            for (&i, window) in batch.iter().zip(hidden.windows()) {
                out[i] = hidden.data[window].to_vec();
            }
        }
        Ok(out)
    }
}

/// A right-padded batch of `rows`, every token of type 0 (the package passes no token types).
fn pad(rows: &[&[u32]], pad_id: u32) -> Inputs {
    let zeros = vec![0; rows.iter().map(|r| r.len()).max().unwrap_or(0)];
    let pairs: Vec<(&[u32], &[u32])> = rows.iter().map(|r| (*r, &zeros[..r.len()])).collect();
    Inputs::right_padded(&pairs, pad_id)
}

/// Python's `str.strip()`: Rust's whitespace plus the four information separators
/// U+001C..U+001F, which Python also counts as whitespace.
fn python_strip(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// The truncation length: `model_max_length` of `tokenizer_config.json` where it is set (the
/// package's `max_length`), at most the positions the model has. RoBERTa's positions start after
/// `padding_idx`, so it has `pad_token_id + 1` fewer.
fn max_tokens(dir: &Path, config: &Config) -> usize {
    let positions = match config.architecture {
        Architecture::Roberta => config
            .max_position_embeddings
            .saturating_sub(config.pad_token_id as usize + 1),
        _ => config.max_position_embeddings,
    };
    let from_config = read_json(&dir.join("tokenizer_config.json"))
        .and_then(|json| json["model_max_length"].as_f64())
        .filter(|&n| n >= 2.0);
    match from_config {
        // A huge sentinel (transformers' VERY_LARGE_INTEGER) means "not set".
        Some(n) if n < positions as f64 => n as usize,
        _ => positions,
    }
    .max(2)
}

/// GPT-2 style byte-level tokenizers, for which the package's `sent_encode` asks a prefix space.
fn is_byte_level(tokenizer: &Tokenizer) -> bool {
    matches!(
        tokenizer.get_pre_tokenizer(),
        Some(PreTokenizerWrapper::ByteLevel(_))
    )
}

/// The id of the special token `key` (`sep_token`, ...) from `tokenizer_config.json` or
/// `special_tokens_map.json`, else the first of `fallbacks` the vocabulary has.
fn special_token_id(
    dir: &Path,
    tokenizer: &Tokenizer,
    key: &str,
    fallbacks: &[&str],
) -> Option<u32> {
    let named = ["tokenizer_config.json", "special_tokens_map.json"]
        .iter()
        .filter_map(|name| read_json(&dir.join(name)))
        .find_map(|json| {
            let token = &json[key];
            token
                .as_str()
                .or_else(|| token["content"].as_str())
                .map(str::to_string)
        });
    match named {
        Some(token) => tokenizer.token_to_id(&token),
        None => fallbacks.iter().find_map(|t| tokenizer.token_to_id(t)),
    }
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_as_python_does() {
        assert_eq!(python_strip("\u{1f} a b\u{a0}\n"), "a b");
        assert_eq!(python_strip(" \u{3000} "), "");
        assert_eq!(python_strip("\u{200b}x"), "\u{200b}x");
    }
}

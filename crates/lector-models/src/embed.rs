//! Sentence embeddings with a bi-encoder: a bare encoder (no task head), mean-pooled over the
//! real tokens of each text and L2-normalised — the sentence-transformers recipe of
//! all-MiniLM-L6-v2, so a dot product of two embeddings is their cosine similarity.

use crate::checkpoint::{load_tokenizer, weights_path};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::qa::{open_weights, Encoder};
use crate::Inputs;
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationParams};

/// Tokens per text (special tokens included), as sentence-transformers' `max_seq_length` for
/// all-MiniLM-L6-v2. The model's `tokenizer.json` says 128 (and pads to 128); padding is switched
/// off and truncation set here so that pads never enter the mean.
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// Texts per forward pass. Texts are sorted by length first, so a batch pads little.
const BATCH: usize = 32;

/// A loaded sentence embedder.
pub struct SentenceEmbedder {
    dir: PathBuf,
    config: Config,
    encoder: Encoder,
    tokenizer: Tokenizer,
    max_tokens: usize,
}

impl SentenceEmbedder {
    /// Loads the encoder checkpoint in `dir` (`config.json`, weights, `tokenizer.json`); a task
    /// head, if present, is ignored.
    pub fn load(dir: &Path) -> Result<Self> {
        let config = Config::load(&dir.join("config.json"))?;
        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"))?;
        let weights = weights_path(dir)?;
        let encoder = Encoder::load(&open_weights(&weights)?, &config, &weights)?;
        let mut embedder = Self {
            dir: dir.to_path_buf(),
            config,
            encoder,
            tokenizer,
            max_tokens: 0,
        };
        embedder.set_max_tokens(DEFAULT_MAX_TOKENS)?;
        Ok(embedder)
    }

    /// Truncates texts to `max_tokens` tokens (at most the model's position table).
    pub fn set_max_tokens(&mut self, max_tokens: usize) -> Result<()> {
        let max_tokens = max_tokens.clamp(2, self.config.max_position_embeddings);
        let truncation = TruncationParams {
            max_length: max_tokens,
            ..TruncationParams::default()
        };
        self.tokenizer
            .with_truncation(Some(truncation))
            .map_err(|e| Error::Tokenizer {
                path: self.dir.join("tokenizer.json"),
                message: e.to_string(),
            })?;
        self.max_tokens = max_tokens;
        Ok(())
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Embedding dimension.
    pub fn dim(&self) -> usize {
        self.config.hidden_size
    }

    /// Tokens per text after truncation.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// One unit-length embedding per text, in order. An empty text embeds its special tokens.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Tokenizer {
                path: self.dir.join("tokenizer.json"),
                message: e.to_string(),
            })?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out = vec![Vec::new(); ids.len()];
        for batch in order.chunks(BATCH) {
            let rows: Vec<&[u32]> = batch.iter().map(|&i| ids[i]).collect();
            for (&i, vector) in batch.iter().zip(self.embed_ids(&rows)?) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    fn embed_ids(&self, rows: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let inputs = pad(rows, self.config.pad_token_id);
        let hidden = self.encoder.hidden(&inputs)?;
        Ok(hidden
            .windows()
            .map(|states| mean_normalised(&hidden.data[states], hidden.width))
            .collect())
    }
}

/// A right-padded batch of `rows`, every token of type 0 (one text per row).
fn pad(rows: &[&[u32]], pad_id: u32) -> Inputs {
    let zeros = vec![0; rows.iter().map(|r| r.len()).max().unwrap_or(0)];
    let pairs: Vec<(&[u32], &[u32])> = rows.iter().map(|r| (*r, &zeros[..r.len()])).collect();
    Inputs::right_padded(&pairs, pad_id)
}

/// The mean of the token states `(tokens, dim)`, scaled to unit length (sentence-transformers
/// clamps the norm at 1e-12 the same way).
fn mean_normalised(states: &[f32], dim: usize) -> Vec<f32> {
    let mut sum = vec![0f64; dim];
    for token in states.chunks_exact(dim) {
        for (s, &v) in sum.iter_mut().zip(token) {
            *s += f64::from(v);
        }
    }
    let tokens = (states.len() / dim).max(1) as f64;
    let norm = sum.iter().map(|s| s * s).sum::<f64>().sqrt() / tokens;
    let scale = 1.0 / (tokens * norm.max(1e-12));
    sum.iter().map(|s| (s * scale) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_is_normalised_and_ignores_nothing_but_padding() {
        let v = mean_normalised(&[1.0, 0.0, 3.0, 4.0], 2);
        // mean (2, 2) -> unit (0.7071, 0.7071)
        assert!((v[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert!((v[1] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        let zero = mean_normalised(&[0.0, 0.0], 2);
        assert_eq!(zero, vec![0.0, 0.0]);
    }

    #[test]
    fn padding_is_masked() {
        let inputs = pad(&[&[5, 6, 7], &[8]], 0);
        assert_eq!(inputs.ids, [5, 6, 7, 8, 0, 0]);
        assert_eq!(inputs.mask, [1, 1, 1, 1, 0, 0]);
        assert_eq!(inputs.type_ids, [0; 6]);
        assert_eq!(inputs.lengths(), [3, 1]);
    }
}

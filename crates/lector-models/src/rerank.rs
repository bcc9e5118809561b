//! Passage reranking with a cross-encoder: the question and a passage read together by one
//! encoder and scored by the head of transformers' `BertForSequenceClassification` with one
//! label — `[CLS]` state, `pooler.dense` + tanh, then `classifier` — the layout of
//! sentence-transformers' `CrossEncoder` rerankers. A higher score means a likelier answer.

use crate::checkpoint::{load_tokenizer, weights_path};
use crate::config::{Architecture, Config};
use crate::error::{Error, Result};
use crate::layers::Linear;
use crate::matmul::Threads;
use crate::qa::{encoder_root, open_weights, Encoder};
use crate::Inputs;
use std::path::{Path, PathBuf};
use tokenizers::{EncodeInput, Tokenizer, TruncationParams, TruncationStrategy};

/// Tokens per question-passage pair (special tokens included); longer pairs lose the end of the
/// longer text, normally the passage (`longest_first`, as transformers' `truncation=True`).
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// Pairs per forward pass. Pairs are sorted by length first, so a batch pads little.
const BATCH: usize = 32;

/// A loaded cross-encoder.
pub struct CrossEncoder {
    dir: PathBuf,
    pad_token_id: u32,
    encoder: Encoder,
    pooler: Linear,
    classifier: Linear,
    tokenizer: Tokenizer,
}

impl CrossEncoder {
    /// Loads the checkpoint in `dir` (`config.json`, weights, `tokenizer.json`): a BERT-family
    /// encoder with `bert.pooler.dense` and a one-label `classifier`.
    pub fn load(dir: &Path) -> Result<Self> {
        let config = Config::load(&dir.join("config.json"))?;
        let weights = weights_path(dir)?;
        let not_reranker = |why: &str| Error::NoRerankHead {
            path: weights.clone(),
            why: why.to_string(),
        };
        if config.architecture != Architecture::Bert {
            return Err(not_reranker(&format!(
                "model_type {} (only BERT-family cross-encoders are supported)",
                config.model_type
            )));
        }
        let wrap = |error| Error::Weights {
            path: weights.clone(),
            error,
        };
        let vb = open_weights(&weights)?;
        let head = |name: &str| format!("{name}.weight");
        if !vb.contains_tensor(&head("classifier")) {
            return Err(not_reranker("no classifier weights"));
        }
        let labels = vb
            .get_unchecked(&head("classifier"))
            .and_then(|w| w.dim(0))
            .map_err(wrap)?;
        if labels != 1 {
            return Err(not_reranker(&format!(
                "the classifier has {labels} labels, a reranker one"
            )));
        }
        let body = encoder_root(&vb, config.architecture);
        if !body.contains_tensor(&head("pooler.dense")) {
            return Err(not_reranker("no pooler weights"));
        }
        let h = config.hidden_size;
        let pooler = Linear::load(&body, "pooler.dense", h, h).map_err(wrap)?;
        let classifier = Linear::load(&vb, "classifier", h, 1).map_err(wrap)?;
        let encoder = Encoder::load(&vb, &config, &weights)?;
        let mut tokenizer = load_tokenizer(&dir.join("tokenizer.json"))?;
        let truncation = TruncationParams {
            max_length: DEFAULT_MAX_TOKENS.min(config.max_position_embeddings),
            strategy: TruncationStrategy::LongestFirst,
            ..TruncationParams::default()
        };
        tokenizer
            .with_truncation(Some(truncation))
            .map_err(|e| Error::Tokenizer {
                path: dir.join("tokenizer.json"),
                message: e.to_string(),
            })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            pad_token_id: config.pad_token_id,
            encoder,
            pooler,
            classifier,
            tokenizer,
        })
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One relevance score (the classifier's logit) per passage for `question`, in order.
    pub fn score(&self, question: &str, passages: &[&str]) -> Result<Vec<f32>> {
        let pairs: Vec<EncodeInput> = passages.iter().map(|&p| (question, p).into()).collect();
        let encodings = self
            .tokenizer
            .encode_batch(pairs, true)
            .map_err(|e| Error::Tokenizer {
                path: self.dir.join("tokenizer.json"),
                message: e.to_string(),
            })?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut scores = vec![0f32; encodings.len()];
        for batch in order.chunks(BATCH) {
            let rows: Vec<(&[u32], &[u32])> = batch
                .iter()
                .map(|&i| (encodings[i].get_ids(), encodings[i].get_type_ids()))
                .collect();
            for (&i, score) in batch.iter().zip(self.score_rows(&rows)?) {
                scores[i] = score;
            }
        }
        Ok(scores)
    }

    /// Scores of `(ids, type ids)` rows.
    fn score_rows(&self, rows: &[(&[u32], &[u32])]) -> Result<Vec<f32>> {
        let inputs = Inputs::right_padded(rows, self.pad_token_id);
        let hidden = self.encoder.hidden(&inputs)?;
        let width = hidden.width;
        let cls: Vec<f32> = hidden
            .windows()
            .flat_map(|states| hidden.data[states.start..states.start + width].to_vec())
            .collect();
        let mut pooled = vec![0f32; cls.len()];
        self.pooler.forward(&cls, &mut pooled, Threads::One);
        pooled.iter_mut().for_each(|v| *v = v.tanh());
        let mut scores = vec![0f32; rows.len()];
        self.classifier.forward(&pooled, &mut scores, Threads::One);
        Ok(scores)
    }
}

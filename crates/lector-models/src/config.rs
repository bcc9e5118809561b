//! `config.json` of a Hugging Face checkpoint, reduced to what the encoders need.
//!
//! DistilBERT spells its fields differently (`dim`, `n_layers`, ...); both spellings map onto [`Config`].

use crate::error::{Error, Result};
use serde_json::Value;
use std::path::Path;

/// The encoder families lector implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Bert,
    DistilBert,
    /// RoBERTa and XLM-RoBERTa: same network, different tokenizer.
    Roberta,
}

/// Feed-forward activation, as named by `hidden_act` / `activation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// Exact (erf) GELU: Hugging Face's `gelu`.
    Gelu,
    /// Tanh approximation: `gelu_new`, `gelu_pytorch_tanh`.
    GeluTanh,
    Relu,
}

/// Encoder hyper-parameters.
#[derive(Debug, Clone)]
pub struct Config {
    pub architecture: Architecture,
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: u32,
    pub activation: Activation,
}

impl Config {
    /// Reads and validates `path` (a `config.json`).
    pub fn load(path: &Path) -> Result<Self> {
        if !path.is_file() {
            return Err(Error::MissingFile {
                path: path.to_path_buf(),
                what: "config.json (not a Hugging Face checkpoint directory?)",
            });
        }
        let text = std::fs::read_to_string(path).map_err(crate::error::io_err(path))?;
        let json: Value =
            serde_json::from_str(&text).map_err(|e| config_err(path, e.to_string()))?;
        Self::from_json(path, &json)
    }

    fn from_json(path: &Path, json: &Value) -> Result<Self> {
        let model_type = json["model_type"].as_str().unwrap_or_default().to_string();
        let architecture = match model_type.as_str() {
            "bert" => Architecture::Bert,
            "distilbert" => Architecture::DistilBert,
            "roberta" | "xlm-roberta" => Architecture::Roberta,
            _ => {
                return Err(Error::UnknownModelType {
                    path: path.to_path_buf(),
                    model_type,
                })
            }
        };
        let position_type = json["position_embedding_type"]
            .as_str()
            .unwrap_or("absolute");
        if position_type != "absolute" {
            return Err(config_err(
                path,
                format!("position_embedding_type {position_type:?} is not supported"),
            ));
        }
        let f = Fields { path, json };
        let distil = architecture == Architecture::DistilBert;
        let pick =
            |bert: &'static str, distilbert: &'static str| if distil { distilbert } else { bert };
        Ok(Self {
            architecture,
            vocab_size: f.usize("vocab_size")?,
            hidden_size: f.usize(pick("hidden_size", "dim"))?,
            num_layers: f.usize(pick("num_hidden_layers", "n_layers"))?,
            num_heads: f.usize(pick("num_attention_heads", "n_heads"))?,
            intermediate_size: f.usize(pick("intermediate_size", "hidden_dim"))?,
            max_position_embeddings: f.usize("max_position_embeddings")?,
            type_vocab_size: if distil {
                0
            } else {
                f.usize_or("type_vocab_size", 2)
            },
            // DistilBERT hard-codes its LayerNorm epsilon.
            layer_norm_eps: if distil {
                1e-12
            } else {
                json["layer_norm_eps"].as_f64().unwrap_or(1e-12)
            },
            pad_token_id: f.usize_or("pad_token_id", 0) as u32,
            activation: f.activation(pick("hidden_act", "activation"))?,
            model_type,
        })
    }
}

struct Fields<'a> {
    path: &'a Path,
    json: &'a Value,
}

impl Fields<'_> {
    fn usize(&self, key: &str) -> Result<usize> {
        self.json[key]
            .as_u64()
            .map(|v| v as usize)
            .ok_or_else(|| config_err(self.path, format!("missing or non-integer field {key:?}")))
    }

    fn usize_or(&self, key: &str, default: usize) -> usize {
        self.json[key].as_u64().map_or(default, |v| v as usize)
    }

    fn activation(&self, key: &str) -> Result<Activation> {
        match self.json[key].as_str().unwrap_or("gelu") {
            "gelu" => Ok(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            other => Err(config_err(
                self.path,
                format!("activation {other:?} is not supported"),
            )),
        }
    }
}

fn config_err(path: &Path, message: String) -> Error {
    Error::Config {
        path: path.to_path_buf(),
        message,
    }
}

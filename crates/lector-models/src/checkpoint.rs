//! A Hugging Face checkpoint directory: `config.json`, weights, `tokenizer.json`.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::packed_gemm::{with_precision, Precision};
use crate::qa::QaModel;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// Weight files in order of preference.
const WEIGHT_FILES: [&str; 2] = ["model.safetensors", "pytorch_model.bin"];

/// A loaded question-answering checkpoint.
pub struct Checkpoint {
    pub dir: PathBuf,
    pub config: Config,
    pub model: QaModel,
    /// Truncation and padding switched off: the reader builds its own windows and batches.
    pub tokenizer: Tokenizer,
    /// The tokenizer's `cls_token`, left unmasked by the pipeline (it carries the no-answer score).
    pub cls_token_id: Option<u32>,
}

impl Checkpoint {
    /// Loads and cross-checks everything in `dir`.
    pub fn load(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::MissingFile {
                path: dir.to_path_buf(),
                what: "checkpoint directory",
            });
        }
        let config = Config::load(&dir.join("config.json"))?;
        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"))?;
        check_vocab(dir, &tokenizer, &config)?;
        let model = QaModel::load(&weights_path(dir)?, &config)?;
        let cls_token_id = cls_token_id(dir, &tokenizer);
        Ok(Self {
            dir: dir.to_path_buf(),
            config,
            model,
            tokenizer,
            cls_token_id,
        })
    }

    /// The checkpoint's model loaded again with its products in `precision` (the model in
    /// [`Checkpoint::model`] has the process-wide one, see [`crate::set_precision`]).
    pub fn load_model(&self, precision: Precision) -> Result<QaModel> {
        let weights = weights_path(&self.dir)?;
        with_precision(precision, || QaModel::load(&weights, &self.config))
    }
}

/// The weights file of `dir`: `model.safetensors`, else `pytorch_model.bin`.
pub fn weights_path(dir: &Path) -> Result<PathBuf> {
    WEIGHT_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| Error::MissingFile {
            path: dir.to_path_buf(),
            what: "weights (model.safetensors or pytorch_model.bin)",
        })
}

/// `tokenizer.json` at `path`, with truncation and padding switched off.
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer> {
    if !path.is_file() {
        return Err(Error::MissingFile {
            path: path.to_path_buf(),
            what: "tokenizer.json (a fast tokenizer is required)",
        });
    }
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| Error::Tokenizer {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(None)
        .map_err(|e| Error::Tokenizer {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    Ok(tokenizer)
}

/// Every id the tokenizer can produce must index the embedding table.
fn check_vocab(dir: &Path, tokenizer: &Tokenizer, config: &Config) -> Result<()> {
    let size = tokenizer.get_vocab_size(true);
    if size > config.vocab_size {
        return Err(Error::VocabMismatch {
            path: dir.to_path_buf(),
            tokenizer: size,
            model: config.vocab_size,
        });
    }
    Ok(())
}

/// The id of the checkpoint's `cls_token` (see [`Checkpoint::cls_token_id`]).
pub fn cls_token_id(dir: &Path, tokenizer: &Tokenizer) -> Option<u32> {
    cls_token(dir).and_then(|token| tokenizer.token_to_id(&token))
}

/// `cls_token` from `tokenizer_config.json` or `special_tokens_map.json`, else the usual spellings.
fn cls_token(dir: &Path) -> Option<String> {
    let from_file = |name: &str| -> Option<String> {
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).ok()?).ok()?;
        let token = &json["cls_token"];
        token
            .as_str()
            .or_else(|| token["content"].as_str())
            .map(str::to_string)
    };
    from_file("tokenizer_config.json")
        .or_else(|| from_file("special_tokens_map.json"))
        .or_else(|| cls_from_vocab(dir))
}

fn cls_from_vocab(dir: &Path) -> Option<String> {
    let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).ok()?;
    ["[CLS]", "<s>"]
        .into_iter()
        .find(|t| tokenizer.token_to_id(t).is_some())
        .map(str::to_string)
}

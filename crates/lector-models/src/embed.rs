//! Sentence embeddings with a bi-encoder: a bare encoder (no task head), pooled over the real
//! tokens of each text and L2-normalised, as sentence-transformers describes the model:
//!
//! - `modules.json` lists the modules after the encoder: a `Pooling` module (its folder's
//!   `config.json` says mean or CLS pooling) and optionally `Normalize`. Any other module
//!   (`Dense`, `LayerNorm`, ...) or pooling mode (max, weighted mean, last token, several at once)
//!   is refused by name rather than run wrongly.
//! - `config_sentence_transformers.json`'s `prompts` give the text put before a query
//!   (`query`) and before a passage (`passage` or `document`), as E5 and BGE models expect.
//! - A folder with none of these files is all-MiniLM-L6-v2's recipe: mean pooling, normalised.
//!
//! With normalisation, a dot product of two embeddings is their cosine similarity.

use crate::checkpoint::{load_tokenizer, weights_path};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::qa::{open_weights, Encoder};
use crate::Inputs;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationParams};

/// Tokens per text (special tokens included), as sentence-transformers' `max_seq_length` for
/// all-MiniLM-L6-v2. The model's `tokenizer.json` says 128 (and pads to 128); padding is switched
/// off and truncation set here so that pads never enter the mean.
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// Texts per forward pass. Texts are sorted by length first, so a batch pads little.
const BATCH: usize = 32;

/// How token states become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of the real tokens' states.
    Mean,
    /// The first token's state (`[CLS]`, `<s>`).
    Cls,
}

/// The sentence-transformers description of a checkpoint: pooling, normalisation, prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    pub pooling: Pooling,
    /// Scale each vector to unit length (a `Normalize` module).
    pub normalize: bool,
    /// Put before each query.
    pub query_prefix: String,
    /// Put before each passage.
    pub passage_prefix: String,
}

/// all-MiniLM-L6-v2's recipe, taken by a folder without sentence-transformers files: mean
/// pooling, normalised, no prefixes.
impl Default for Recipe {
    fn default() -> Self {
        Recipe {
            pooling: Pooling::Mean,
            normalize: true,
            query_prefix: String::new(),
            passage_prefix: String::new(),
        }
    }
}

impl Recipe {
    /// Reads `modules.json`, the pooling module's `config.json` and
    /// `config_sentence_transformers.json` in `dir`; refuses what lector cannot run.
    pub fn load(dir: &Path) -> Result<Recipe> {
        let modules_path = dir.join("modules.json");
        let mut recipe = Recipe::default();
        if let Some(modules) = read_json(&modules_path)? {
            recipe.normalize = false;
            let mut pooling = None;
            let listed = modules
                .as_array()
                .ok_or_else(|| config_error(&modules_path, "expected a list of modules"))?;
            for module in listed {
                let kind = module["type"].as_str().unwrap_or("");
                let name = kind.rsplit('.').next().unwrap_or(kind);
                match name {
                    "Transformer" => {}
                    "Pooling" => {
                        let folder = module["path"].as_str().unwrap_or("");
                        pooling = Some(read_pooling(&dir.join(folder).join("config.json"))?);
                    }
                    "Normalize" => recipe.normalize = true,
                    _ => {
                        return Err(config_error(
                            &modules_path,
                            &format!("lector cannot run the module `{kind}` (it runs Transformer, Pooling and Normalize)"),
                        ))
                    }
                }
            }
            recipe.pooling =
                pooling.ok_or_else(|| config_error(&modules_path, "no Pooling module"))?;
        }
        let prompts_path = dir.join("config_sentence_transformers.json");
        if let Some(config) = read_json(&prompts_path)? {
            let prompt = |names: &[&str]| {
                names
                    .iter()
                    .find_map(|n| config["prompts"][n].as_str())
                    .unwrap_or("")
                    .to_string()
            };
            recipe.query_prefix = prompt(&["query"]);
            recipe.passage_prefix = prompt(&["passage", "document", "doc"]);
        }
        Ok(recipe)
    }
}

/// The pooling a `1_Pooling/config.json` asks for; one mode of mean or CLS, else an error.
fn read_pooling(path: &Path) -> Result<Pooling> {
    let config =
        read_json(path)?.ok_or_else(|| config_error(path, "missing (modules.json names it)"))?;
    let on = |key: &str| config[key].as_bool().unwrap_or(false);
    if config.get("include_prompt").and_then(Value::as_bool) == Some(false) {
        return Err(config_error(
            path,
            "lector cannot pool without the prompt's tokens (`include_prompt: false`)",
        ));
    }
    let modes: Vec<&str> = [
        "pooling_mode_cls_token",
        "pooling_mode_mean_tokens",
        "pooling_mode_max_tokens",
        "pooling_mode_mean_sqrt_len_tokens",
        "pooling_mode_weightedmean_tokens",
        "pooling_mode_lasttoken",
    ]
    .into_iter()
    .filter(|key| on(key))
    .collect();
    match modes.as_slice() {
        ["pooling_mode_cls_token"] => Ok(Pooling::Cls),
        ["pooling_mode_mean_tokens"] => Ok(Pooling::Mean),
        [] => Err(config_error(path, "no pooling mode is on")),
        other => Err(config_error(
            path,
            &format!(
                "lector pools by one of mean or CLS, not {}",
                other.join(" + ")
            ),
        )),
    }
}

/// A JSON file, `None` when it does not exist.
fn read_json(path: &Path) -> Result<Option<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| config_error(path, &e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(config_error(path, &e.to_string())),
    }
}

fn config_error(path: &Path, message: &str) -> Error {
    Error::Config {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// A loaded sentence embedder.
pub struct SentenceEmbedder {
    dir: PathBuf,
    config: Config,
    encoder: Encoder,
    tokenizer: Tokenizer,
    max_tokens: usize,
    recipe: Recipe,
}

impl SentenceEmbedder {
    /// Loads the encoder checkpoint in `dir` (`config.json`, weights, `tokenizer.json`) and its
    /// [`Recipe`]; a task head, if present, is ignored.
    pub fn load(dir: &Path) -> Result<Self> {
        let recipe = Recipe::load(dir)?;
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
            recipe,
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

    /// How texts become vectors.
    pub fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    /// Passages' embeddings, each text after the recipe's passage prefix.
    pub fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_prefixed(&self.recipe.passage_prefix, texts)
    }

    /// Queries' embeddings, each text after the recipe's query prefix.
    pub fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_prefixed(&self.recipe.query_prefix, texts)
    }

    fn embed_prefixed(&self, prefix: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if prefix.is_empty() {
            return self.embed(texts);
        }
        let prefixed: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        self.embed(&prefixed.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// One embedding per text as given (no prefix), in order. An empty text embeds its special
    /// tokens.
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
        let recipe = &self.recipe;
        Ok(hidden
            .windows()
            .map(|states| {
                let states = &hidden.data[states];
                let pooled = match recipe.pooling {
                    Pooling::Mean => mean(states, hidden.width),
                    Pooling::Cls => states[..hidden.width]
                        .iter()
                        .map(|&v| f64::from(v))
                        .collect(),
                };
                scaled(pooled, recipe.normalize)
            })
            .collect())
    }
}

/// A right-padded batch of `rows`, every token of type 0 (one text per row).
fn pad(rows: &[&[u32]], pad_id: u32) -> Inputs {
    let zeros = vec![0; rows.iter().map(|r| r.len()).max().unwrap_or(0)];
    let pairs: Vec<(&[u32], &[u32])> = rows.iter().map(|r| (*r, &zeros[..r.len()])).collect();
    Inputs::right_padded(&pairs, pad_id)
}

/// The mean of the token states `(tokens, dim)`.
fn mean(states: &[f32], dim: usize) -> Vec<f64> {
    let mut sum = vec![0f64; dim];
    for token in states.chunks_exact(dim) {
        for (s, &v) in sum.iter_mut().zip(token) {
            *s += f64::from(v);
        }
    }
    let tokens = (states.len() / dim).max(1) as f64;
    sum.iter().map(|s| s / tokens).collect()
}

/// `vector` as float32, scaled to unit length when `normalize` (sentence-transformers clamps
/// the norm at 1e-12 the same way).
fn scaled(vector: Vec<f64>, normalize: bool) -> Vec<f32> {
    let scale = match normalize {
        true => 1.0 / vector.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12),
        false => 1.0,
    };
    vector.iter().map(|v| (v * scale) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_is_normalised_and_ignores_nothing_but_padding() {
        let v = scaled(mean(&[1.0, 0.0, 3.0, 4.0], 2), true);
        // mean (2, 2) -> unit (0.7071, 0.7071)
        assert!((v[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert!((v[1] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        let zero = scaled(mean(&[0.0, 0.0], 2), true);
        assert_eq!(zero, vec![0.0, 0.0]);
        assert_eq!(scaled(mean(&[1.0, 0.0, 3.0, 4.0], 2), false), [2.0, 2.0]);
    }

    fn write(dir: &Path, name: &str, text: &str) {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn recipes_are_read_from_sentence_transformers_files_and_the_unrunnable_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Recipe::load(dir.path()).unwrap(), Recipe::default());
        let modules = r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]"#;
        write(dir.path(), "modules.json", modules);
        write(
            dir.path(),
            "1_Pooling/config.json",
            r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
        );
        write(
            dir.path(),
            "config_sentence_transformers.json",
            r#"{"prompts": {"query": "query: ", "document": "passage: "}}"#,
        );
        let recipe = Recipe::load(dir.path()).unwrap();
        assert_eq!((recipe.pooling, recipe.normalize), (Pooling::Cls, false));
        assert_eq!(
            (recipe.query_prefix.as_str(), recipe.passage_prefix.as_str()),
            ("query: ", "passage: ")
        );

        write(
            dir.path(),
            "1_Pooling/config.json",
            r#"{"pooling_mode_max_tokens": true}"#,
        );
        let err = Recipe::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("1_Pooling/config.json") && err.contains("pooling_mode_max_tokens"),
            "{err}"
        );
        let dense = modules.replace("]", r#", {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]"#);
        write(dir.path(), "modules.json", &dense);
        write(
            dir.path(),
            "1_Pooling/config.json",
            r#"{"pooling_mode_mean_tokens": true}"#,
        );
        let err = Recipe::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("sentence_transformers.models.Dense"), "{err}");
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

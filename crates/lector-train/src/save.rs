//! Writing what training produces: Hugging Face layout directories (loadable by transformers and
//! by lector) and resumable checkpoints, each replaced atomically so that a kill at any moment
//! leaves a complete previous version.

use crate::error::{io_err, Error, Result};
use crate::model::{HeadKind, Network};
use crate::optim::AdamW;
use lector_models::Architecture;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// Files copied from the starting checkpoint, when present: the tokenizer's, and
/// sentence-transformers' description of an embedder.
const COPIED_FILES: [&str; 11] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "sentencepiece.bpe.model",
    "added_tokens.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
];

/// The transformers class of a network with a task head (`None` for a bare encoder).
fn task_class(net: &Network) -> Option<String> {
    let family = match (net.config.architecture, net.config.model_type.as_str()) {
        (Architecture::Bert, _) => "Bert",
        (Architecture::DistilBert, _) => "DistilBert",
        (Architecture::Roberta, "xlm-roberta") => "XLMRoberta",
        (Architecture::Roberta, _) => "Roberta",
    };
    match net.kind {
        HeadKind::Qa => Some(format!("{family}ForQuestionAnswering")),
        HeadKind::Classifier => Some(format!("{family}ForSequenceClassification")),
        HeadKind::Pooling => None,
    }
}

/// Writes the network's weights to `path` through a temporary file, moved in durably.
fn write_weights(net: &Network, path: &Path) -> Result<()> {
    let tmp = path.with_extension("safetensors.tmp");
    net.save_weights(&tmp)?;
    lector_index::rename_durably(&tmp, path).map_err(io_err(path))
}

fn sync_dir(dir: &Path) -> Result<()> {
    lector_index::sync_dir(dir).map_err(io_err(dir))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    lector_index::write_durably(path, bytes).map_err(io_err(path))
}

/// Saves the network as a `...ForQuestionAnswering` checkpoint in `dir`, with the tokenizer files
/// of the checkpoint it started from (`source`).
pub fn save_model(net: &Network, source: &Path, dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    write_weights(net, &dir.join("model.safetensors"))?;
    let mut config = net.config_json.clone();
    if let Some(map) = config.as_object_mut() {
        if let Some(class) = task_class(net) {
            map.insert("architectures".into(), serde_json::json!([class]));
        }
        if net.kind == HeadKind::Classifier {
            map.insert("id2label".into(), serde_json::json!({"0": "LABEL_0"}));
            map.insert("label2id".into(), serde_json::json!({"LABEL_0": 0}));
        }
        map.remove("torch_dtype");
        map.insert("dtype".into(), "float32".into());
    }
    let text = serde_json::to_string_pretty(&config).expect("a JSON value serialises");
    write_file(&dir.join("config.json"), text.as_bytes())?;
    for name in COPIED_FILES {
        let from = source.join(name);
        if from.is_file() && source != dir {
            write_file(&dir.join(name), &fs::read(&from).map_err(io_err(&from))?)?;
        }
    }
    sync_dir(dir)
}

/// Dev-set scores of one evaluation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DevScores {
    pub epoch: usize,
    pub step: usize,
    pub exact: f64,
    pub f1: f64,
    /// SQuAD v2.0 data: the best F1 over no-answer thresholds and that threshold.
    pub best_f1: Option<f64>,
    pub best_f1_thresh: Option<f64>,
}

impl DevScores {
    /// The score checkpoints are chosen by: the best-threshold F1 for v2.0 data, else F1.
    pub fn key(&self) -> f64 {
        self.best_f1.unwrap_or(self.f1)
    }
}

/// Where a run stands, saved with each checkpoint.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunState {
    /// Optimiser steps completed.
    pub step: usize,
    pub best: Option<DevScores>,
}

const CHECKPOINT: &str = "checkpoint";
const PARTIAL: &str = "checkpoint.partial";
const OLD: &str = "checkpoint.old";

/// Saves weights, optimiser moments and state under `out/checkpoint/`. The new checkpoint is
/// written beside the old one and swapped in by two renames; until the second, `checkpoint.old`
/// is the complete previous one (see [`read_checkpoint`]).
pub fn write_checkpoint(out: &Path, net: &Network, opt: &AdamW, state: &RunState) -> Result<()> {
    let partial = out.join(PARTIAL);
    if partial.exists() {
        fs::remove_dir_all(&partial).map_err(io_err(&partial))?;
    }
    fs::create_dir_all(&partial).map_err(io_err(&partial))?;
    write_weights(net, &partial.join("model.safetensors"))?;
    let (moments, moments_tmp) = (
        partial.join("optimizer.safetensors"),
        partial.join("optimizer.safetensors.tmp"),
    );
    opt.save(&net.params, &moments_tmp)?;
    lector_index::rename_durably(&moments_tmp, &moments).map_err(io_err(&moments))?;
    let state_json = serde_json::to_vec_pretty(state).expect("state serialises");
    write_file(&partial.join("state.json"), &state_json)?;
    let (current, old) = (out.join(CHECKPOINT), out.join(OLD));
    if current.exists() {
        if old.exists() {
            fs::remove_dir_all(&old).map_err(io_err(&old))?;
        }
        fs::rename(&current, &old).map_err(io_err(&current))?;
    }
    fs::rename(&partial, &current).map_err(io_err(&partial))?;
    sync_dir(out)?;
    if old.exists() {
        fs::remove_dir_all(&old).map_err(io_err(&old))?;
    }
    Ok(())
}

/// Loads the latest complete checkpoint of `out` into `net` and `opt`, if there is one.
pub fn read_checkpoint(out: &Path, net: &Network, opt: &mut AdamW) -> Result<Option<RunState>> {
    let Some(dir) = [CHECKPOINT, OLD]
        .iter()
        .map(|name| out.join(name))
        .find(|dir| dir.join("state.json").is_file())
    else {
        return Ok(None);
    };
    let state_path = dir.join("state.json");
    let text = fs::read_to_string(&state_path).map_err(io_err(&state_path))?;
    let state: RunState = serde_json::from_str(&text).map_err(|e| Error::Checkpoint {
        path: state_path.clone(),
        message: e.to_string(),
    })?;
    net.load_weights(&dir.join("model.safetensors"))?;
    opt.load(&net.params, &dir.join("optimizer.safetensors"))?;
    opt.step = state.step;
    Ok(Some(state))
}

/// `out/best/`: the checkpoint with the best dev score so far.
pub fn best_dir(out: &Path) -> PathBuf {
    out.join("best")
}

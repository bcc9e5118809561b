//! Broken checkpoints give errors that say what is wrong, never panics.

use lector_models::{Checkpoint, Error};
use std::path::{Path, PathBuf};

fn reader_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/reader-minilm-squad")
}

/// A temporary copy of the shipped reader's small files (weights are linked or rewritten by each test).
fn copy_of_reader(with_weights: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ] {
        std::fs::copy(reader_dir().join(name), dir.path().join(name)).unwrap();
    }
    if with_weights {
        std::os::unix::fs::symlink(
            reader_dir().join("model.safetensors"),
            dir.path().join("model.safetensors"),
        )
        .unwrap();
    }
    dir
}

fn load_err(dir: &Path) -> Error {
    match Checkpoint::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e,
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("config.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut json);
    std::fs::write(&path, json.to_string()).unwrap();
}

#[test]
fn shipped_reader_loads() {
    let ckpt = Checkpoint::load(&reader_dir()).unwrap();
    assert_eq!(ckpt.config.num_layers, 6);
    assert_eq!(ckpt.cls_token_id, Some(101));
}

#[test]
fn missing_directory_and_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert!(matches!(load_err(&missing), Error::MissingFile { .. }));
    let e = load_err(dir.path());
    assert!(e.to_string().contains("config.json"), "{e}");

    let dir = copy_of_reader(false);
    let e = load_err(dir.path());
    assert!(
        e.to_string()
            .contains("model.safetensors or pytorch_model.bin"),
        "{e}"
    );

    let dir = copy_of_reader(true);
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let e = load_err(dir.path());
    assert!(e.to_string().contains("tokenizer.json"), "{e}");
}

#[test]
fn unknown_model_type_is_named() {
    let dir = copy_of_reader(true);
    edit_config(dir.path(), |c| c["model_type"] = "gpt2".into());
    let e = load_err(dir.path());
    assert!(
        matches!(&e, Error::UnknownModelType { model_type, .. } if model_type == "gpt2"),
        "{e}"
    );
    assert!(e.to_string().contains("unknown model_type \"gpt2\""), "{e}");
}

#[test]
fn tokenizer_larger_than_the_model_vocabulary_is_refused() {
    let dir = copy_of_reader(true);
    edit_config(dir.path(), |c| c["vocab_size"] = 1000.into());
    let e = load_err(dir.path());
    assert!(
        matches!(
            e,
            Error::VocabMismatch {
                tokenizer: 30522,
                model: 1000,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn encoder_without_qa_head_is_not_a_reader() {
    let dir = copy_of_reader(false);
    let tensors = candle_core::safetensors::load(
        reader_dir().join("model.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let encoder_only: std::collections::HashMap<_, _> = tensors
        .into_iter()
        .filter(|(name, _)| !name.starts_with("qa_outputs"))
        .collect();
    candle_core::safetensors::save(&encoder_only, dir.path().join("model.safetensors")).unwrap();
    let e = load_err(dir.path());
    assert!(matches!(e, Error::NoQaHead { .. }), "{e}");
    assert!(e
        .to_string()
        .contains("checkpoint has no qa_outputs weights: not a question-answering model"));
}

#[test]
fn truncated_weights_are_an_error() {
    let dir = copy_of_reader(false);
    std::fs::write(dir.path().join("model.safetensors"), b"not safetensors").unwrap();
    assert!(matches!(load_err(dir.path()), Error::Weights { .. }));
}

#[test]
fn malformed_config_is_an_error() {
    let dir = copy_of_reader(true);
    std::fs::write(dir.path().join("config.json"), "{ not json").unwrap();
    assert!(matches!(load_err(dir.path()), Error::Config { .. }));
    edit_config_raw(dir.path(), r#"{"model_type": "bert"}"#);
    let e = load_err(dir.path());
    assert!(e.to_string().contains("vocab_size"), "{e}");
}

fn edit_config_raw(dir: &Path, text: &str) {
    std::fs::write(dir.join("config.json"), text).unwrap();
}

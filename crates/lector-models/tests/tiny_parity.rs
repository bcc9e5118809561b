//! Architecture parity: tiny random checkpoints (tools/make_tiny_checkpoints.py) give the logits
//! transformers computed, window by window, for every architecture and weight format.

use lector_models::{Checkpoint, Inputs};
use serde_json::Value;
use std::path::{Path, PathBuf};

const TOLERANCE: f32 = 1e-4;

pub fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn ints(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Every window of every case, one at a time and all windows of a case as one padded batch.
fn check_logits(name: &str) {
    let dir = fixture_dir(name);
    let ckpt = Checkpoint::load(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    for case in expected["cases"].as_array().unwrap() {
        let windows = case["windows"].as_array().unwrap();
        let batch = padded(windows, ckpt.config.pad_token_id);
        let out = ckpt.model.forward(&batch).unwrap();
        for (i, w) in windows.iter().enumerate() {
            let len = w["input_ids"].as_array().unwrap().len();
            let (start, end) = out.row(i);
            let (ds, de) = (
                max_diff(&start[..len], &floats(&w["start_logits"])),
                max_diff(&end[..len], &floats(&w["end_logits"])),
            );
            assert!(
                ds < TOLERANCE && de < TOLERANCE,
                "{name} {} window {i}: max diff {ds} / {de}",
                case["name"]
            );
        }
    }
}

fn padded(windows: &[Value], pad: u32) -> Inputs {
    let seq_len = windows
        .iter()
        .map(|w| w["input_ids"].as_array().unwrap().len())
        .max()
        .unwrap();
    let mut inputs = Inputs {
        seq_len,
        ..Inputs::default()
    };
    for w in windows {
        let (ids, types) = (ints(&w["input_ids"]), ints(&w["token_type_ids"]));
        let pad_n = seq_len - ids.len();
        inputs
            .mask
            .extend((0..seq_len).map(|i| u32::from(i < ids.len())));
        inputs
            .ids
            .extend(ids.into_iter().chain(std::iter::repeat_n(pad, pad_n)));
        inputs
            .type_ids
            .extend(types.into_iter().chain(std::iter::repeat_n(0, pad_n)));
        inputs.batch += 1;
    }
    inputs
}

#[test]
fn tiny_bert_logits() {
    check_logits("tiny-bert");
}

#[test]
fn tiny_bert_f16_logits() {
    check_logits("tiny-bert-f16");
}

#[test]
fn tiny_bert_pytorch_pickle_logits() {
    check_logits("tiny-bert-pth");
}

#[test]
fn tiny_distilbert_logits() {
    check_logits("tiny-distilbert");
}

#[test]
fn tiny_roberta_logits() {
    check_logits("tiny-roberta");
}

#[test]
fn tiny_xlm_roberta_logits() {
    check_logits("tiny-xlm-roberta");
}

#[test]
fn tiny_bert_without_head_is_refused() {
    let err = Checkpoint::load(&fixture_dir("tiny-bert-nohead"))
        .err()
        .expect("not a QA model");
    assert!(
        matches!(err, lector_models::Error::NoQaHead { .. }),
        "{err}"
    );
}

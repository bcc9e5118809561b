//! The network `train embedder` optimises computes the embeddings lector's inference embedder
//! (`lector_models::SentenceEmbedder`, used by `index add --dense`) computes from the same
//! weights: the two encoders are separate code (candle autograd ops here, packed kernels there),
//! so a difference would mean training optimises something inference does not use.

use lector_models::checkpoint::load_tokenizer;
use lector_models::SentenceEmbedder;
use lector_train::model::{Batch, HeadKind, Network};
use std::path::{Path, PathBuf};

fn checkpoint(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lector-models/tests/fixtures")
        .join(name)
}

/// Texts of different lengths (a padded batch), with accents, CJK and digits.
const TEXTS: [&str; 5] = [
    "Who wrote the book?",
    "The city of Bonn lies on the Rhine, and its university was founded in 1818.",
    "Café Odéon opened in 1911 — 寿司 was served.",
    "x",
    "The museum is near the old church; visitors walk there from the station through the market square.",
];

/// Rows scaled to unit length, as the inference embedder returns them.
fn unit_rows(rows: Vec<Vec<f32>>) -> Vec<Vec<f32>> {
    rows.into_iter()
        .map(|row| {
            let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
            row.iter().map(|v| v / norm).collect()
        })
        .collect()
}

fn check(name: &str) {
    let dir = checkpoint(name);
    let inference = SentenceEmbedder::load(&dir).unwrap().embed(&TEXTS).unwrap();

    let net = Network::load_with(&dir, 0, HeadKind::Pooling).unwrap();
    let tokenizer = load_tokenizer(&dir.join("tokenizer.json")).unwrap();
    let encodings: Vec<_> = TEXTS
        .iter()
        .map(|text| tokenizer.encode(*text, true).unwrap())
        .collect();
    let rows: Vec<(&[u32], &[u32])> = encodings
        .iter()
        .map(|e| (e.get_ids(), e.get_type_ids()))
        .collect();
    let batch = Batch::new(&rows, &net.config).unwrap();
    let training = unit_rows(net.embed(&batch, None).unwrap().to_vec2::<f32>().unwrap());

    for ((text, ours), theirs) in TEXTS.iter().zip(&training).zip(&inference) {
        assert_eq!(ours.len(), theirs.len());
        let diff = ours
            .iter()
            .zip(theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(diff < 1e-5, "{name}, {text:?}: max |diff| {diff}");
    }
}

#[test]
fn bert_training_embeddings_equal_inference() {
    check("tiny-bert");
}

#[test]
fn distilbert_training_embeddings_equal_inference() {
    check("tiny-distilbert");
}

#[test]
fn roberta_training_embeddings_equal_inference() {
    check("tiny-roberta");
}

#[test]
fn xlm_roberta_training_embeddings_equal_inference() {
    check("tiny-xlm-roberta");
}

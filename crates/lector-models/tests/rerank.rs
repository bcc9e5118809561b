//! The cross-encoder reranker: a tiny random `BertForSequenceClassification`
//! (tools/make_tiny_checkpoints.py) scores question-passage pairs as transformers does, and
//! checkpoints that are not rerankers are refused with the reason.

use lector_models::{CrossEncoder, Error};
use serde_json::Value;
use std::path::{Path, PathBuf};

const TOLERANCE: f32 = 1e-4;

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn tiny_reranker_scores_match_transformers_in_a_batch_and_one_by_one() {
    let dir = fixture_dir("tiny-bert-rerank");
    let model = CrossEncoder::load(&dir).unwrap();
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let cases = expected["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for case in cases {
        let question = case["question"].as_str().unwrap();
        let passages: Vec<&str> = case["passages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        let want: Vec<f32> = case["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap() as f32)
            .collect();
        let batch = model.score(question, &passages).unwrap();
        for (i, (&got, &want)) in batch.iter().zip(&want).enumerate() {
            assert!(
                (got - want).abs() < TOLERANCE,
                "{question} #{i}: {got} vs {want}"
            );
            let alone = model.score(question, &passages[i..=i]).unwrap()[0];
            assert!(
                (alone - want).abs() < TOLERANCE,
                "{question} #{i} alone: {alone} vs {want}"
            );
        }
    }
}

#[test]
fn the_long_passage_case_is_truncated_to_the_model_positions() {
    // The fixture's second case needs truncation: without it the 128 positions would overflow.
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture_dir("tiny-bert-rerank").join("expected.json")).unwrap(),
    )
    .unwrap();
    let ids = &expected["cases"][1]["input_ids"][0];
    assert_eq!(ids.as_array().unwrap().len(), 128);
}

#[test]
fn checkpoints_without_a_one_label_classifier_are_not_rerankers() {
    for name in ["tiny-bert", "tiny-bert-nohead"] {
        match CrossEncoder::load(&fixture_dir(name)) {
            Err(Error::NoRerankHead { why, .. }) => assert!(why.contains("classifier"), "{why}"),
            Err(e) => panic!("{name}: unexpected error {e}"),
            Ok(_) => panic!("{name} loaded as a reranker"),
        }
    }
    let err = CrossEncoder::load(&fixture_dir("tiny-roberta"))
        .err()
        .expect("RoBERTa refused");
    assert!(err.to_string().contains("only BERT-family"), "{err}");
}

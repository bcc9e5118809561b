//! `bertscore::BertScorer` on the tiny fixtures against the `bert-score` package's own scores
//! (recorded in lector-cli's tests/fixtures/bertscore, see its README): uniform weights, idf and
//! baseline rescaling, the degenerate items the package warns about, and layer bounds.

use lector_eval::bertscore::{read_items, Baseline, Item};
use lector_models::bertscore::{package_default_layer, BertScorer, ScoreOptions, Scored};
use lector_models::TokenEncoder;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The package's scores agree with lector's to float precision.
const TOLERANCE: f64 = 1e-5;

fn recorded(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lector-cli/tests/fixtures/bertscore")
        .join(name)
}

fn tiny_bert() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-bert")
}

fn items() -> Vec<Item> {
    read_items(&recorded("items.jsonl")).unwrap()
}

/// Scores the items as the recorded run `name` did and compares every P, R and F1.
fn check_recorded_run(name: &str, items: &[Item]) -> Scored {
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(recorded(name)).unwrap()).unwrap();
    let layer = run["layer"].as_u64().unwrap() as usize;
    let scorer = BertScorer::new(TokenEncoder::load(&tiny_bert()).unwrap(), layer).unwrap();
    let baseline = run["baseline"].as_str().map(|file| {
        Baseline::read(&recorded(file))
            .unwrap()
            .at_layer(layer)
            .unwrap()
    });
    let options = ScoreOptions {
        idf: run["idf"].as_bool().unwrap(),
        baseline,
    };
    let mut calls = Vec::new();
    let scored = scorer
        .score(items, &options, &mut |done, total| {
            calls.push((done, total))
        })
        .unwrap();
    let want = run["scores"].as_array().unwrap();
    assert_eq!(scored.scores.len(), want.len(), "{name}");
    for ((item, got), want) in items.iter().zip(&scored.scores).zip(want) {
        assert_eq!(want["id"], item.id.as_str(), "{name}");
        for (metric, value) in [
            ("precision", got.precision),
            ("recall", got.recall),
            ("f1", got.f1),
        ] {
            let expected = want[metric].as_f64().unwrap_or(f64::NAN);
            let same =
                (value - expected).abs() <= TOLERANCE || (value.is_nan() && expected.is_nan());
            assert!(
                same,
                "{name}: {} {metric}: lector {value}, package {expected}",
                item.id
            );
        }
    }
    // Progress ends at every distinct text.
    let &(done, total) = calls.last().expect("progress is reported");
    assert_eq!(done, total);
    scored
}

#[test]
fn tiny_bert_scores_are_the_packages() {
    let items = items();
    let uniform = check_recorded_run("tiny-bert-L2.json", &items);
    check_recorded_run("tiny-bert-L1-idf.json", &items);
    check_recorded_run("tiny-bert-L2-idf-baseline.json", &items);
    // The items hold two empty candidates (one only U+001F) and one empty reference.
    assert_eq!((uniform.empty_candidates, uniform.empty_references), (2, 1));
}

#[test]
fn a_layer_the_model_lacks_is_refused_and_unknown_models_have_no_package_layer() {
    let encoder = TokenEncoder::load(&tiny_bert()).unwrap();
    let message = BertScorer::new(encoder, 3).err().unwrap().to_string();
    assert!(
        message.contains("2 layers") && message.contains("not 3"),
        "{message}"
    );
    assert_eq!(package_default_layer(&tiny_bert()), None);
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("roberta-large");
    std::fs::create_dir(&named).unwrap();
    assert_eq!(package_default_layer(&named), Some(17));
}

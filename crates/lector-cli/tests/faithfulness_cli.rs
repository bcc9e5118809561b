//! `lector eval faithfulness` on a slice of the committed perturbation set
//! (bench/data/faithfulness-squad.jsonl, built by bench/faithfulness_set.py from SQuAD v1.1 dev):
//! the claim checker ranks unsupported claims far better than today's word overlap.

mod common;

use common::{fails, lector, ok};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn set() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/data/faithfulness-squad.jsonl")
}

/// Every third claim of the set (100 of 300, all kinds), written to `dir`.
fn slice(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(set()).expect("the committed claim set");
    let lines: Vec<&str> = text.lines().step_by(3).collect();
    assert_eq!(lines.len(), 100);
    let path = dir.join("slice.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn the_claim_checker_separates_unsupported_claims_where_word_overlap_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let slice = slice(dir.path());
    let per_claim = dir.path().join("per_claim.jsonl");
    let out = ok(&lector(&[
        "eval",
        "faithfulness",
        slice.to_str().unwrap(),
        "--json",
        "--per-claim",
        per_claim.to_str().unwrap(),
    ]));
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["claims"], 100);
    let claims = report["checkers"]["claims"]["auroc"].as_f64().unwrap();
    let overlap = report["checkers"]["word_overlap"]["auroc"]
        .as_f64()
        .unwrap();
    assert!(claims >= 0.95, "claim checker AUROC {claims}");
    assert!(overlap < 0.9, "word overlap AUROC {overlap}");
    assert!(report["checkers"]["claims"]["accuracy"].as_f64().unwrap() >= 90.0);
    let kinds: Vec<&str> = report["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    for kind in [
        "copied",
        "paraphrased",
        "negated",
        "number",
        "entity",
        "date",
        "unrelated",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    // Negations are invisible to word overlap ("not" is a stop word); the checker sees them.
    let negated = report["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "negated")
        .unwrap();
    assert_eq!(negated["top_failure"], "negation", "{negated}");
    assert!(
        negated["claims_accuracy"].as_f64().unwrap()
            > negated["overlap_accuracy"].as_f64().unwrap()
    );
    let rows = std::fs::read_to_string(&per_claim).unwrap();
    assert_eq!(rows.lines().count(), 100);
    let first: Value = serde_json::from_str(rows.lines().next().unwrap()).unwrap();
    for field in ["id", "kind", "label", "claims_score", "failures", "overlap"] {
        assert!(first.get(field).is_some(), "{field} missing from {first}");
    }
}

#[test]
fn the_table_names_both_checkers_and_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(&lector(&[
        "eval",
        "faithfulness",
        slice(dir.path()).to_str().unwrap(),
    ]));
    assert!(out.contains("100 claims"), "{out}");
    assert!(
        out.contains("claims (lexical)") && out.contains("word overlap"),
        "{out}"
    );
    assert!(
        out.contains("unrelated") && out.contains("paraphrased"),
        "{out}"
    );
}

#[test]
fn a_bad_label_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"id\": \"a\", \"passage\": \"P.\", \"claim\": \"C.\", \"label\": \"supported\", \"kind\": \"copied\"}\n\
         {\"id\": \"b\", \"passage\": \"P.\", \"claim\": \"C.\", \"label\": \"maybe\", \"kind\": \"copied\"}\n",
    )
    .unwrap();
    let err = fails(&lector(&["eval", "faithfulness", path.to_str().unwrap()]));
    assert!(err.contains("bad.jsonl:2:"), "{err}");
    assert!(err.contains("maybe"), "{err}");
}

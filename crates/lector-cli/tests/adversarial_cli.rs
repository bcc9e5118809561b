//! `lector eval adversarial` on real SQuAD v1.1 dev questions with the shipped reader: the
//! distractors land in the context, the reader is drawn to them, and answers taken from them are
//! told by their offsets.

mod common;

use common::{fails, lector, ok};
use serde_json::Value;

#[test]
fn distractors_are_inserted_scored_and_traced() {
    let dir = tempfile::tempdir().unwrap();
    let data = lector_eval::data::require("squad/dev-v1.1.json");
    let records = dir.path().join("records.jsonl");
    let html = dir.path().join("report.html");
    let out = ok(&lector(&[
        "eval",
        "adversarial",
        data.to_str().unwrap(),
        "--limit",
        "16",
        "--kind",
        "addsent,addany",
        "--position",
        "end,start",
        "--candidates",
        "2",
        "--per-question",
        records.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--json",
    ]));
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["questions"], 16);
    let variants = report["variants"].as_array().unwrap();
    let names: Vec<(String, String)> = variants
        .iter()
        .map(|v| {
            (
                v["kind"].as_str().unwrap().into(),
                v["position"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want = [
        ("addsent", "end"),
        ("addsent", "start"),
        ("addany", "end"),
        ("addany", "start"),
    ];
    assert_eq!(names, want.map(|(k, p)| (k.to_string(), p.to_string())));

    let rows: Vec<Value> = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let total: u64 = variants
        .iter()
        .map(|v| v["questions"].as_u64().unwrap())
        .sum();
    assert_eq!(rows.len() as u64, total);
    for (variant, (kind, position)) in variants.iter().zip(want) {
        let mine: Vec<&Value> = rows
            .iter()
            .filter(|r| r["kind"] == kind && r["position"] == position)
            .collect();
        assert_eq!(mine.len() as u64, variant["questions"].as_u64().unwrap());
        // The reported change is the mean of the per-question changes, in percent.
        let change: f64 = mine
            .iter()
            .map(|r| r["f1"].as_f64().unwrap() - r["original_f1"].as_f64().unwrap())
            .sum::<f64>()
            / mine.len() as f64;
        let reported = variant["f1_change"]["mean"].as_f64().unwrap();
        assert!(
            (reported - 100.0 * change).abs() < 1e-9,
            "{kind} {position}"
        );
        // An answer taken from the distractor is a piece of the distractor's text.
        let from: Vec<&&Value> = mine
            .iter()
            .filter(|r| r["from_distractor"] == true)
            .collect();
        for r in &from {
            let sentence = r["distractor"].as_str().unwrap();
            assert!(sentence.contains(r["prediction"].as_str().unwrap()), "{r}");
        }
        let share = 100.0 * from.len() as f64 / mine.len() as f64;
        assert!((variant["answers_from_distractor"].as_f64().unwrap() - share).abs() < 1e-9);
    }
    // The reader matches words: AddSent-style sentences at the end cost it F1 on real questions.
    let addsent_end = &variants[0];
    assert!(
        addsent_end["questions"].as_u64().unwrap() >= 8,
        "{addsent_end}"
    );
    assert!(
        addsent_end["f1_change"]["mean"].as_f64().unwrap() < -10.0,
        "{addsent_end}"
    );
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("With distractors"));

    let bad = lector(&[
        "eval",
        "adversarial",
        data.to_str().unwrap(),
        "--kind",
        "addword",
    ]);
    let err = fails(&bad);
    assert!(
        err.contains("unknown distractor `addword` (addsent or addany)"),
        "{err}"
    );
}

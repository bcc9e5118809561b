//! `lector eval odqa` with unanswerable questions: SQuAD v2.0's own, and questions whose article
//! is withheld from the index, on a real slice with the shipped reader.

mod common;

use common::{lector, ok};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

/// The first `paragraphs` paragraphs of the first `articles` articles of SQuAD v2.0 dev, each with
/// its first `questions` questions, written to `dir`; returns the path and the titles in order.
fn small_v2(
    dir: &Path,
    articles: usize,
    paragraphs: usize,
    questions: usize,
) -> (String, Vec<String>) {
    let path = lector_eval::data::require("squad/dev-v2.0.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let data = json["data"].as_array_mut().unwrap();
    data.truncate(articles);
    for article in data.iter_mut() {
        let paras = article["paragraphs"].as_array_mut().unwrap();
        paras.truncate(paragraphs);
        for p in paras {
            p["qas"].as_array_mut().unwrap().truncate(questions);
        }
    }
    let titles = data
        .iter()
        .map(|a| a["title"].as_str().unwrap().to_string())
        .collect();
    let out = dir.join("small-v2.json");
    std::fs::write(&out, json.to_string()).unwrap();
    (out.to_string_lossy().into_owned(), titles)
}

#[test]
fn unanswerable_and_withheld_questions_are_kept_and_abstentions_scored() {
    let dir = tempfile::tempdir().unwrap();
    let (data, titles) = small_v2(dir.path(), 2, 3, 4);
    let rows = dir.path().join("rows.jsonl");
    let out: Value = serde_json::from_str(&ok(&lector(&[
        "eval",
        "odqa",
        "--squad",
        &data,
        "--withhold-every",
        "2",
        "--k",
        "3",
        "--json",
        "--per-question",
        rows.to_str().unwrap(),
    ])))
    .unwrap();
    // The second article is out of the index: 3 paragraphs of the first remain.
    assert_eq!(out["documents"], 3, "{out}");
    assert_eq!(out["questions"], 24, "{out}");
    let squad: Value = serde_json::from_str(&std::fs::read_to_string(&data).unwrap()).unwrap();
    let withheld_ids: HashSet<String> = squad["data"][1]["paragraphs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["qas"].as_array().unwrap().iter())
        .filter(|qa| !qa["answers"].as_array().unwrap().is_empty())
        .map(|qa| qa["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!withheld_ids.is_empty());
    let rows: Vec<Value> = std::fs::read_to_string(&rows)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 24);
    let unanswerable: Vec<&Value> = rows.iter().filter(|r| r["has_answer"] == false).collect();
    assert_eq!(out["unanswerable"], unanswerable.len(), "{out}");
    // Withheld answerable questions became unanswerable unless the first article holds an answer.
    let became = rows
        .iter()
        .filter(|r| withheld_ids.contains(r["id"].as_str().unwrap()) && r["has_answer"] == false)
        .count();
    assert_eq!(out["withheld"], became, "{out}");
    assert!(became > 0, "{out}");
    assert!(
        unanswerable.len() > became,
        "SQuAD v2.0's own unanswerable questions are kept too: {out}"
    );
    assert!(titles.len() == 2);

    // Outcomes add up, and unanswerable questions have the two outcomes of their own.
    let outcomes = &out["outcomes"];
    let sum: u64 = outcomes
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(sum, 24, "{out}");
    for r in &rows {
        let abstained = r["prediction"].is_null();
        let expected = match (r["has_answer"].as_bool().unwrap(), abstained) {
            (false, true) => Some("correct_abstention"),
            (false, false) => Some("false_answer"),
            (true, _) => None,
        };
        match expected {
            Some(outcome) => assert_eq!(r["outcome"], outcome, "{r}"),
            None => assert!(
                !matches!(
                    r["outcome"].as_str(),
                    Some("correct_abstention" | "false_answer")
                ),
                "{r}"
            ),
        }
    }

    // Abstention precision and recall match the rows.
    let abstained: Vec<&Value> = rows.iter().filter(|r| r["prediction"].is_null()).collect();
    let right = abstained
        .iter()
        .filter(|r| r["has_answer"] == false)
        .count() as f64;
    let mean = |k: &str| out[k]["mean"].as_f64();
    if abstained.is_empty() {
        assert_eq!(mean("abstention_precision"), None, "{out}");
    } else {
        let expected = 100.0 * right / abstained.len() as f64;
        assert!(
            (mean("abstention_precision").unwrap() - expected).abs() < 1e-9,
            "{out}"
        );
    }
    let expected_recall = 100.0 * right / unanswerable.len() as f64;
    assert!(
        (mean("abstention_recall").unwrap() - expected_recall).abs() < 1e-9,
        "{out}"
    );
    // Recall@k counts answerable questions only: withheld ones cannot be found.
    let answerable = rows.iter().filter(|r| r["has_answer"] == true).count();
    let hits = rows
        .iter()
        .filter(|r| r["has_answer"] == true && r["first_hit"].as_u64().is_some_and(|h| h <= 3))
        .count();
    let recall = 100.0 * hits as f64 / answerable as f64;
    assert!((mean("recall@3").unwrap() - recall).abs() < 1e-9, "{out}");
    assert!(rows
        .iter()
        .filter(|r| r["has_answer"] == false)
        .all(|r| r["first_hit"].is_null() && r["reader_f1"].is_null()));
}

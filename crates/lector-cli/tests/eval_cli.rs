//! The `lector eval` command line: real files in, real process out; bad input gives one clear line.

mod common;

use common::{lector, stderr};
use serde_json::Value;
use std::path::Path;

fn shared(rel: &str) -> String {
    lector_eval::data::require(rel)
        .to_string_lossy()
        .into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// Gold answers for the first `n` questions of the v2.0 dev set, "" for the rest.
fn gold_predictions(n: usize) -> serde_json::Map<String, Value> {
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(shared("squad/dev-v2.0.json")).unwrap())
            .unwrap();
    let mut preds = serde_json::Map::new();
    for article in data["data"].as_array().unwrap() {
        for paragraph in article["paragraphs"].as_array().unwrap() {
            for qa in paragraph["qas"].as_array().unwrap() {
                let answer = match qa["answers"].as_array().unwrap().first() {
                    Some(a) if preds.len() < n => a["text"].clone(),
                    _ => Value::String(String::new()),
                };
                preds.insert(qa["id"].as_str().unwrap().to_string(), answer);
            }
        }
    }
    preds
}

#[test]
fn squad_json_output_report_and_per_question_file() {
    let dir = tempfile::tempdir().unwrap();
    let preds = write(
        dir.path(),
        "pred.json",
        &Value::Object(gold_predictions(3000)).to_string(),
    );
    let html = dir.path().join("report.html");
    let per_q = dir.path().join("per_q.jsonl");
    let out = lector(&[
        "eval",
        "squad",
        &shared("squad/dev-v2.0.json"),
        &preds,
        "--json",
        "--html",
        html.to_str().unwrap(),
        "--per-question",
        per_q.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["total"], 11873);
    assert_eq!(json["NoAns_exact"].as_f64().unwrap(), 100.0);
    let exact = json["exact"].as_f64().unwrap();
    let interval = json["intervals"][0][1].clone();
    assert!(
        interval["low"].as_f64().unwrap() < exact && exact < interval["high"].as_f64().unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(&per_q).unwrap().lines().count(),
        11873
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("HasAns / NoAns breakdown") && page.contains("<svg"));
}

#[test]
fn compare_finds_a_real_difference_and_refuses_different_question_sets() {
    let dir = tempfile::tempdir().unwrap();
    let data = shared("squad/dev-v2.0.json");
    let mut per_q = Vec::new();
    for (name, n) in [("a", 2000), ("b", 2600)] {
        let preds = write(
            dir.path(),
            &format!("{name}.json"),
            &Value::Object(gold_predictions(n)).to_string(),
        );
        let path = dir.path().join(format!("{name}.jsonl"));
        let out = lector(&[
            "eval",
            "squad",
            &data,
            &preds,
            "--per-question",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        per_q.push(path.to_string_lossy().into_owned());
    }
    let out = lector(&[
        "eval", "compare", &per_q[0], &per_q[1], "--json", "--trials", "2000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["difference"]["mean"].as_f64().unwrap() > 0.0);
    assert!(json["difference"]["low"].as_f64().unwrap() > 0.0);
    assert!(json["p_value"].as_f64().unwrap() < 0.01);

    let shorter: String = std::fs::read_to_string(&per_q[1])
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect();
    let b_short = write(dir.path(), "b_short.jsonl", &shorter);
    let out = lector(&["eval", "compare", &per_q[0], &b_short]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("different questions"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_input_gets_one_clear_line_naming_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let data = shared("squad/dev-v2.0.json");
    let good_preds = write(
        dir.path(),
        "good.json",
        r#"{"56ddde6b9a695914005b9628": "France"}"#,
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                data.clone(),
                write(
                    dir.path(),
                    "broken.json",
                    "{\n  \"a\": \"x\",\n  \"b\": \n}",
                ),
            ],
            "broken.json:4:1",
        ),
        (
            vec![
                write(dir.path(), "nodata.json", r#"{"version": "v2.0"}"#),
                good_preds.clone(),
            ],
            "no `data` array",
        ),
        (
            vec![data.clone(), write(dir.path(), "num.json", r#"{"q1": 3}"#)],
            "prediction for `q1` is a number",
        ),
        (
            vec![
                data.clone(),
                good_preds.clone(),
                "--na-prob-file".into(),
                write(dir.path(), "na.json", r#"{"q": 1.5}"#),
            ],
            "outside [0, 1]",
        ),
        (
            vec![
                data.clone(),
                dir.path()
                    .join("absent.json")
                    .to_string_lossy()
                    .into_owned(),
            ],
            "absent.json",
        ),
    ];
    for (args, expected) in cases {
        let mut full = vec!["eval".to_string(), "squad".to_string()];
        full.extend(args);
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let out = lector(&refs);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{refs:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{refs:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::write(dir.path().join("bin.json"), b"{\"q\": \"caf\xe9\"}").unwrap();
    let out = lector(&[
        "eval",
        "squad",
        &data,
        dir.path().join("bin.json").to_str().unwrap(),
    ]);
    assert!(
        stderr(&out).contains("bin.json:1:11: invalid UTF-8"),
        "{}",
        stderr(&out)
    );
}

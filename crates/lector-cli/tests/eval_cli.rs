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

/// Gold answers of the v1.1 dev set for the questions `keep` accepts, a wrong answer for the
/// others (not "": a gold answer such as "the" normalises to "" and would match it).
fn v11_predictions(keep: impl Fn(&str) -> bool) -> (serde_json::Map<String, Value>, usize) {
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(shared("squad/dev-v1.1.json")).unwrap())
            .unwrap();
    let mut preds = serde_json::Map::new();
    let mut kept = 0;
    for article in data["data"].as_array().unwrap() {
        for paragraph in article["paragraphs"].as_array().unwrap() {
            for qa in paragraph["qas"].as_array().unwrap() {
                let answer = match keep(qa["question"].as_str().unwrap()) {
                    true => {
                        kept += 1;
                        qa["answers"][0]["text"].clone()
                    }
                    false => Value::String("zzxq".into()),
                };
                preds.insert(qa["id"].as_str().unwrap().to_string(), answer);
            }
        }
    }
    (preds, kept)
}

#[test]
fn squad_breakdowns_by_question_type_and_overlap() {
    let dir = tempfile::tempdir().unwrap();
    // Only questions that open with "Who" are answered: the who-group scores, what-questions
    // (which never open with "Who") score nothing.
    let (preds, answered) = v11_predictions(|q| q.starts_with("Who "));
    let preds = write(dir.path(), "pred.json", &Value::Object(preds).to_string());
    let html = dir.path().join("report.html");
    let data = shared("squad/dev-v1.1.json");
    let args = ["eval", "squad", &data, &preds, "--by", "qtype,overlap"];
    let out = lector(&[&args[..], &["--json", "--html", html.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups = |facet: &str| json["breakdowns"][facet].as_array().unwrap().clone();
    let qtype = groups("qtype");
    let total: u64 = qtype.iter().map(|g| g["questions"].as_u64().unwrap()).sum();
    assert_eq!(total, 10570);
    let group = |label: &str| qtype.iter().find(|g| g["label"] == label).unwrap().clone();
    let who = group("who");
    assert!(who["questions"].as_u64().unwrap() >= answered as u64);
    assert!(who["exact_match"]["mean"].as_f64().unwrap() > 50.0, "{who}");
    assert_eq!(group("what")["exact_match"]["mean"].as_f64().unwrap(), 0.0);
    assert!(group("what")["questions"].as_u64().unwrap() > 4000);

    // Quantile bins cover every question once, in rising overlap; the low group is extra.
    let overlap = groups("overlap");
    let (bins, low) = overlap.split_at(overlap.len() - 1);
    assert!(bins.len() >= 2, "{overlap:?}");
    let binned: u64 = bins.iter().map(|g| g["questions"].as_u64().unwrap()).sum();
    assert_eq!(binned, 10570);
    assert!(low[0]["label"]
        .as_str()
        .unwrap()
        .starts_with("low (< 0.50)"));
    assert!(low[0]["questions"].as_u64().unwrap() > 0);

    let table = lector(&args);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("question type") && text.contains("how many"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("By question type") && page.contains("By question-context lexical overlap")
    );

    let bad = lector(&["eval", "squad", &data, &preds, "--by", "length"]);
    assert!(stderr(&bad).contains("unknown breakdown `length` (qtype or overlap)"));
}

/// The v1.1 dev set written in the MRQA format (header line, one context per line), gzipped.
fn write_mrqa(dir: &Path) -> String {
    use std::io::Write;
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(shared("squad/dev-v1.1.json")).unwrap())
            .unwrap();
    let mut lines = vec![serde_json::json!({"header": {"dataset": "SQuAD", "mrqa_split": "dev"}})];
    for article in data["data"].as_array().unwrap() {
        for paragraph in article["paragraphs"].as_array().unwrap() {
            let qas: Vec<Value> = paragraph["qas"]
                .as_array()
                .unwrap()
                .iter()
                .map(|qa| {
                    let answers: Vec<&Value> = qa["answers"].as_array().unwrap().iter().map(|a| &a["text"]).collect();
                    serde_json::json!({"qid": qa["id"], "question": qa["question"], "answers": answers,
                        "detected_answers": [], "is_impossible": false})
                })
                .collect();
            lines.push(serde_json::json!({"context": paragraph["context"], "qas": qas}));
        }
    }
    let path = dir.join("SQuAD.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    for line in lines {
        writeln!(gz, "{line}").unwrap();
    }
    gz.finish().unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn mrqa_files_score_by_the_official_rules() {
    let dir = tempfile::tempdir().unwrap();
    let mrqa = write_mrqa(dir.path());
    let (preds, answered) = v11_predictions(|q| q.starts_with("Who "));
    let all = write(
        dir.path(),
        "all.json",
        &Value::Object(preds.clone()).to_string(),
    );
    let json = |args: &[&str]| -> Value {
        let out = lector(&[&["eval", "squad"], args, &["--json"]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // The same questions and answers score the same in both formats (MRQA's script is SQuAD
    // v1.1's over a dictionary of questions).
    let squad_scores = json(&[&shared("squad/dev-v1.1.json"), &all]);
    let mrqa_scores = json(&[&mrqa, &all]);
    for key in ["exact_match", "f1"] {
        assert_eq!(mrqa_scores[key], squad_scores[key], "{key}");
    }
    // Only the answered questions predicted: missing ones score 0, or with --skip-no-answer
    // leave the total (every kept prediction is a gold answer: 100).
    let kept: serde_json::Map<String, Value> =
        preds.into_iter().filter(|(_, a)| a != "zzxq").collect();
    assert_eq!(kept.len(), answered);
    let some = write(dir.path(), "some.json", &Value::Object(kept).to_string());
    let missing = json(&[&mrqa, &some]);
    let expected = 100.0 * answered as f64 / 10570.0;
    assert!((missing["exact_match"].as_f64().unwrap() - expected).abs() < 1e-9);
    let skipped = json(&[&mrqa, &some, "--skip-no-answer"]);
    assert_eq!(skipped["exact_match"].as_f64().unwrap(), 100.0);

    // `read` takes the same file: its predictions are keyed by `qid`.
    let read_out = dir.path().join("read.json");
    let out = lector(&[
        "read",
        "--squad",
        &mrqa,
        "--limit",
        "2",
        "--out",
        read_out.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let read: serde_json::Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&read_out).unwrap()).unwrap();
    assert_eq!(read.len(), 2);
    assert!(read.contains_key("56be4db0acb8001400a502ec"), "{read:?}");

    let none = write(dir.path(), "none.json", "{}");
    let out = lector(&["eval", "squad", &mrqa, &none, "--skip-no-answer"]);
    assert!(
        stderr(&out).contains("none.json: no question of"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn equivalence_scores_hand_labelled_generated_answers() {
    let dir = tempfile::tempdir().unwrap();
    let labels = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/equivalence/squad-smollm2-labels.jsonl"
    );
    let per_item = dir.path().join("items.jsonl");
    let out = lector(&[
        "eval",
        "equivalence",
        labels,
        "--json",
        "--per-item",
        per_item.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<Value> = std::fs::read_to_string(&per_item)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(report["items"], rows.len());
    assert!(rows.len() >= 100, "at least 100 labelled pairs");
    // Each verdict's precision and recall recounted from the per-item lines.
    for verdict in ["exact_match", "equivalent", "key_fact"] {
        let said: Vec<&Value> = rows.iter().filter(|r| r[verdict] == true).collect();
        let right = said.iter().filter(|r| r["label"] == true).count();
        let labelled = rows.iter().filter(|r| r["label"] == true).count();
        let found = report["agreement"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["verdict"] == verdict)
            .unwrap();
        assert_eq!(found["positives"], said.len());
        let recall = found["recall"].as_f64().unwrap();
        assert!(
            (recall - right as f64 / labelled as f64).abs() < 1e-12,
            "{verdict}"
        );
        // A key fact holds whenever an answer is equivalent, and equivalence whenever EM does.
        if verdict != "exact_match" {
            assert!(rows
                .iter()
                .all(|r| r["exact_match"] == false || r["equivalent"] == true));
            assert!(rows
                .iter()
                .all(|r| r["equivalent"] == false || r["key_fact"] == true));
        }
    }
    let bad = write(dir.path(), "bad.jsonl", "{\"answer\": 3, \"golds\": []}\n");
    let out = lector(&["eval", "equivalence", &bad]);
    assert!(stderr(&out).contains("bad.jsonl:1:"), "{}", stderr(&out));
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

//! `lector ask`, `lector eval odqa` and `lector calibrate` as processes, on real SQuAD slices with
//! the shipped reader and real indexes on disk.

mod common;

use common::{browser_or_skip, dump_dom, fails, lector, ok, serve};
use lector_eval::normalize::normalize_answer;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn squad(name: &str) -> PathBuf {
    lector_eval::data::require(&format!("squad/{name}"))
}

/// The first `articles` articles of a SQuAD file, written to `dir`.
fn slice(name: &str, articles: usize, dir: &Path) -> String {
    let mut json: Value =
        serde_json::from_str(&std::fs::read_to_string(squad(name)).unwrap()).unwrap();
    json["data"].as_array_mut().unwrap().truncate(articles);
    let path = dir.join(format!("slice-{name}"));
    std::fs::write(&path, json.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).expect("JSON output")
}

/// An index of the first two articles of SQuAD v1.1 dev; returns (index dir, slice path).
fn index(dir: &Path) -> (String, String) {
    let data = slice("dev-v1.1.json", 2, dir);
    let index = dir.join("index").to_string_lossy().into_owned();
    ok(&lector(&["index", "add", &data, "--index", &index]));
    (index, data)
}

fn chars(text: &str, start: usize, end: usize) -> String {
    text.chars().skip(start).take(end - start).collect()
}

#[test]
fn ask_answers_with_evidence_at_document_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (index, data) = index(dir.path());
    let question = "Which NFL team represented the AFC at Super Bowl 50?";
    let out = json(&lector(&["ask", question, "--index", &index, "--json"]));
    let answer = &out["answer"];
    assert_eq!(answer["text"], "Denver Broncos");
    let evidence = &answer["evidence"];
    assert_eq!(evidence["doc_id"], "Super_Bowl_50#0");
    // The document is paragraph 0 of the article: the offsets index its text.
    let squad: Value = serde_json::from_str(&std::fs::read_to_string(&data).unwrap()).unwrap();
    let context = squad["data"][0]["paragraphs"][0]["context"]
        .as_str()
        .unwrap();
    let (start, end) = (
        evidence["start"].as_u64().unwrap(),
        evidence["end"].as_u64().unwrap(),
    );
    assert_eq!(
        chars(context, start as usize, end as usize),
        "Denver Broncos"
    );
    assert_eq!(out["passages"].as_array().unwrap().len(), 5);
    assert!(out["timings"]["read_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(out["calibrated"], false);

    let text = ok(&lector(&[
        "ask",
        question,
        "--index",
        &index,
        "--explain",
        "--k",
        "3",
    ]));
    assert!(text.starts_with("answer: Denver Broncos\n"), "{text}");
    for part in [
        "[[Denver Broncos]]",
        "runner-ups:",
        "retrieved passages:",
        "start  |",
        "time: retrieve",
    ] {
        assert!(text.contains(part), "missing `{part}` in:\n{text}");
    }
}

#[test]
fn rerank_reorders_the_passages_read_and_refuses_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let (index, _) = index(dir.path());
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lector-models/tests/fixtures/tiny-bert-rerank")
        .to_string_lossy()
        .into_owned();
    let question = "Which NFL team represented the AFC at Super Bowl 50?";
    let out = json(&lector(&[
        "ask",
        question,
        "--index",
        &index,
        "--k",
        "2",
        "--rerank",
        &tiny,
        "--rerank-depth",
        "8",
        "--json",
    ]));
    let passages = out["passages"].as_array().unwrap();
    assert_eq!(passages.len(), 2);
    let mut previous = f64::INFINITY;
    for (rank, p) in passages.iter().enumerate() {
        let sources = p["sources"].as_array().unwrap();
        let rerank = sources.last().unwrap();
        assert_eq!(rerank["retriever"], "rerank");
        assert_eq!(rerank["rank"], rank + 1);
        // The bm25 rank it came from lies within the depth, and scores fall with the rank.
        assert!(sources[0]["rank"].as_u64().unwrap() <= 8);
        let score = p["score"].as_f64().unwrap();
        assert!(score <= previous);
        previous = score;
    }
    assert!(out["timings"]["rerank_ms"].as_f64().unwrap() > 0.0);
    let reader = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/reader-minilm-squad")
        .to_string_lossy()
        .into_owned();
    let err = fails(&lector(&[
        "ask", question, "--index", &index, "--rerank", &reader,
    ]));
    assert!(
        err.contains("cannot load the reranker")
            && err.contains("not a reranker: no classifier weights"),
        "{err}"
    );
}

#[test]
fn calibrate_writes_the_file_and_ask_abstains_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (index, _) = index(dir.path());
    let v2 = slice("dev-v2.0.json", 1, dir.path());
    let html = dir.path().join("calibration.html");
    let html = html.to_str().unwrap();
    let out = json(&lector(&[
        "calibrate",
        "--squad",
        &v2,
        "--index",
        &index,
        "--limit",
        "60",
        "--html",
        html,
        "--json",
    ]));
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&index).join("calibration.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(file, out["calibration"]);
    assert_eq!(file["target"], "max-f1");
    assert_eq!(file["questions"], 60);
    let threshold = file["threshold"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&threshold));
    // The calibrated cut does at least as well as the default rule on the data it was chosen on.
    assert!(out["chosen"]["f1"].as_f64() >= out["default"]["f1"].as_f64());
    assert!(std::fs::read_to_string(html).unwrap().contains("<svg"));
    // A version-2 file with an isotonic confidence map, and the ECE before and after it.
    assert_eq!(file["version"], 2);
    assert_eq!(file["retrieved"], Value::Null);
    let confidence = &file["confidence"];
    assert_eq!(confidence["feature"], "log_odds");
    assert_eq!(confidence["map"]["method"], "isotonic");
    assert!(!confidence["map"]["knots"].as_array().unwrap().is_empty());
    let answers = out["confidence"]["answers"].as_u64().unwrap();
    assert!(answers > 30 && answers <= 60, "{}", out["confidence"]);
    for ece in ["ece_raw", "ece_calibrated", "ece_cross_validated"] {
        let value = out["confidence"][ece].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&value), "{ece} = {value}");
    }
    // Fitted and measured on the same answers, isotonic regression beats the raw score.
    assert!(out["confidence"]["ece_calibrated"].as_f64() < out["confidence"]["ece_raw"].as_f64());
    let report = std::fs::read_to_string(html).unwrap();
    assert!(report.contains("Reliability: accuracy of the answers against their confidence"));
    assert!(report.contains("Expected calibration error"));

    // `ask` gives every candidate the map's confidence (this threshold abstains on everything).
    let known = "Which NFL team represented the AFC at Super Bowl 50?";
    let asked = json(&lector(&["ask", known, "--index", &index, "--json"]));
    let candidates = asked["candidates"].as_array().unwrap();
    assert_eq!(candidates[0]["text"], "Denver Broncos");
    for c in candidates {
        let confidence = c["confidence"].as_f64().expect("a confidence");
        assert!((0.0..=1.0).contains(&confidence), "{c}");
    }

    let unrelated = "What is the half-life of carbon-14 in years?";
    let asked = json(&lector(&["ask", unrelated, "--index", &index, "--json"]));
    assert_eq!(asked["calibrated"], true);
    assert_eq!(asked["threshold"].as_f64(), Some(threshold));
    assert_eq!(asked["answer"], Value::Null);
    assert_eq!(asked["abstention"], "below_threshold");
    let text = ok(&lector(&["ask", unrelated, "--index", &index]));
    assert!(
        text.starts_with("no answer: the no-answer probability"),
        "{text}"
    );

    // The index's own writer leaves the calibration alone.
    let more = dir.path().join("more.txt");
    std::fs::write(&more, "Carbon-14 has a half-life of 5,730 years.").unwrap();
    ok(&lector(&[
        "index",
        "add",
        more.to_str().unwrap(),
        "--index",
        &index,
    ]));
    assert!(Path::new(&index).join("calibration.json").is_file());
    let stats = json(&lector(&["index", "stats", "--index", &index, "--json"]));
    assert_eq!(stats["documents"], 104);
}

/// The web page of `lector serve` over `index` shows "confidence NN%" beside the answer.
fn web_page_shows_the_confidence(index: &str, question: &str) {
    let Some(browser) = browser_or_skip("web_page_shows_the_confidence") else {
        return;
    };
    let (mut server, addr) = serve(index, &[]);
    let profile = tempfile::tempdir().unwrap();
    let url = format!(
        "http://{addr}/?q={}",
        question.replace(' ', "%20").replace('?', "%3F")
    );
    let dom = dump_dom(&browser, profile.path(), &url, "data-state=\"answered\"");
    let shown = dom
        .split("<span id=\"answer-confidence\"")
        .nth(1)
        .and_then(|rest| rest.split("</span>").next())
        .expect("the confidence element");
    let shown = shown.rsplit('>').next().unwrap();
    assert!(
        shown.starts_with("confidence ") && shown.ends_with('%'),
        "shown `{shown}`"
    );
    server.kill_hard();
}

/// Article `i` alone of a SQuAD file, written to `dir`.
fn article(name: &str, i: usize, dir: &Path) -> String {
    let mut json: Value =
        serde_json::from_str(&std::fs::read_to_string(squad(name)).unwrap()).unwrap();
    let one = json["data"][i].clone();
    json["data"] = Value::Array(vec![one]);
    let path = dir.join(format!("article{i}-{name}"));
    std::fs::write(&path, json.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn calibrate_on_retrieved_passages_and_evaluate_on_held_out_questions() {
    let dir = tempfile::tempdir().unwrap();
    // The index holds two articles of SQuAD v1.1 dev: fit on questions of the first, check the
    // stored map on questions of the second.
    let (index, _) = index(dir.path());
    let (fit_on, check_on) = (
        article("dev-v1.1.json", 0, dir.path()),
        article("dev-v1.1.json", 1, dir.path()),
    );
    let out = lector(&[
        "calibrate",
        "--squad",
        &fit_on,
        "--index",
        &index,
        "--retrieve",
        "3",
        "--limit",
        "40",
        "--confidence",
        "platt",
        "--json",
    ]);
    // All answerable (SQuAD v1.1): warned that no abstention is learnt, but the map is fitted.
    assert!(common::stderr(&out).contains("has no unanswerable question"));
    let fitted = json(&out);
    let stored = &fitted["calibration"];
    assert_eq!(
        (stored["retrieved"].as_u64(), stored["questions"].as_u64()),
        (Some(3), Some(40))
    );
    assert_eq!(stored["confidence"]["map"]["method"], "platt");
    assert!(
        stored["confidence"]["map"]["a"].as_f64().unwrap() > 0.0,
        "{stored}"
    );
    let file = Path::new(&index).join("calibration.json");
    let before = std::fs::read(&file).unwrap();

    let html = dir.path().join("check.html");
    let checked = json(&lector(&[
        "calibrate",
        "--squad",
        &check_on,
        "--index",
        &index,
        "--retrieve",
        "3",
        "--limit",
        "40",
        "--evaluate",
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]));
    assert_eq!(&checked["evaluated"], stored);
    let confidence = &checked["confidence"];
    let answers = confidence["answers"].as_u64().unwrap();
    assert!(answers > 30 && answers <= 40, "{confidence}");
    let bins = confidence["bins_calibrated"].as_array().unwrap();
    assert_eq!(bins.len(), 10);
    let counted: u64 = bins.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, answers);
    for ece in ["ece_raw", "ece_calibrated"] {
        let value = confidence[ece].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&value), "{ece} = {value}");
    }
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("Calibration check"));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "--evaluate writes nothing"
    );
    let text = ok(&lector(&[
        "calibrate",
        "--squad",
        &check_on,
        "--index",
        &index,
        "--retrieve",
        "3",
        "--limit",
        "10",
        "--evaluate",
    ]));
    assert!(
        text.contains("calibrated") && text.contains("nothing written"),
        "{text}"
    );

    // Fitted on SQuAD v1.1, the threshold answers everything: `ask` and the web page show the
    // answer's confidence.
    let known = "Which NFL team represented the AFC at Super Bowl 50?";
    let asked = json(&lector(&["ask", known, "--index", &index, "--json"]));
    let confidence = asked["answer"]["confidence"]
        .as_f64()
        .expect("a confidence");
    assert!((0.0..=1.0).contains(&confidence), "{confidence}");
    let text = ok(&lector(&["ask", known, "--index", &index]));
    assert!(
        text.contains("confidence ") && text.contains("% (calibrated probability"),
        "{text}"
    );
    web_page_shows_the_confidence(&index, known);

    let err = fails(&lector(&[
        "calibrate",
        "--squad",
        &fit_on,
        "--index",
        &index,
        "--mode",
        "bm25",
    ]));
    assert!(err.contains("need --retrieve K"), "{err}");
    let err = fails(&lector(&[
        "calibrate",
        "--squad",
        &fit_on,
        "--index",
        &index,
        "--evaluate",
        "--dry-run",
    ]));
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn eval_odqa_decomposes_the_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = slice("dev-v1.1.json", 2, dir.path());
    let html = dir.path().join("odqa.html");
    let rows = dir.path().join("odqa.jsonl");
    let out = json(&lector(&[
        "eval",
        "odqa",
        "--squad",
        &data,
        "--limit",
        "20",
        "--k",
        "5",
        "--json",
        "--html",
        html.to_str().unwrap(),
        "--per-question",
        rows.to_str().unwrap(),
    ]));
    assert_eq!(out["questions"], 20);
    assert_eq!(out["documents"], 103);
    let outcomes = &out["outcomes"];
    let sum: u64 = ["correct", "retrieval_miss", "ranking_miss", "reading_miss"]
        .iter()
        .map(|k| outcomes[k].as_u64().unwrap())
        .sum();
    assert_eq!(sum, 20);
    // A ranking miss had a gold answer as the reader's best answer in some passage; a reading
    // miss had none. (These 20 questions have both.)
    assert!(outcomes["ranking_miss"].as_u64().unwrap() > 0, "{out}");
    assert!(outcomes["reading_miss"].as_u64().unwrap() > 0, "{out}");
    let squad: Value = serde_json::from_str(&std::fs::read_to_string(&data).unwrap()).unwrap();
    let contexts = paragraph_contexts(&squad);
    let rows = std::fs::read_to_string(&rows).unwrap();
    for row in rows
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        for passage in row["passages"].as_array().unwrap() {
            assert_answers_lie_in_their_passage(passage, &contexts);
        }
        let golds: Vec<String> = row["answers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| normalize_answer(a.as_str().unwrap()))
            .collect();
        let read_right = row["passages"].as_array().unwrap().iter().any(|p| {
            let best = &p["answers"][0]["answer"];
            best.as_str()
                .is_some_and(|a| golds.contains(&normalize_answer(a)))
        });
        match row["outcome"].as_str().unwrap() {
            "ranking_miss" => assert!(read_right, "{row}"),
            "reading_miss" => assert!(!read_right, "{row}"),
            _ => {}
        }
    }
    let value = |k: &str| out[k]["mean"].as_f64().unwrap();
    assert!(value("recall@5") >= 50.0, "{out}");
    assert!(value("reader_f1") >= 70.0, "{out}");
    assert!(
        value("f1") >= 20.0 && value("f1") <= value("reader_f1") + 10.0,
        "{out}"
    );
    assert_eq!(value("exact_match"), value("correct"));
    // A retrieval miss is a question without a hit (that was not answered right anyway).
    assert!(value("retrieval_miss") <= 100.0 - value("recall@5") + 1e-9);
    let curve = out["recall_curve"].as_array().unwrap();
    assert_eq!(curve.len(), 5);
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("Answer recall@k"));

    // The same questions without their paragraphs, NQ-open style, against a built index.
    let (index, _) = index(dir.path());
    let lines: Vec<String> = squad["data"][0]["paragraphs"][0]["qas"]
        .as_array()
        .unwrap()
        .iter()
        .take(4)
        .map(|qa| {
            let answers: Vec<&Value> = qa["answers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| &a["text"])
                .collect();
            serde_json::json!({"question": qa["question"], "answer": answers}).to_string()
        })
        .collect();
    let nq = dir.path().join("nq.jsonl");
    std::fs::write(&nq, lines.join("\n")).unwrap();
    let out = json(&lector(&[
        "eval",
        "odqa",
        "--questions",
        nq.to_str().unwrap(),
        "--index",
        &index,
        "--json",
    ]));
    assert_eq!(out["questions"], 4);
    assert!(
        out.get("reader_f1").is_none(),
        "no gold paragraphs, no reader score"
    );
    assert!(out["exact_match"]["mean"].as_f64().unwrap() > 0.0);
}

#[test]
fn bad_input_gives_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let missing = missing.to_str().unwrap();
    let err = fails(&lector(&["ask", " ", "--index", missing]));
    assert_eq!(err, "error: the question is empty\n");
    let err = fails(&lector(&["ask", "Who won?", "--index", missing]));
    assert!(
        err.starts_with(&format!("error: no index at {missing}")),
        "{err}"
    );
    let (index, data) = index(dir.path());
    let err = fails(&lector(&[
        "ask", "Who won?", "--index", &index, "--mode", "hybrid",
    ]));
    assert!(
        err.contains("has no passage vectors; add them with `lector index add --dense`"),
        "{err}"
    );
    let err = fails(&lector(&["ask", "Who won?", "--index", &index, "--k", "0"]));
    assert!(err.contains("'--k <K>': must be at least 1"), "{err}");
    let err = fails(&lector(&[
        "calibrate",
        "--squad",
        &data,
        "--index",
        missing,
    ]));
    assert!(err.starts_with("error: no index at"), "{err}");
    let err = String::from_utf8_lossy(
        &lector(&[
            "calibrate",
            "--squad",
            &data,
            "--index",
            &index,
            "--target",
            "precision=2",
        ])
        .stderr,
    )
    .into_owned();
    assert!(
        err.contains("the precision must be a number in (0, 1]"),
        "{err}"
    );
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"data\": 3}").unwrap();
    let err = fails(&lector(&[
        "eval",
        "odqa",
        "--squad",
        broken.to_str().unwrap(),
    ]));
    assert!(
        err.starts_with("error:") && err.contains("broken.json"),
        "{err}"
    );
    std::fs::write(Path::new(&index).join("calibration.json"), "{}").unwrap();
    let err = fails(&lector(&["ask", "Who won?", "--index", &index]));
    assert!(
        err.contains("calibration.json: not a lector calibration"),
        "{err}"
    );
}

#[test]
fn bf16_and_int8_read_like_f32_and_a_bad_precision_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("ctx.txt");
    std::fs::write(
        &context,
        "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall.",
    )
    .unwrap();
    let read = |precision: &str| {
        json(&lector(&[
            "read",
            "--context",
            &context.to_string_lossy(),
            "--question",
            "When was the Eiffel Tower completed?",
            "--json",
            "--precision",
            precision,
        ]))
    };
    let (f32, bf16) = (read("f32"), read("bf16"));
    let first = |v: &Value| v["answers"][0].clone();
    assert_eq!(first(&bf16)["answer"], "1889", "{bf16}");
    assert_eq!(first(&bf16)["start"], first(&f32)["start"]);
    let delta = first(&bf16)["score"].as_f64().unwrap() - first(&f32)["score"].as_f64().unwrap();
    assert!(delta.abs() < 0.02, "bf16 moved the score by {delta}");
    let int8 = read("int8");
    assert_eq!(first(&int8)["answer"], "1889", "{int8}");
    assert_eq!(first(&int8)["start"], first(&f32)["start"]);

    let out = Command::new(env!("CARGO_BIN_EXE_lector"))
        .args([
            "read",
            "--context",
            &context.to_string_lossy(),
            "--question",
            "When?",
        ])
        .env("LECTOR_PRECISION", "fp8")
        .output()
        .unwrap();
    assert!(fails(&out).contains("LECTOR_PRECISION is `fp8`: expected f32, bf16 or int8"));
}

/// Every paragraph's context by the document id `lector index add` gives it (`title#i`).
fn paragraph_contexts(squad: &Value) -> std::collections::HashMap<String, String> {
    let mut contexts = std::collections::HashMap::new();
    for article in squad["data"].as_array().unwrap() {
        let title = article["title"].as_str().unwrap();
        for (i, p) in article["paragraphs"].as_array().unwrap().iter().enumerate() {
            let context = p["context"].as_str().unwrap().to_string();
            contexts.insert(format!("{title}#{i}"), context);
        }
    }
    contexts
}

/// A `--per-question` passage names where it lies in its document, and its answers' offsets
/// (into the passage) designate their text there.
fn assert_answers_lie_in_their_passage(
    passage: &Value,
    contexts: &std::collections::HashMap<String, String>,
) {
    let context = &contexts[passage["doc_id"].as_str().unwrap()];
    let offset = |key: &str| passage[key].as_u64().unwrap() as usize;
    let (start, end) = (offset("char_start"), offset("char_end"));
    assert!(start < end && end <= context.chars().count(), "{passage}");
    assert!(
        !passage["sources"].as_array().unwrap().is_empty(),
        "{passage}"
    );
    for answer in passage["answers"].as_array().unwrap() {
        let at = |key: &str| answer[key].as_u64().unwrap() as usize;
        let text: String = context
            .chars()
            .skip(start + at("start"))
            .take(at("end") - at("start"))
            .collect();
        assert_eq!(text, answer["answer"].as_str().unwrap(), "{passage}");
        assert!(start + at("end") <= end, "{passage}");
    }
}

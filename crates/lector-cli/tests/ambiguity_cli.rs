//! When documents disagree, `lector ask` says so and shows both readings with their evidence, a
//! generated answer names both, and `lector eval odqa` counts the flagged answers. Real indexes
//! on disk, the shipped reader, a scripted OpenAI-compatible endpoint over HTTP.

mod common;

use common::{fails, index_documents, lector, ok, scripted_endpoint};
use lector_pipeline::calibration::{fit_confidence, Method, Scored};
use lector_pipeline::Calibration;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};

const QUESTION: &str = "When was the Kestrel Lighthouse completed?";

/// (id, title, text) of the lighthouse documents: the almanac says 1887.
const ALMANAC: (&str, &str, &str) = (
    "almanac-1998",
    "Harbour Almanac",
    "The Kestrel Lighthouse stands on the northern cape of Varnholm island. The lighthouse was \
     completed in 1887 by the harbour board, and its lamp was first lit that winter.",
);

/// The travel guide, giving `year`.
fn guide(year: &str) -> (&'static str, &'static str, String) {
    (
        "guide-2021",
        "Varnholm Travel Guide",
        format!(
            "Visitors to Varnholm often climb the Kestrel Lighthouse. According to the island \
             museum, the Kestrel Lighthouse was completed in {year}, after years of delays caused \
             by storms."
        ),
    )
}

/// Documents about other things on the island.
const UNRELATED: [(&str, &str, &str); 3] = [
    (
        "ferry",
        "Ferry timetable",
        "The ferry to Varnholm leaves the mainland port twice a day in summer and once a day in \
         winter. Tickets are sold at the harbour office.",
    ),
    (
        "fishing",
        "Fishing on Varnholm",
        "Cod and herring are caught in the waters around the island. The fishing season opens in \
         March and closes in October.",
    ),
    (
        "birds",
        "Birds of the cape",
        "Puffins and gannets nest on the cliffs of the northern cape from May to August.",
    ),
];

/// An index in `dir/name` of the almanac, the guide giving `guide_year` (left out when `None`)
/// and the unrelated documents.
fn corpus(dir: &Path, name: &str, guide_year: Option<&str>) -> String {
    let mut docs = vec![(ALMANAC.0, ALMANAC.1, ALMANAC.2.to_string())];
    docs.extend(guide_year.map(guide));
    docs.extend(UNRELATED.iter().map(|(i, t, x)| (*i, *t, x.to_string())));
    let lines: Vec<String> = docs
        .iter()
        .map(|(id, title, text)| json!({"id": id, "title": title, "text": text}).to_string())
        .collect();
    let file = dir.join(format!("{name}.jsonl"));
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    index_documents(&file.to_string_lossy(), dir, name, &[])
}

/// Gives the index in `index` a confidence map: a Platt map fitted on a few answers, right half
/// the time at log-odds 0 and mostly above (the flag needs calibrated confidences).
fn calibrate(index: &str) {
    let answers: Vec<Scored> = [
        (-4.0, false),
        (0.0, true),
        (0.0, false),
        (4.0, true),
        (8.0, true),
        (9.0, false),
    ]
    .iter()
    .map(|&(log_odds, right)| Scored {
        log_odds,
        score: 0.5,
        right,
    })
    .collect();
    let point = lector_pipeline::calibration::curve(&[lector_pipeline::calibration::Judged {
        na_prob: 0.5,
        has_answer: true,
        exact: 1.0,
        f1: 1.0,
    }])[1];
    let mut calibration = Calibration::new(
        &point,
        lector_pipeline::calibration::Target::MaxF1,
        "reader-minilm-squad",
        "test",
        6,
    );
    calibration.confidence = Some(fit_confidence(Method::Platt, &answers).unwrap());
    calibration.save(Path::new(index)).unwrap();
}

fn ask_json(index: &str, extra: &[&str]) -> Value {
    let mut args = vec!["ask", QUESTION, "--index", index, "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&lector(&args))).expect("JSON output")
}

/// The readings of an `ask --json` answer as (text, doc id), sorted; checks each one's evidence
/// against the document it names.
fn readings(out: &Value, guide_year: &str) -> Vec<(String, String)> {
    let candidates = out["candidates"].as_array().unwrap();
    let mut found: Vec<(String, String)> = out["readings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &candidates[i.as_u64().unwrap() as usize])
        .map(|c| {
            let (text, e) = (c["text"].as_str().unwrap(), &c["evidence"]);
            let (id, title, document) = match e["doc_id"].as_str().unwrap() {
                "guide-2021" => guide(guide_year),
                _ => (ALMANAC.0, ALMANAC.1, ALMANAC.2.to_string()),
            };
            assert_eq!(e["doc_id"], id);
            assert_eq!(e["title"], title);
            let at = |s: &str, e: &str| -> String {
                let (s, e) = (
                    c["evidence"][s].as_u64().unwrap(),
                    c["evidence"][e].as_u64().unwrap(),
                );
                (s as usize..e as usize)
                    .map(|i| document.chars().nth(i).unwrap())
                    .collect()
            };
            assert_eq!(at("start", "end"), text, "document offsets of {c}");
            (text.to_string(), id.to_string())
        })
        .collect();
    found.sort();
    found
}

fn both_years() -> Vec<(String, String)> {
    vec![
        ("1887".into(), "almanac-1998".into()),
        ("1893".into(), "guide-2021".into()),
    ]
}

#[test]
fn documents_that_disagree_are_flagged_with_both_readings_and_their_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let index = corpus(dir.path(), "disagree", Some("1893"));
    calibrate(&index);
    let out = ask_json(&index, &[]);
    assert_eq!(out["calibrated"], true);
    assert_eq!(out["ambiguous"], true, "{out}");
    assert_eq!(out["readings"][0], 0, "the answer comes first");
    assert_eq!(readings(&out, "1893"), both_years());

    let text = ok(&lector(&["ask", QUESTION, "--index", &index]));
    let line = text
        .lines()
        .find(|l| l.starts_with("ambiguous: the documents disagree — "))
        .unwrap_or_else(|| panic!("no ambiguity line in:\n{text}"));
    let top = &out["answer"];
    let shown = format!(
        "{} (doc {}, confidence ",
        top["text"].as_str().unwrap(),
        top["evidence"]["doc_id"].as_str().unwrap()
    );
    for part in [
        "1887 (doc almanac-1998, ",
        "1893 (doc guide-2021, ",
        " or ",
        &shown,
    ] {
        assert!(line.contains(part), "missing `{part}` in {line}");
    }
    // Both passages, each with its answer marked.
    for part in [
        "completed in [[1887]]",
        "completed in [[1893]]",
        "reading 2 (",
    ] {
        assert!(text.contains(part), "missing `{part}` in:\n{text}");
    }

    // Odds of 1 flag only a runner-up at least as likely as the answer.
    let strict = ask_json(&index, &["--ambiguity-odds", "1"]);
    assert_eq!(
        (&strict["ambiguous"], &strict["readings"]),
        (&json!(false), &json!([]))
    );
    let refused = fails(&lector(&[
        "ask",
        QUESTION,
        "--index",
        &index,
        "--ambiguity-odds",
        "0.5",
    ]));
    assert!(refused.contains("at least 1"), "{refused}");
}

#[test]
fn without_a_confidence_map_nothing_is_flagged() {
    // The reader's raw probabilities crowd near 1 for both years: without a map they cannot say
    // the two are close, so the documents' disagreement is not claimed.
    let dir = tempfile::tempdir().unwrap();
    let index = corpus(dir.path(), "uncalibrated", Some("1893"));
    let out = ask_json(&index, &[]);
    assert_eq!(out["calibrated"], false);
    assert_eq!(
        (&out["ambiguous"], &out["readings"]),
        (&json!(false), &json!([])),
        "{out}"
    );
    assert!(out["candidates"].as_array().unwrap().len() > 1, "{out}");
    let text = ok(&lector(&["ask", QUESTION, "--index", &index]));
    assert!(!text.contains("ambiguous"), "{text}");
}

#[test]
fn documents_that_agree_or_a_single_answering_document_are_not_flagged() {
    let dir = tempfile::tempdir().unwrap();
    for (name, guide_year) in [("agree", Some("1887")), ("single", None)] {
        let index = corpus(dir.path(), name, guide_year);
        calibrate(&index);
        let out = ask_json(&index, &[]);
        assert_eq!(out["answer"]["text"], "1887", "{name}: {out}");
        assert_eq!(
            (&out["ambiguous"], &out["readings"]),
            (&json!(false), &json!([])),
            "{name}"
        );
        let text = ok(&lector(&["ask", QUESTION, "--index", &index]));
        assert!(!text.contains("ambiguous"), "{name}:\n{text}");
    }
}

#[test]
fn eval_odqa_counts_flagged_answers_and_their_exact_match() {
    let dir = tempfile::tempdir().unwrap();
    let index = corpus(dir.path(), "disagree", Some("1893"));
    calibrate(&index);
    let questions = dir.path().join("questions.jsonl");
    let lines = [
        json!({"id": "built", "question": QUESTION, "answer": ["1887"]}),
        json!({"id": "season", "question": "When does the fishing season on Varnholm open?", "answer": ["March"]}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&questions, text.join("\n") + "\n").unwrap();
    let per_question = dir.path().join("per-question.jsonl");
    let out: Value = serde_json::from_str(&ok(&lector(&[
        "eval",
        "odqa",
        "--questions",
        &questions.to_string_lossy(),
        "--index",
        &index,
        "--per-question",
        &per_question.to_string_lossy(),
        "--json",
    ])))
    .unwrap();
    assert_eq!(out["ambiguous_answers"], 1, "{out}");
    // One of the two answers is flagged; its exact match is reported apart from the other's.
    assert_eq!(out["ambiguous"]["mean"], 50.0, "{out}");
    let rows: Vec<Value> = std::fs::read_to_string(&per_question)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["ambiguous"], true);
    assert_eq!(rows[1]["ambiguous"], false);
    let mut shown: Vec<&str> = rows[0]["readings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    shown.sort();
    assert_eq!(shown, ["1887", "1893"]);
    let em = |row: &Value| row["em"].as_f64().unwrap() * 100.0;
    assert_eq!(out["exact_match_ambiguous"]["mean"], em(&rows[0]));
    assert_eq!(out["exact_match_unambiguous"]["mean"], em(&rows[1]));
}

/// `ask --generate --json` over `index` with a scripted endpoint replying `reply`; the JSON and
/// the one prompt sent.
fn generate_json(index: &str, reply: &'static str) -> (Value, String) {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let url = scripted_endpoint(reply, requests.clone());
    let out = ok(&lector(&[
        "ask",
        QUESTION,
        "--index",
        index,
        "--generate",
        "--endpoint",
        &url,
        "--api-model",
        "scripted",
        "--json",
    ]));
    let sent = requests.lock().unwrap();
    assert_eq!(sent.len(), 1);
    let body: Value = serde_json::from_str(&sent[0]).unwrap();
    let prompt = body["messages"][1]["content"].as_str().unwrap().to_string();
    (serde_json::from_str(&out).expect("JSON output"), prompt)
}

/// The passage number each year's document has in a generated answer's readings.
fn reading_numbers(out: &Value) -> Vec<(String, u64, bool)> {
    let mut found: Vec<(String, u64, bool)> = out["disagreement"]["readings"]
        .as_array()
        .unwrap_or_else(|| panic!("no readings in {out}"))
        .iter()
        .map(|r| {
            let doc = if r["text"] == "1887" {
                "almanac-1998"
            } else {
                "guide-2021"
            };
            assert_eq!(r["doc_id"], doc, "{r}");
            (
                r["text"].as_str().unwrap().to_string(),
                r["number"].as_u64().unwrap(),
                r["named_by_model"].as_bool().unwrap(),
            )
        })
        .collect();
    found.sort();
    found
}

#[test]
fn a_generated_answer_names_both_readings_when_the_documents_disagree() {
    let dir = tempfile::tempdir().unwrap();
    let index = corpus(dir.path(), "disagree", Some("1893"));
    calibrate(&index);

    // The model names one year only: lector adds the sentence naming both, with their passages.
    let (out, prompt) = generate_json(&index, "The lighthouse was completed in 1893.");
    let readings = reading_numbers(&out);
    let years: Vec<&str> = readings.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(years, ["1887", "1893"], "{out}");
    assert_eq!(
        readings.iter().map(|r| r.2).collect::<Vec<_>>(),
        [false, true],
        "only 1893 is the model's own"
    );
    let (almanac, guide) = (readings[0].1, readings[1].1);
    // The prompt told the model where the passages disagree.
    assert!(
        prompt.contains("The passages disagree on this:"),
        "{prompt}"
    );
    for said in [
        format!("[{almanac}] says \"1887\""),
        format!("[{guide}] says \"1893\""),
    ] {
        assert!(prompt.contains(&said), "missing `{said}` in {prompt}");
    }
    let added = out["disagreement"]["added"]
        .as_str()
        .expect("a sentence added");
    for said in [
        format!("[{almanac}] says 1887"),
        format!("[{guide}] says 1893"),
    ] {
        assert!(added.contains(&said), "missing `{said}` in {added}");
    }
    assert_eq!(
        out["text"],
        format!("The lighthouse was completed in 1893. {added}")
    );
    assert_eq!(
        out["answer"]["text"],
        "The lighthouse was completed in 1893."
    );

    // The text output streams the added sentence and says who named which reading.
    let requests = Arc::new(Mutex::new(Vec::new()));
    let url = scripted_endpoint("The lighthouse was completed in 1893.", requests);
    let text = ok(&lector(&[
        "ask",
        QUESTION,
        "--index",
        &index,
        "--generate",
        "--endpoint",
        &url,
        "--api-model",
        "scripted",
    ]));
    assert!(text.contains(added), "{text}");
    assert!(text.contains("1887 ["), "{text}");
    assert!(text.contains("added by lector"), "{text}");
    assert!(text.contains("named by the model"), "{text}");

    // A model that names both years gets nothing added.
    let (both, _) = generate_json(&index, "Sources differ: 1887 or 1893.");
    assert!(both["disagreement"]["added"].is_null(), "{both}");
    assert_eq!(both["text"], "Sources differ: 1887 or 1893.");
    assert!(reading_numbers(&both).iter().all(|r| r.2));
}

#[test]
fn a_generated_answer_over_agreeing_or_uncalibrated_documents_names_no_readings() {
    let dir = tempfile::tempdir().unwrap();
    let agreeing = corpus(dir.path(), "agree", Some("1887"));
    calibrate(&agreeing);
    let uncalibrated = corpus(dir.path(), "uncalibrated", Some("1893"));
    for index in [agreeing, uncalibrated] {
        let (out, prompt) = generate_json(&index, "It was completed in 1887.");
        assert!(out["disagreement"].is_null(), "{out}");
        assert_eq!(out["text"], "It was completed in 1887.");
        assert!(!prompt.contains("disagree"), "{prompt}");
    }
}

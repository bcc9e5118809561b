//! `lector report drift` as a process, on query logs written with the server's own record types:
//! one whose later window asks longer, off-topic questions that abstain more and retrieve worse,
//! and one whose windows come from the same mix; against a real dense index of the bundled sample.

mod common;

use common::{dense_index, fails, lector, ok, sample};
use lector_querylog::{
    AskRecord, AskSettings, Entry, FeedbackRecord, LoggedAnswer, LoggedPassage, LoggedTimings,
    Verdict,
};
use serde_json::Value;
use std::path::Path;

/// The questions of the bundled sample (about Super Bowl 50), in file order.
fn sample_questions() -> Vec<String> {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(sample()).unwrap()).unwrap();
    let mut out = Vec::new();
    for article in json["data"].as_array().unwrap() {
        for paragraph in article["paragraphs"].as_array().unwrap() {
            for qa in paragraph["qas"].as_array().unwrap() {
                out.push(qa["question"].as_str().unwrap().to_string());
            }
        }
    }
    out
}

/// 30 long questions about things the sample never mentions.
fn off_topic_questions() -> Vec<String> {
    let topics = [
        "photosynthesis in desert cacti",
        "mitochondrial inheritance in mammals",
        "the Byzantine tax system",
        "glacier retreat in Patagonia",
        "medieval Japanese poetry",
        "quantum tunnelling in semiconductors",
        "coral reef bleaching",
        "the Ottoman printing press",
        "volcanic soil chemistry",
        "bird migration across the Sahara",
    ];
    let templates = [
        "According to recent research, how exactly does {} evolve over several decades, and which factors matter most?",
        "What do historians and biologists currently believe about the long-term consequences of {} for ordinary villagers?",
        "Could you explain in simple terms why {} was considered so significant by specialists during the nineteenth century?",
    ];
    templates
        .iter()
        .flat_map(|t| topics.iter().map(move |topic| t.replace("{}", topic)))
        .collect()
}

/// An ask at `minute` minutes past 08:00 on December `day`.
fn ask(day: u32, minute: u32, question: &str, abstained: bool, top: f64, confidence: f64) -> Entry {
    Entry::Ask(AskRecord {
        time: format!(
            "2026-12-{day:02}T{:02}:{:02}:00.000Z",
            8 + minute / 60,
            minute % 60
        ),
        request_id: format!("req-{day}-{minute}"),
        question: question.to_string(),
        redacted: false,
        settings: AskSettings {
            mode: "extractive".into(),
            retrieval: "hybrid".into(),
            k: 5,
            hops: 1,
            vote: false,
            prefer_recent: false,
            rank_prior: 1.0,
            tenant: None,
        },
        answer: (!abstained).then(|| LoggedAnswer {
            text: "Denver Broncos".into(),
            score: Some(7.5),
            doc_id: Some("Super_Bowl_50#0".into()),
            passage: Some(0),
            start: Some(177),
            end: Some(191),
        }),
        abstention: abstained.then(|| "no_span".into()),
        na_prob: Some(1.0 - confidence),
        threshold: Some(0.5),
        confidence: Some(confidence),
        runner_ups: vec![],
        passages: vec![LoggedPassage {
            doc_id: "Super_Bowl_50#0".into(),
            passage: 0,
            start: 0,
            end: 600,
            score: top,
        }],
        unsupported: vec![],
        timings: LoggedTimings::default(),
    })
}

fn feedback(day: u32) -> Entry {
    Entry::Feedback(FeedbackRecord {
        time: format!("2026-12-{day:02}T09:00:00.000Z"),
        request_id: format!("req-{day}-0"),
        verdict: Verdict::Down,
        correct_answer: None,
        note: None,
        tenant: None,
    })
}

/// Writes each day's entries to its own log file in `dir`.
fn write_log(dir: &Path, days: &[(u32, Vec<Entry>)]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    for (n, (day, entries)) in days.iter().enumerate() {
        let lines: String = entries
            .iter()
            .map(|e| serde_json::to_string(e).unwrap() + "\n")
            .collect();
        let name = format!("queries-202612{day:02}T080000Z-{n:06}.jsonl");
        std::fs::write(dir.join(name), lines).unwrap();
    }
    dir.to_string_lossy().into_owned()
}

/// The same confidences in both windows (0.2 to 0.8): a signal that did not change.
fn confidence(i: u32) -> f64 {
    0.2 + 0.1 * f64::from(i % 7)
}

/// Day 1: sample questions, 3 of 30 abstaining, top scores 12-17. Day 2: off-topic questions
/// about twice as long, 18 of 30 abstaining, top scores 4-6.5. Confidence alike.
fn drifting_log(dir: &Path) -> String {
    let questions = sample_questions();
    let before: Vec<Entry> = (0..30)
        .map(|i| {
            let q = &questions[(i * 7) as usize];
            ask(1, i, q, i % 10 == 0, 12.0 + f64::from(i % 6), confidence(i))
        })
        .collect();
    let after: Vec<Entry> = off_topic_questions()
        .iter()
        .zip(0..)
        .map(|(q, i)| {
            ask(
                2,
                i,
                q,
                i % 5 < 3,
                4.0 + 0.5 * f64::from(i % 6),
                confidence(i),
            )
        })
        .collect();
    write_log(
        dir,
        &[(1, [before, vec![feedback(1)]].concat()), (2, after)],
    )
}

/// Both days: sample questions (even ones, then odd ones), answered alike.
fn stable_log(dir: &Path) -> String {
    let questions = sample_questions();
    let day = |d: u32, offset: usize| -> Vec<Entry> {
        (0..30)
            .map(|i| {
                let q = &questions[i as usize * 2 + offset];
                ask(
                    d,
                    i,
                    q,
                    i % 10 == offset as u32 * 5,
                    12.0 + f64::from((i + d) % 6),
                    confidence(i + d),
                )
            })
            .collect()
    };
    write_log(dir, &[(1, day(1, 0)), (2, day(2, 1))])
}

/// The error of `lector report drift --log LOG EXTRA`, which must exit with code 2.
fn refused(log: impl AsRef<Path>, extra: &[&str]) -> String {
    let log = log.as_ref().to_string_lossy();
    let mut args = vec!["report", "drift", "--log", &log];
    args.extend_from_slice(extra);
    fails(&lector(&args))
}

fn report(log: &str, extra: &[&str]) -> Value {
    let mut args = vec!["report", "drift", "--log", log, "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&lector(&args))).expect("JSON output")
}

fn signal<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no signal {name}"))
}

fn drifted(report: &Value) -> Vec<String> {
    report["drifted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn drift_flags_what_changed_and_not_what_did_not() {
    let dir = tempfile::tempdir().unwrap();
    let index = dense_index(dir.path());
    let log = drifting_log(&dir.path().join("drifting"));
    let html = dir.path().join("drift.html");
    let out = report(&log, &["--index", &index, "--html", html.to_str().unwrap()]);

    // The median time splits the log into its two days; feedback lines are not asks.
    for (name, first) in [
        ("before", "2026-12-01T08:00"),
        ("after", "2026-12-02T08:00"),
    ] {
        assert_eq!(out["windows"][name]["asks"], 30);
        assert!(out["windows"][name]["first_ask"]
            .as_str()
            .unwrap()
            .starts_with(first));
    }
    let expected = vec![
        "question_words",
        "oov_rate",
        "abstention_rate",
        "top_score",
        "nearest_similarity",
        "far_share",
    ];
    assert_eq!(drifted(&out), expected, "{out:#}");
    assert_eq!(signal(&out, "confidence")["drifted"], false);
    assert_eq!(signal(&out, "confidence")["test"]["statistic"], 0.0);

    let words = signal(&out, "question_words");
    assert!(
        words["after"]["mean"].as_f64().unwrap() > 1.5 * words["before"]["mean"].as_f64().unwrap()
    );
    let abstention = signal(&out, "abstention_rate");
    assert_eq!(abstention["before"]["count"], 3);
    assert_eq!(abstention["after"]["count"], 18);
    assert_eq!(abstention["test"]["name"], "fisher_exact");
    assert!((abstention["change"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    // The sample's own questions are near the index; none of the off-topic ones are.
    let far = signal(&out, "far_share");
    assert!(far["before"]["rate"].as_f64().unwrap() <= 0.1, "{far}");
    assert_eq!(far["after"]["rate"], 1.0);
    let oov = signal(&out, "oov_rate");
    assert!(oov["before"]["rate"].as_f64().unwrap() < 0.4, "{oov}");
    assert!(oov["after"]["rate"].as_f64().unwrap() > 0.5, "{oov}");

    // The same windows chosen by --split and explicitly give the same report.
    let split = report(&log, &["--index", &index, "--split", "2026-12-02"]);
    let explicit = report(
        &log,
        &[
            "--index",
            &index,
            "--before",
            "..2026-12-02",
            "--after",
            "2026-12-02T00:00Z..2026-12-03",
        ],
    );
    for other in [&split, &explicit] {
        assert_eq!(other["signals"], out["signals"]);
    }

    // The HTML report: the table, and one overlaid before/after histogram per distribution.
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 5, "{page}");
    for heading in [
        "question length: before and after",
        "out-of-vocabulary rate: before and after",
        "confidence: before and after",
        "top retrieval score: before and after",
        "nearest passage similarity: before and after",
    ] {
        assert!(page.contains(heading), "{heading}");
    }
    assert!(page.contains(">before (30)</text>") && page.contains(">after (30)</text>"));
    assert!(page.contains("class=\"bar series1\""));
    assert!(page.contains("drifted: question length, out-of-vocabulary rate"));

    let stable = report(
        &stable_log(&dir.path().join("stable")),
        &["--index", &index],
    );
    assert_eq!(drifted(&stable), Vec::<String>::new(), "{stable:#}");
    for s in stable["signals"].as_array().unwrap() {
        assert_eq!(s["available"], true, "{s}");
    }
}

#[test]
fn drift_says_what_it_cannot_measure_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let log = drifting_log(&dir.path().join("log"));

    // Without an index: the log's own signals only, and why the others are missing.
    let out = report(&log, &[]);
    assert_eq!(signal(&out, "oov_rate")["available"], false);
    assert_eq!(signal(&out, "oov_rate")["reason"], "needs --index");
    assert!(signal(&out, "far_share")["reason"]
        .as_str()
        .unwrap()
        .contains("dense or hybrid index"));
    assert_eq!(
        drifted(&out),
        ["question_words", "abstention_rate", "top_score"]
    );
    let table = ok(&lector(&["report", "drift", "--log", &log]));
    assert!(table.contains("abstention rate"), "{table}");
    assert!(
        table.contains("0.100 (3/30)") && table.contains("0.600 (18/30)"),
        "{table}"
    );
    assert!(table.contains("out-of-vocabulary rate: not available: needs --index"));
    assert!(table.contains("drifted: question length, abstention rate, top retrieval score"));

    // A window with too few asks.
    let err = refused(
        &log,
        &[
            "--before",
            "2026-12-01..2026-12-01T08:03Z",
            "--after",
            "2026-12-02..",
        ],
    );
    assert!(
        err.contains(
            "the before window (2026-12-01T00:00:00.000Z..2026-12-01T08:03:00.000Z) holds 3 asks"
        ),
        "{err}"
    );
    assert!(err.contains("at least 5"), "{err}");
    let err = refused(&log, &["--split", "2030-01-01"]);
    assert!(
        err.contains("the after window") && err.contains("holds 0 asks"),
        "{err}"
    );

    // A line that is not a record, and a record whose time is not a time: file and line named.
    let bad = dir.path().join("bad");
    write_log(&bad, &[(1, vec![feedback(1)])]);
    let file = bad.join("queries-20261201T080000Z-000000.jsonl");
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{good}{{\"type\":\"ask\"}}\n")).unwrap();
    let err = refused(&bad, &[]);
    assert!(
        err.contains("queries-20261201T080000Z-000000.jsonl, line 2"),
        "{err}"
    );
    let mut entry = ask(1, 0, "Who won?", false, 10.0, 0.9);
    if let Entry::Ask(a) = &mut entry {
        a.time = "last tuesday".into();
    }
    std::fs::write(
        &file,
        format!("{good}{}\n", serde_json::to_string(&entry).unwrap()),
    )
    .unwrap();
    let err = refused(&bad, &[]);
    assert!(
        err.contains("000000.jsonl, line 2: `time` is `last tuesday`"),
        "{err}"
    );

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = refused(&empty, &[]);
    assert!(err.contains("no query log files"), "{err}");
    // A missing directory: the cause said once.
    let missing = dir.path().join("missing");
    let err = refused(&missing, &[]);
    assert!(err.contains("cannot read the query log"), "{err}");
    assert_eq!(err.matches("(os error").count(), 1, "{err}");
}

//! `lector eval canary` as a process, on a real SQuAD v1.1 dev slice with the shipped reader: an
//! unchanged re-index is quiet, a re-index with tiny passages raises the alarm (exit code 1), a
//! running `lector serve` answers like the local index, and a baseline of other questions is an
//! error (exit code 2).

mod common;

use common::{index_documents, lector, ok, serve, stderr};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: no JSON on stdout; stderr: {}", stderr(out)))
}

/// The documents: the first two articles of SQuAD v1.1 dev (103 paragraphs), as `ask_cli.rs`
/// indexes them; the questions: those of the first `paragraphs` paragraphs of each article (65
/// questions for 2). Returns (documents file, questions file).
fn slices(dir: &Path, paragraphs: usize) -> (String, String) {
    let path = lector_eval::data::require("squad/dev-v1.1.json");
    let mut squad: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    squad["data"].as_array_mut().unwrap().truncate(2);
    let documents = write(dir, "documents.json", &squad);
    for article in squad["data"].as_array_mut().unwrap() {
        article["paragraphs"]
            .as_array_mut()
            .unwrap()
            .truncate(paragraphs);
    }
    let questions = write(dir, &format!("questions-{paragraphs}.json"), &squad);
    (documents, questions)
}

/// The first `n` questions of `questions` (in its first paragraph), as a file of their own.
fn first_questions(questions: &str, n: usize, dir: &Path) -> String {
    let mut squad: Value =
        serde_json::from_str(&std::fs::read_to_string(questions).unwrap()).unwrap();
    squad["data"].as_array_mut().unwrap().truncate(1);
    let article = &mut squad["data"][0];
    article["paragraphs"].as_array_mut().unwrap().truncate(1);
    article["paragraphs"][0]["qas"]
        .as_array_mut()
        .unwrap()
        .truncate(n);
    write(dir, &format!("first-{n}.json"), &squad)
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

/// `lector eval canary --questions Q --baseline B` with `extra` arguments.
fn canary(questions: &str, baseline: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "eval",
        "canary",
        "--questions",
        questions,
        "--baseline",
        baseline,
    ];
    args.extend_from_slice(extra);
    lector(&args)
}

#[test]
fn an_unchanged_reindex_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let (documents, questions) = slices(dir.path(), 2);
    let first = index_documents(&documents, dir.path(), "first", &[]);
    // Without --baseline, the baseline lies beside the questions.
    let written = json(&lector(&[
        "eval",
        "canary",
        "--questions",
        &questions,
        "--index",
        &first,
        "--write-baseline",
        "--json",
    ]));
    let path = dir.path().join("questions-2.baseline.json");
    assert_eq!(written["baseline_file"], path.to_string_lossy().as_ref());
    let baseline: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(baseline["format"], "lector-canary-baseline/1");
    assert_eq!(baseline["scores"], written["scores"]);
    assert_eq!(baseline["scores"]["questions"], 65);
    assert_eq!(baseline["predictions"].as_object().unwrap().len(), 65);
    assert_eq!(baseline["settings"]["mode"], "bm25");
    assert_eq!(baseline["settings"]["documents"], 103);
    assert_eq!(baseline["questions_sha256"].as_str().unwrap().len(), 64);
    let f1 = baseline["scores"]["f1"].as_f64().unwrap();
    assert!(f1 > 30.0, "the pipeline should answer many: {baseline}");

    // The same documents again, into a fresh directory.
    let second = index_documents(&documents, dir.path(), "second", &[]);
    let out = lector(&[
        "eval",
        "canary",
        "--questions",
        &questions,
        "--index",
        &second,
    ]);
    let text = ok(&out);
    assert!(text.contains("answers changed: 0 of 65"), "{text}");
    assert!(
        text.contains("quiet: every check is within its bound"),
        "{text}"
    );
    let f1_row = text.lines().find(|l| l.starts_with("F1 (%)")).unwrap();
    assert!(
        f1_row.contains(&format!("{f1:.2}")) && f1_row.ends_with("ok"),
        "{text}"
    );
    assert!(!stderr(&out).contains("alarm"), "{}", stderr(&out));
}

#[test]
fn a_reindex_with_tiny_passages_raises_the_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let (documents, questions) = slices(dir.path(), 2);
    let baseline = dir.path().join("base.json").to_string_lossy().into_owned();
    let good = index_documents(&documents, dir.path(), "good", &[]);
    ok(&canary(
        &questions,
        &baseline,
        &["--index", &good, "--write-baseline"],
    ));
    // 20-word passages cut most answers off from the context that gives them away.
    let broken = index_documents(&documents, dir.path(), "broken", &["--passage-words", "20"]);
    let out = canary(&questions, &baseline, &["--index", &broken, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["alarm"], true);
    let checks = report["checks"].as_array().unwrap();
    let f1 = checks.iter().find(|c| c["check"] == "f1_drop").unwrap();
    assert_eq!(f1["failed"], true, "{report}");
    assert!(f1["change"].as_f64().unwrap() < -2.0, "{report}");
    let err = stderr(&out);
    assert!(err.contains("alarm: F1 dropped by"), "{err}");
    for check in checks.iter().filter(|c| c["failed"] == true) {
        let named = match check["check"].as_str().unwrap() {
            "f1_drop" => "F1 dropped",
            _ => "the abstention rate moved",
        };
        assert!(err.contains(named), "{err}");
    }
    // The settings that moved are named too.
    assert!(
        err.contains("index_settings.chunking.words: 100 -> 20"),
        "{err}"
    );
    let changed = report["changed_answers"].as_array().unwrap();
    assert_eq!(report["changed"].as_u64().unwrap() as usize, changed.len());
    assert!(!changed.is_empty());
    // Those that lost the most F1 come first.
    let loss = |c: &Value| c["f1_baseline"].as_f64().unwrap() - c["f1_current"].as_f64().unwrap();
    assert!(changed.windows(2).all(|w| loss(&w[0]) >= loss(&w[1])));
    assert!(changed.iter().all(|c| c["baseline"] != c["current"]));

    // The table says which check failed, and still exits 1.
    let out = canary(&questions, &baseline, &["--index", &broken]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let f1_row = text.lines().find(|l| l.starts_with("F1 (%)")).unwrap();
    assert!(f1_row.ends_with("ALARM"), "{text}");
    assert!(text.contains("the 5 that lost the most F1"), "{text}");
}

#[test]
fn a_server_answers_like_the_local_index() {
    let dir = tempfile::tempdir().unwrap();
    let (documents, questions) = slices(dir.path(), 2);
    let index = index_documents(&documents, dir.path(), "index", &[]);
    let baseline = dir.path().join("base.json").to_string_lossy().into_owned();
    ok(&canary(
        &questions,
        &baseline,
        &["--index", &index, "--write-baseline"],
    ));
    let (mut server, addr) = serve(&index, &[]);
    let url = format!("http://{addr}");
    let out = canary(&questions, &baseline, &["--against", &url, "--json"]);
    server.stop();
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["changed"], 0, "{report}");
    assert_eq!(report["current"], report["baseline"]);
    assert_eq!(report["source"]["url"], url.as_str());
}

#[test]
fn bad_baselines_and_servers_are_errors_not_alarms() {
    let dir = tempfile::tempdir().unwrap();
    let (documents, questions) = slices(dir.path(), 2);
    let other = first_questions(&questions, 3, dir.path());
    let index = index_documents(&documents, dir.path(), "index", &[]);
    let baseline = dir.path().join("other.json").to_string_lossy().into_owned();
    ok(&canary(
        &other,
        &baseline,
        &["--index", &index, "--write-baseline"],
    ));
    let refused = |args: &[&str], expected: &str| {
        let out = lector(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{err}"
        );
    };
    let base = ["eval", "canary", "--questions", &questions];
    refused(
        &[&base[..], &["--index", &index, "--baseline", &baseline]].concat(),
        "is the baseline of another questions file",
    );
    refused(
        &[&base[..], &["--index", &index]].concat(),
        "no baseline at",
    );
    // A server that is not there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let own = dir.path().join("own.json").to_string_lossy().into_owned();
    refused(
        &[
            &base[..],
            &[
                "--against",
                &format!("http://127.0.0.1:{port}"),
                "--baseline",
                &own,
                "--write-baseline",
            ],
        ]
        .concat(),
        &format!("127.0.0.1:{port}/v1/ask"),
    );
    std::fs::write(&own, "{\"format\": 3}").unwrap();
    refused(
        &[&base[..], &["--index", &index, "--baseline", &own]].concat(),
        "own.json: not a lector canary baseline",
    );
}

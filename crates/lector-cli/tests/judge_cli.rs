//! `lector eval judge`, `eval faithfulness --judge` and `eval generative --judge-claims` through
//! the binary against a scripted OpenAI-compatible server on the loopback interface. The script reads the prompt: a correctness judge that says correct when
//! the candidate names "Denver Broncos" (partially correct for "Denver" alone), in three reply
//! formats and one malformed reply; a pairwise judge that prefers the answer naming the Broncos,
//! except on "biased" questions where it always prefers the answer shown first; a faithfulness
//! judge checking the answer's (or claim's) words against the passage; and, asked as the
//! generator of a retrieval-augmented run, one fixed cited answer. The server counts requests and the
//! most in flight at once, to prove the cache and the concurrency limit.

mod common;

use common::{fails, lector, ok};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// What the scripted server saw.
#[derive(Default)]
struct Stats {
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

struct ScriptedServer {
    url: String,
    stats: Arc<Stats>,
}

/// Each reply waits this long, so that concurrent requests overlap.
const DELAY: Duration = Duration::from_millis(150);

fn scripted_server() -> ScriptedServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let stats = Arc::new(Stats::default());
    let shared = Arc::clone(&stats);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let stats = Arc::clone(&shared);
            thread::spawn(move || handle(stream, &stats));
        }
    });
    ScriptedServer { url, stats }
}

fn handle(mut stream: TcpStream, stats: &Stats) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let request: Value = serde_json::from_slice(&body).unwrap();
    let prompt = request["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();

    stats.requests.fetch_add(1, Ordering::SeqCst);
    let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
    thread::sleep(DELAY);
    stats.in_flight.fetch_sub(1, Ordering::SeqCst);

    let reply = json!({
        "choices": [{"message": {"role": "assistant", "content": script(&prompt)}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5}
    })
    .to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    );
}

/// The text after `label: ` on the prompt's line starting with it.
fn field<'a>(prompt: &'a str, label: &str) -> Option<&'a str> {
    prompt
        .lines()
        .find_map(|l| l.strip_prefix(label)?.strip_prefix(": "))
}

/// The judge's reply to `prompt`.
fn script(prompt: &str) -> String {
    if prompt.contains("\nAnswer 1") {
        return equivalence(prompt);
    }
    if let Some(answer) = field(prompt, "Candidate answer") {
        return correctness(answer);
    }
    if let (Some(a), Some(b)) = (field(prompt, "Answer A"), field(prompt, "Answer B")) {
        return pairwise(field(prompt, "Question").unwrap_or(""), a, b);
    }
    if prompt.contains("Answer with citations:") {
        // Asked as the generator of a retrieval-augmented run.
        return "The Denver Broncos won Super Bowl 50 [1].".into();
    }
    let (passage, answer) = (
        field(prompt, "Passage").unwrap(),
        field(prompt, "Answer")
            .or_else(|| field(prompt, "Claim"))
            .unwrap(),
    );
    let supported = answer
        .split_whitespace()
        .all(|w| passage.to_lowercase().contains(&w.to_lowercase()));
    format!(
        "Verdict: {}",
        if supported {
            "supported"
        } else {
            "not supported"
        }
    )
}

fn correctness(answer: &str) -> String {
    if answer.contains("garbled") {
        return "I cannot say.".into();
    }
    let verdict = if answer.contains("Denver Broncos") {
        "correct"
    } else if answer.contains("Denver") {
        "partially correct"
    } else {
        "incorrect"
    };
    if answer.contains("(json)") {
        format!("```json\n{{\"verdict\": \"{verdict}\", \"reason\": \"gold word check\"}}\n```")
    } else if answer.contains("(prose)") {
        format!(
            "Let me compare.\n**Verdict:** {}\nReason: gold word check",
            verdict.to_uppercase()
        )
    } else {
        format!("Verdict: {verdict}\nReason: gold word check")
    }
}

/// Equivalent when both answers name the Broncos or neither does; on a "biased" question,
/// equivalent whenever the answer shown first names the Panthers (so the two orders disagree).
fn equivalence(prompt: &str) -> String {
    let line = |start: &str| prompt.lines().find(|l| l.starts_with(start)).unwrap();
    let (one, two) = (line("Answer 1"), line("Answer 2"));
    let same = if field(prompt, "Question").unwrap_or("").contains("biased") {
        one.contains("Panthers")
    } else {
        one.contains("Broncos") == two.contains("Broncos")
    };
    format!(
        "Verdict: {}\nReason: team check",
        if same { "equivalent" } else { "not equivalent" }
    )
}

fn pairwise(question: &str, a: &str, b: &str) -> String {
    if question.contains("garbled") {
        return "Both are fine, I guess.".into();
    }
    if question.contains("biased") {
        return "Verdict: A\nReason: the first one reads well".into();
    }
    let verdict = match (a.contains("Denver Broncos"), b.contains("Denver Broncos")) {
        (true, false) => "A",
        (false, true) => "B",
        _ => "tie",
    };
    format!("Verdict: {verdict}")
}

fn write_items(dir: &Path, items: &[Value]) -> String {
    let path = dir.join("items.jsonl");
    let text: String = items.iter().map(|i| format!("{i}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// `lector eval judge ITEMS --endpoint URL --api-model judge-model --cache DIR` plus `extra`.
fn judge(
    server: &ScriptedServer,
    items: &str,
    cache: &Path,
    extra: &[&str],
) -> std::process::Output {
    let cache = cache.to_string_lossy();
    let mut args = vec![
        "eval",
        "judge",
        items,
        "--endpoint",
        &server.url,
        "--api-model",
        "judge-model",
        "--cache",
        &cache,
    ];
    args.extend_from_slice(extra);
    lector(&args)
}

const QUESTION: &str = "Which NFL team represented the AFC at Super Bowl 50?";

fn correctness_item(answer: &str, label: &str) -> Value {
    json!({"question": QUESTION, "references": ["Denver Broncos"], "answer": answer, "label": label})
}

#[test]
fn correctness_verdicts_kappa_concurrency_and_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut items = vec![
        correctness_item("Denver Broncos", "correct"),
        correctness_item("the Denver Broncos (json)", "correct"),
        correctness_item("Denver (prose)", "partially_correct"),
        correctness_item("Carolina Panthers", "incorrect"),
        correctness_item("Carolina Panthers (prose)", "incorrect"),
        correctness_item("garbled", "incorrect"),
        correctness_item("Denver", "correct"),
        correctness_item("Peyton Manning", "incorrect"),
    ];
    items[7]["generator"] = json!("judge-model");
    let items = write_items(dir.path(), &items);
    let server = scripted_server();
    let cache = dir.path().join("cache");
    let per_item = dir.path().join("per-item.jsonl");
    let out = judge(
        &server,
        &items,
        &cache,
        &[
            "--concurrency",
            "3",
            "--json",
            "--per-item",
            &per_item.to_string_lossy(),
        ],
    );
    let summary: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert!(
        common::stderr(&out).contains("1 of 8 items were generated by the judge model itself"),
        "{}",
        common::stderr(&out)
    );
    assert_eq!(
        summary["verdicts"],
        json!({"correct": 2, "partially_correct": 2, "incorrect": 3, "unparseable": 1})
    );
    assert_eq!(summary["unparseable_replies"], 1);
    assert_eq!(summary["replies"], 8);
    assert_eq!(summary["self_judged"], 1);
    // 7 decided and labelled; verdicts c 2, p 2, i 3 against labels c 3, p 1, i 3, 6 agreeing:
    // p_o = 42/49, p_e = (2*3 + 2*1 + 3*3)/49 = 17/49, kappa = 25/32.
    let agreement = &summary["agreement"];
    assert_eq!(agreement["compared"], 7);
    let kappa = &agreement["kappa"];
    assert!(
        (kappa["mean"].as_f64().unwrap() - 25.0 / 32.0).abs() < 1e-9,
        "{kappa}"
    );
    assert!(kappa["low"].as_f64().unwrap() <= 25.0 / 32.0);
    assert!((agreement["accuracy"].as_f64().unwrap() - 6.0 / 7.0).abs() < 1e-9);
    // Correct (1) against words: lengths 2, 4, 2, 2, 3, 1, 2 with 1, 1, 0, 0, 0, 0, 0:
    // r = (10/7) / sqrt(38/7 * 10/7) = 10 / sqrt(380).
    let r = summary["verbosity_r"].as_f64().unwrap();
    assert!((r - 10.0 / 380f64.sqrt()).abs() < 1e-9, "{r}");
    assert_eq!(
        summary["cost"],
        json!({"requests": 8, "cached": 0, "prompt_tokens": 800, "generated_tokens": 40})
    );
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), 8);
    let most = server.stats.max_in_flight.load(Ordering::SeqCst);
    assert!((2..=3).contains(&most), "{most} requests in flight at once");

    let rows: Vec<Value> = std::fs::read_to_string(&per_item)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 8);
    assert_eq!(rows[1]["verdict"], "correct");
    assert_eq!(rows[1]["judgement"]["reason"], "gold word check");
    assert_eq!(rows[5]["judgement"]["reply"], "I cannot say.");
    assert_eq!(rows[6]["label"], "correct");

    // The second run asks nothing: every reply is cached.
    let again: Value =
        serde_json::from_str(&ok(&judge(&server, &items, &cache, &["--json"]))).unwrap();
    assert_eq!(
        again["cost"],
        json!({"requests": 0, "cached": 8, "prompt_tokens": 0, "generated_tokens": 0})
    );
    assert_eq!(again["verdicts"], summary["verdicts"]);
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), 8);
}

#[test]
fn pairwise_asks_both_orders_and_measures_position_bias() {
    let dir = tempfile::tempdir().unwrap();
    let pair = |q: &str, a: &str, b: &str, label: &str| json!({"question": q, "reference": "Denver Broncos", "answer_a": a, "answer_b": b, "label": label});
    let items = write_items(
        dir.path(),
        &[
            pair(QUESTION, "Denver Broncos", "Carolina Panthers", "A"),
            pair(QUESTION, "Carolina Panthers", "the Denver Broncos", "B"),
            pair("A biased question?", "Denver Broncos", "Carolina", "A"),
            pair("Another biased one?", "x", "y z", "tie"),
            pair(QUESTION, "Denver Broncos", "the Denver Broncos", "tie"),
            pair("A garbled question", "p", "q", "A"),
        ],
    );
    let server = scripted_server();
    let cache = dir.path().join("cache");
    let out = judge(&server, &items, &cache, &["--mode", "pairwise", "--json"]);
    let summary: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(
        summary["verdicts"],
        json!({"A": 1, "B": 1, "tie": 1, "inconsistent": 2, "unparseable": 1})
    );
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), 12);
    assert_eq!(
        (
            summary["replies"].clone(),
            summary["unparseable_replies"].clone()
        ),
        (json!(12), json!(2))
    );
    let bias = &summary["position_bias"];
    assert_eq!(bias["parsed_pairs"], 5);
    assert_eq!(bias["first_shown_twice"], 2);
    assert_eq!(bias["second_shown_twice"], 0);
    assert!((bias["position_bias"].as_f64().unwrap() - 0.4).abs() < 1e-12);
    assert!((bias["order_dependent_rate"].as_f64().unwrap() - 0.4).abs() < 1e-12);
    // Three consistent, labelled pairs, all agreeing: kappa 1.
    assert_eq!(summary["agreement"]["compared"], 3);
    assert_eq!(summary["agreement"]["kappa"]["mean"], 1.0);

    // The table, from the cache.
    let table = ok(&judge(&server, &items, &cache, &["--mode", "pairwise"]));
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), 12);
    for expected in [
        "verdict inconsistent",
        "unparseable replies",
        "2 of 12 (16.7%)",
        "kappa [95% CI]",
        "40.0% of 5 parsed pairs",
        "requests made / cached",
        "0 / 12",
    ] {
        assert!(
            table.contains(expected),
            "{expected:?} missing from\n{table}"
        );
    }
}

#[test]
fn faithfulness_judges_answers_against_passages() {
    let dir = tempfile::tempdir().unwrap();
    let passage = "The Denver Broncos defeated the Carolina Panthers 24-10 to win Super Bowl 50.";
    let items = write_items(
        dir.path(),
        &[
            json!({"question": "Who won?", "context": passage, "answer": "Denver Broncos", "label": "supported"}),
            json!({"context": [passage], "answer": "New England Patriots", "label": "not_supported"}),
        ],
    );
    let server = scripted_server();
    let out = judge(
        &server,
        &items,
        &dir.path().join("cache"),
        &["--mode", "faithfulness", "--json", "--concurrency", "4"],
    );
    let summary: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(
        summary["verdicts"],
        json!({"supported": 1, "not_supported": 1, "unparseable": 0})
    );
    assert_eq!(summary["agreement"]["accuracy"], 1.0);
}

#[test]
fn a_judge_decides_the_claims_of_a_faithfulness_set() {
    let dir = tempfile::tempdir().unwrap();
    let passage = "The Denver Broncos defeated the Carolina Panthers 24-10 to win Super Bowl 50.";
    let set = dir.path().join("claims.jsonl");
    let lines = [
        json!({"id": "c1", "passage": passage, "claim": "The Denver Broncos defeated the Carolina Panthers", "label": "supported", "kind": "copied"}),
        json!({"id": "c2", "passage": passage, "claim": "The New England Patriots defeated the Carolina Panthers", "label": "unsupported", "kind": "entity"}),
        json!({"id": "c3", "passage": passage, "claim": "The Broncos won Super Bowl 50", "label": "supported", "kind": "paraphrased"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&set, text).unwrap();
    let server = scripted_server();
    let per_claim = dir.path().join("per-claim.jsonl");
    let out: Value = serde_json::from_str(&ok(&lector(&[
        "eval",
        "faithfulness",
        &set.to_string_lossy(),
        "--judge",
        "--endpoint",
        &server.url,
        "--api-model",
        "judge-model",
        "--per-claim",
        &per_claim.to_string_lossy(),
        "--json",
    ])))
    .unwrap();
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), 3);
    // The scripted judge wants every word in the passage: "won" is not, so c3 fails.
    let judge = &out["checkers"]["judge"];
    assert_eq!(judge["model"], "judge-model", "{out}");
    assert!(
        (judge["accuracy"].as_f64().unwrap() - 200.0 / 3.0).abs() < 1e-9,
        "{out}"
    );
    assert_eq!(judge["auroc"], 0.75, "{out}");
    let rows: Vec<Value> = std::fs::read_to_string(&per_claim)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let verdicts: Vec<&Value> = rows.iter().map(|r| &r["judge_supported"]).collect();
    assert_eq!(verdicts, [&json!(true), &json!(false), &json!(false)]);
    // Without --judge there is no judge checker and no request.
    let plain: Value = serde_json::from_str(&ok(&lector(&[
        "eval",
        "faithfulness",
        &set.to_string_lossy(),
        "--json",
    ])))
    .unwrap();
    assert!(plain["checkers"]["judge"].is_null(), "{plain}");
}

#[test]
fn a_retrieval_augmented_run_lets_the_judge_decide_each_claim() {
    let server = scripted_server();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/squad-v1.1-sample.json");
    let run = |extra: &[&str]| -> Value {
        let mut args = vec![
            "eval",
            "generative",
            "--squad",
            sample.to_str().unwrap(),
            "--limit",
            "2",
            "--retrieve",
            "--k",
            "2",
            "--endpoint",
            &server.url,
            "--api-model",
            "generator-model",
            "--json",
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&lector(&args))).unwrap()
    };
    let judged = run(&[
        "--judge-endpoint",
        &server.url,
        "--judge-api-model",
        "judge-model",
        "--judge-claims",
    ]);
    assert_eq!(judged["claims_checked_by"], "judge judge-model", "{judged}");
    // Two answers, each one claim, each claim one judge request; plus two generations, two
    // correctness verdicts and two equivalence verdicts of two orders each.
    assert_eq!(judged["counts"]["claims"], 2, "{judged}");
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), 10);
    // "The Denver Broncos won Super Bowl 50" is the AFC team, not the NFC team.
    assert_eq!(judged["judge_equivalence"]["equivalent"], 50.0, "{judged}");
    assert_eq!(judged["judge_equivalence"]["inconsistent"], 0);
    let lexical = run(&[]);
    assert_eq!(lexical["claims_checked_by"], "lexical");
    let refused = fails(&lector(&[
        "eval",
        "generative",
        "--squad",
        sample.to_str().unwrap(),
        "--limit",
        "1",
        "--retrieve",
        "--endpoint",
        &server.url,
        "--api-model",
        "generator-model",
        "--judge-claims",
    ]));
    assert!(refused.contains("--judge-claims needs"), "{refused}");
}

#[test]
fn bad_items_are_refused_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let items = write_items(
        dir.path(),
        &[
            json!({"question": "Q", "answer_a": "a", "answer_b": "b"}),
            json!({"question": "Q", "answer_a": "a"}),
        ],
    );
    // Items are checked before any model is loaded or endpoint asked.
    let err = fails(&lector(&["eval", "judge", &items, "--mode", "pairwise"]));
    assert!(
        err.contains("items.jsonl: line 2: pairwise judging needs `answer_a` and `answer_b`"),
        "{err}"
    );
    let err = fails(&lector(&["eval", "judge", &items]));
    assert!(
        err.contains("line 1: correctness judging needs `answer`"),
        "{err}"
    );
    std::fs::write(dir.path().join("items.jsonl"), "{\"question\": \"Q\",\n").unwrap();
    let err = fails(&lector(&["eval", "judge", &items]));
    assert!(err.contains("items.jsonl:1:"), "{err}");
}

#[test]
fn the_judge_decides_equivalence_in_both_orders_apart_from_the_rules() {
    let server = scripted_server();
    let dir = tempfile::tempdir().unwrap();
    let item = |q: &str, answer: &str, golds: &[&str], label: bool| json!({"question": q, "answer": answer, "golds": golds, "label": label});
    let items = [
        item(
            QUESTION,
            "The Denver Broncos won.",
            &["Denver Broncos"],
            true,
        ),
        item(QUESTION, "Carolina Panthers", &["Denver Broncos"], false),
        item(
            QUESTION,
            "Broncos",
            &["Denver Broncos", "the Broncos"],
            true,
        ),
        item("A biased question?", "Panthers", &["Broncos"], false),
    ];
    let path = dir.path().join("equivalence.jsonl");
    let text: String = items.iter().map(|i| format!("{i}\n")).collect();
    std::fs::write(&path, text).unwrap();
    let rows = dir.path().join("rows.jsonl");
    let out = ok(&lector(&[
        "eval",
        "equivalence",
        &path.to_string_lossy(),
        "--judge-endpoint",
        &server.url,
        "--judge-api-model",
        "judge-model",
        "--per-item",
        &rows.to_string_lossy(),
        "--json",
    ]));
    assert_eq!(
        server.stats.requests.load(Ordering::SeqCst),
        8,
        "two orders per item"
    );
    let out: Value = serde_json::from_str(&out).unwrap();
    let by_judge = &out["judge_equivalence"];
    assert_eq!(by_judge["model"], "judge-model");
    assert_eq!(
        by_judge["inconsistent"], 1,
        "the biased item's orders disagree"
    );
    assert_eq!(by_judge["equivalent"], 50.0);
    let verdicts: Vec<String> = std::fs::read_to_string(&rows)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["judge_equivalence"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        verdicts,
        ["equivalent", "not_equivalent", "equivalent", "inconsistent"]
    );
    let judged = out["agreement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["verdict"] == "judge_equivalent")
        .expect("the judge's row beside the rules'");
    assert_eq!(
        (judged["precision"].as_f64(), judged["recall"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    // The rule-based rows are unchanged by the judge.
    let rules: Vec<&str> = out["agreement"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        ["exact_match", "equivalent", "key_fact", "judge_equivalent"]
    );

    // The same judge through `eval judge --mode equivalence`, with labels and the cache.
    let judge_items = write_items(
        dir.path(),
        &[
            json!({"question": QUESTION, "answer": "The Denver Broncos won.", "references": ["Denver Broncos"], "label": "equivalent"}),
            json!({"question": QUESTION, "answer": "Carolina Panthers", "references": "Denver Broncos", "label": "not equivalent"}),
        ],
    );
    let report: Value = serde_json::from_str(&ok(&judge(
        &server,
        &judge_items,
        &dir.path().join("cache"),
        &["--mode", "equivalence", "--json"],
    )))
    .unwrap();
    assert_eq!(report["agreement"]["accuracy"], 1.0, "{report:#}");
}

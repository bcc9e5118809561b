//! Labelling logged questions: `lector serve --log-queries` logs real asks, `POST /v1/labels`
//! checks and stores labels (durably: they survive SIGKILL), `GET /v1/label/next` orders what
//! is left, `lector label export` writes SQuAD v2.0 that the project's SQuAD loaders read with
//! the exact character offsets, and the labelling page labels a span and an unanswerable
//! question in headless Chromium.

mod common;

use common::{browser_or_skip, dump_dom, get_json, http, index, lector, ok, serve, Server};
use lector_querylog::label::read_labels;
use lector_querylog::{read_log, Entry};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn post(addr: &str, path: &str, body: &Value) -> (u16, Value) {
    let (status, text) = http(addr, "POST", path, Some(&body.to_string()));
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, value)
}

/// A document whose answer sits in its second passage, after an emoji and other characters
/// beyond ASCII, so character offsets, UTF-16 offsets and byte offsets all differ.
const GRENEN: &str = "The dunes of Råbjerg Mile 🏜 move fifteen metres north-east every year. \
Fishermen from Ålbæk sold plaice and cod on the beach until the railway came in 1890. \
Painters such as Anna Ancher and P. S. Krøyer worked in the town and painted its blue evenings. \
The old church was buried by sand and only its tower still stands above the dunes. \
Summer visitors rent bicycles and ride along the heath to the harbour café. \
Seals rest on the sandbanks, and terns nest in the grass behind the beach. \
In winter the storms bring amber, which children collect after the high tides. \
The local museum keeps nets, boats and photographs of the rescue crews. \
Trains from Frederikshavn arrive every hour and stop at the small yellow station. \
At the tip of Grenen 🏝, the lighthouse is kept by Maren Jørgensen since 1998. She lives in Ålbæk.";

const KEEPER: &str = "Maren Jørgensen";

/// The character offset (Unicode scalar values) of `needle` in `text`, as Python would say.
fn char_offset(text: &str, needle: &str) -> usize {
    text[..text.find(needle).unwrap()].chars().count()
}

fn add_grenen(addr: &str) {
    let doc = json!({"id": "grenen", "title": "Grenen 🏝", "text": GRENEN});
    let (status, body) = post(addr, "/v1/documents", &doc);
    assert_eq!(status, 201, "{body}");
}

/// Asks `question`; returns its request id.
fn ask(addr: &str, question: &str) -> String {
    let (status, body) = post(
        addr,
        "/v1/ask",
        &json!({"question": question, "probabilities": false}),
    );
    assert_eq!(status, 200, "{body}");
    body["request_id"]
        .as_str()
        .expect("a request id")
        .to_string()
}

/// The log's entries once it holds `asks` asks and `feedback` feedback lines (the server
/// writes its log on a background thread, after answering).
fn wait_for_log(dir: &Path, asks: usize, feedback: usize) -> Vec<Entry> {
    let started = Instant::now();
    loop {
        let entries = read_log(dir).unwrap_or_default();
        let count = |ask: bool| {
            entries
                .iter()
                .filter(|e| matches!(e, Entry::Ask(_)) == ask)
                .count()
        };
        if count(true) >= asks && count(false) >= feedback {
            return entries;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the log never held {asks} asks and {feedback} feedback lines"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `lector label export --json`: the counts, and the SQuAD file.
fn export(logs: &Path, index: &str, out: &Path) -> (Value, Value) {
    let (logs, out_arg) = (logs.to_string_lossy(), out.to_string_lossy());
    let args = [
        "label", "export", "--log", &logs, "--index", index, "--out", &out_arg, "--json",
    ];
    let counts = serde_json::from_str(&ok(&lector(&args))).unwrap();
    let squad = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    (counts, squad)
}

/// The article of `doc_id` and the question `id` in it.
fn question<'a>(squad: &'a Value, doc_id: &str, id: &str) -> (&'a Value, &'a Value) {
    let article = squad["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"] == doc_id)
        .unwrap_or_else(|| panic!("no article {doc_id}: {squad}"));
    let paragraph = &article["paragraphs"][0];
    let qa = paragraph["qas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["id"] == id)
        .unwrap_or_else(|| panic!("no question {id} under {doc_id}"));
    (paragraph, qa)
}

#[test]
fn labels_over_http_are_checked_kept_through_sigkill_and_exported_with_character_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let logs = dir.path().join("logs");
    let (mut server, addr) = serve(&index, &["--log-queries", logs.to_str().unwrap()]);
    add_grenen(&addr);
    let keeper = ask(&addr, "Who keeps the Grenen lighthouse?");
    let height = ask(&addr, "How tall is the Grenen lighthouse?");
    let broncos = ask(&addr, "Which team won Super Bowl 50?");
    // The same question again, written differently: offered once.
    ask(&addr, "which team won  super bowl 50");
    let (status, body) = post(
        &addr,
        "/v1/feedback",
        &json!({"request_id": broncos, "verdict": "down"}),
    );
    assert_eq!(status, 202, "{body}");
    wait_for_log(&logs, 4, 1);

    let next = get_json(&addr, "/v1/label/next?sample=down-voted");
    assert_eq!(next["request_id"], broncos, "{next}");
    assert_eq!(next["down_voted"], true);
    assert_eq!(next["remaining"], 3, "duplicates count once: {next}");
    // Every passage is shown with the document's current text at its logged offsets.
    assert_eq!(get_json(&addr, "/v1/documents/grenen")["text"], GRENEN);
    let next = get_json(&addr, "/v1/label/next?sample=random&seed=5");
    assert_eq!(next["seed"], 5);
    let passages = next["passages"].as_array().unwrap();
    assert!(!passages.is_empty(), "{next}");
    for p in passages {
        assert!(p["problem"].is_null(), "{p}");
        if p["doc_id"] == "grenen" {
            let (start, end) = (p["start"].as_u64().unwrap(), p["end"].as_u64().unwrap());
            let expected: String = GRENEN
                .chars()
                .skip(start as usize)
                .take((end - start) as usize)
                .collect();
            assert_eq!(p["text"], expected.as_str());
        }
    }
    let (status, body) = http(&addr, "GET", "/v1/label/next?sample=newest", None);
    assert_eq!(status, 400, "{body}");

    // Refused: an id not in the log, offsets one off, a missing field, a span on a skip.
    let start = char_offset(GRENEN, KEEPER);
    let end = start + KEEPER.chars().count();
    let span = |start: usize, end: usize| {
        json!({"request_id": keeper, "verdict": "answer", "doc_id": "grenen",
               "start": start, "end": end, "text": KEEPER})
    };
    let refusals = [
        (
            json!({"request_id": "0123456789abcdef", "verdict": "skip"}),
            "no ask with request_id",
        ),
        (span(start + 1, end + 1), "not the `text`"),
        (
            json!({"request_id": keeper, "verdict": "answer", "doc_id": "grenen", "start": start, "end": end}),
            "needs `text`",
        ),
        (
            json!({"request_id": keeper, "verdict": "skip", "doc_id": "grenen"}),
            "only with verdict `answer`",
        ),
        (json!({"request_id": keeper}), "missing field `verdict`"),
    ];
    for (body, expected) in refusals {
        let (status, answer) = post(&addr, "/v1/labels", &body);
        assert_eq!(status, 400, "{body} -> {answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
    }
    // The UTF-16 offset would be one more (the emoji is two units): refused, as above.
    let utf16 = GRENEN[..GRENEN.find(KEEPER).unwrap()]
        .encode_utf16()
        .count();
    assert_ne!(utf16, start);

    let (status, stored) = post(&addr, "/v1/labels", &span(start, end));
    assert_eq!(status, 201, "{stored}");
    assert_eq!(
        stored["stored"]["question"],
        "Who keeps the Grenen lighthouse?"
    );
    let (status, body) = post(
        &addr,
        "/v1/labels",
        &json!({"request_id": height, "verdict": "unanswerable"}),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = post(
        &addr,
        "/v1/labels",
        &json!({"request_id": broncos, "verdict": "skip"}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["labels"],
        json!({"answers": 1, "unanswerable": 1, "skipped": 1})
    );
    // Only the skipped question is left, offered again.
    let next = get_json(&addr, "/v1/label/next");
    assert_eq!(
        (
            next["remaining"].as_u64(),
            next["remaining_skipped"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(next["skipped"], true, "{next}");
    assert_eq!(next["done"], false);

    // SIGKILL: no shutdown code runs, and every acknowledged label is on disk.
    server.kill_hard();
    assert_eq!(read_labels(&logs).unwrap().len(), 3);

    let out = dir.path().join("labels.squad.json");
    let (counts, squad) = export(&logs, &index, &out);
    assert_eq!(
        (
            &counts["answers"],
            &counts["unanswerable"],
            &counts["skipped"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{counts}"
    );
    let (paragraph, qa) = question(&squad, "grenen", &keeper);
    assert_eq!(paragraph["context"], GRENEN);
    assert_eq!(qa["answers"][0]["answer_start"], start);
    assert_eq!(qa["answers"][0]["text"], KEEPER);
    let entries = read_log(&logs).unwrap();
    let first_doc = entries
        .iter()
        .find_map(|e| match e {
            Entry::Ask(a) if a.request_id == height => Some(a.passages[0].doc_id.clone()),
            _ => None,
        })
        .unwrap();
    let (_, unanswerable) = question(&squad, &first_doc, &height);
    assert_eq!(unanswerable["is_impossible"], true);
    assert_eq!(unanswerable["answers"], json!([]));

    // The project's SQuAD loaders read it: evaluation's, and training's, which checks that
    // every answer is at its `answer_start`.
    let dataset = lector_eval::squad::read_dataset(&out).unwrap();
    assert_eq!(dataset.version, lector_eval::squad::SquadVersion::V2_0);
    assert_eq!(dataset.questions.len(), 2);
    let examples = lector_train::examples::read_examples(&[lector_train::TrainFile {
        path: out.clone(),
        weight: 1.0,
    }])
    .unwrap();
    let answered = examples.iter().find(|e| e.id == keeper).unwrap();
    let bytes = answered.answer.unwrap();
    assert_eq!(&answered.context[bytes.start..bytes.end], KEEPER);

    // The table for people.
    let (logs, out) = (logs.to_string_lossy(), out.to_string_lossy());
    let args = [
        "label", "export", "--log", &logs, "--index", &index, "--out", &out,
    ];
    let text = String::from_utf8(lector(&args).stdout).unwrap();
    assert!(text.contains("2 questions in 1 document\n"), "{text}");
    assert!(text.contains("skipped       1 (not exported)"), "{text}");
}

#[test]
fn without_a_query_log_labelling_is_404_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let (mut server, addr) = serve(&index, &[]);
    for (method, path) in [
        ("GET", "/label"),
        ("GET", "/v1/label/next"),
        ("POST", "/v1/labels"),
    ] {
        let body = json!({"request_id": "0123456789abcdef", "verdict": "skip"}).to_string();
        let body = Some(body.as_str()).filter(|_| method == "POST");
        let (status, text) = http(&addr, method, path, body);
        assert_eq!(status, 404, "{method} {path}: {text}");
        assert!(text.contains("--log-queries"), "{method} {path}: {text}");
    }
    assert!(server.stop().success());

    let missing = dir
        .path()
        .join("no-such-log")
        .to_string_lossy()
        .into_owned();
    let out = dir.path().join("out.json").to_string_lossy().into_owned();
    let run = lector(&[
        "label", "export", "--log", &missing, "--index", &index, "--out", &out,
    ]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("no-such-log") && stderr.contains("--log-queries"),
        "{stderr}"
    );
}

/// A server over the sample and [`GRENEN`] that logged one ask of `question`: (server,
/// address, index, log directory, request id).
fn logged_question(dir: &Path, question: &str) -> (Server, String, String, PathBuf, String) {
    let index = index(dir);
    let logs = dir.join("logs");
    let (server, addr) = serve(&index, &["--log-queries", logs.to_str().unwrap()]);
    add_grenen(&addr);
    let id = ask(&addr, question);
    wait_for_log(&logs, 1, 0);
    (server, addr, index, logs, id)
}

#[test]
fn the_labelling_page_saves_a_selected_span_with_character_offsets_in_headless_chromium() {
    let Some(browser) = browser_or_skip("the labelling page span test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr, index, logs, id) =
        logged_question(dir.path(), "Who keeps the Grenen lighthouse?");
    // The answer lies in the document's second passage, after an emoji in that passage: the
    // page must add the passage's start and count characters, not UTF-16 units.
    let document = get_json(&addr, "/v1/documents/grenen");
    let expected = char_offset(GRENEN, KEEPER);
    let second = document["passages"][1]["char_start"].as_u64().unwrap() as usize;
    assert!(second > 0 && expected > second, "{document}");

    // The page's test entry selects the text with a real DOM Range, then saves it with the
    // handlers the mouse and the button use (see `runTestEntry` in label.html).
    let fragment = format!("test-select={}", KEEPER.replace(' ', "%20"));
    let url = format!("http://{addr}/label#{fragment}");
    let dom = dump_dom(
        &browser,
        &dir.path().join("profile"),
        &url,
        "data-saved=\"1\"",
    );
    assert!(dom.contains("data-verdict=\"answer\""), "{dom}");
    assert!(server.stop().success());

    let (counts, squad) = export(&logs, &index, &dir.path().join("page.squad.json"));
    assert_eq!(counts["answers"], 1, "{counts}");
    let (paragraph, qa) = question(&squad, "grenen", &id);
    assert_eq!(paragraph["context"], GRENEN);
    assert_eq!(qa["answers"][0]["text"], KEEPER);
    assert_eq!(qa["answers"][0]["answer_start"], expected, "{qa}");
}

#[test]
fn the_labelling_page_marks_a_question_unanswerable_in_headless_chromium() {
    let Some(browser) = browser_or_skip("the labelling page unanswerable test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr, index, logs, id) =
        logged_question(dir.path(), "How tall is the Grenen lighthouse?");
    let url = format!("http://{addr}/label?sample=random&seed=9#test-unanswerable");
    let dom = dump_dom(
        &browser,
        &dir.path().join("profile"),
        &url,
        "data-saved=\"1\"",
    );
    assert!(dom.contains("data-verdict=\"unanswerable\""), "{dom}");
    assert!(dom.contains("data-state=\"done\""), "nothing left: {dom}");
    assert!(server.stop().success());

    let (counts, squad) = export(&logs, &index, &dir.path().join("page.squad.json"));
    assert_eq!(
        (&counts["answers"], &counts["unanswerable"]),
        (&json!(0), &json!(1))
    );
    let first_doc = match &read_log(&logs).unwrap()[0] {
        Entry::Ask(ask) => ask.passages[0].doc_id.clone(),
        other => panic!("{other:?}"),
    };
    let (_, qa) = question(&squad, &first_doc, &id);
    assert_eq!(qa["is_impossible"], true);
    assert_eq!(qa["question"], "How tall is the Grenen lighthouse?");
}

//! `POST /v1/ask` says when the documents disagree: `ambiguous` and the `readings` (indices into
//! `candidates`, each with its evidence), over real HTTP with the shipped reader and a real index
//! on disk of the bundled sample plus two documents that give different years.

mod common;

use common::workspace;
use lector_index::{Document, Mode, SearchOptions};
use lector_pipeline::Pipeline;
use lector_reader::Reader;
use lector_server::{AppState, Config, Limits};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

/// Two documents that disagree on the year the lighthouse was completed.
const DISAGREEING: [(&str, &str, &str); 2] = [
    (
        "almanac-1998",
        "Harbour Almanac",
        "The Kestrel Lighthouse stands on the northern cape of Varnholm island. The lighthouse was \
         completed in 1887 by the harbour board, and its lamp was first lit that winter.",
    ),
    (
        "guide-2021",
        "Varnholm Travel Guide",
        "Visitors to Varnholm often climb the Kestrel Lighthouse. According to the island museum, \
         the Kestrel Lighthouse was completed in 1893, after years of delays caused by storms.",
    ),
];

/// A server over the sample and the disagreeing documents; stopped when dropped.
struct Server {
    addr: String,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// The server; with `calibrated`, the pipeline has a confidence map (the flag needs one).
    fn start(calibrated: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = common::sample_writer(dir.path());
        for (id, title, text) in DISAGREEING {
            writer.add(Document {
                id: id.into(),
                title: Some(title.into()),
                text: text.into(),
                date: None,
                metadata: None,
                embedding: None,
            });
        }
        writer.commit().unwrap();
        let index = writer.committed().clone();
        let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
        let config = Config::new(
            SearchOptions::for_index(&index, Mode::Bm25),
            Limits::default(),
        );
        let pipeline = Pipeline::new(index, reader)
            .with_calibration(calibrated.then(common::platt_calibration));
        let state = AppState::new(pipeline, Some(writer), None, config)
            .unwrap()
            .with_generator(common::smollm2());
        let state = Arc::new(state);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let shutdown = async {
                let _ = stopped.await;
            };
            runtime
                .block_on(lector_server::serve(listener, state, shutdown))
                .unwrap();
        });
        Server {
            addr,
            _dir: dir,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// (status, body) of `POST /v1/ask` with `body`.
    fn ask(&self, body: &Value) -> (u16, Value) {
        let body = body.to_string();
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let head = format!(
            "POST /v1/ask HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response[9..12].parse().unwrap();
        let (_, body) = response.split_once("\r\n\r\n").unwrap();
        (status, serde_json::from_str(body).expect("a JSON body"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn chars(text: &str, start: &Value, end: &Value) -> String {
    let (start, end) = (start.as_u64().unwrap(), end.as_u64().unwrap());
    text.chars()
        .skip(start as usize)
        .take((end - start) as usize)
        .collect()
}

#[test]
fn the_answer_json_carries_ambiguous_and_the_readings_with_their_evidence() {
    let server = Server::start(true);
    let question = "When was the Kestrel Lighthouse completed?";
    let (status, out) = server.ask(&json!({"question": question, "probabilities": false}));
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["ambiguous"], true, "{out}");
    let candidates = out["candidates"].as_array().unwrap();
    let readings: Vec<&Value> = out["readings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &candidates[i.as_u64().unwrap() as usize])
        .collect();
    assert_eq!(out["readings"][0], 0, "the answer is the first reading");
    assert_eq!(readings[0], &out["answer"]);
    let mut found: Vec<(String, String)> = readings
        .iter()
        .map(|c| {
            let e = &c["evidence"];
            // The evidence's offsets index the passage text and the document's.
            let text = c["text"].as_str().unwrap();
            assert_eq!(
                chars(
                    e["passage_text"].as_str().unwrap(),
                    &e["passage_start"],
                    &e["passage_end"]
                ),
                text
            );
            let doc = DISAGREEING
                .iter()
                .find(|(id, _, _)| e["doc_id"] == *id)
                .expect("a reading from a disagreeing document");
            assert_eq!(chars(doc.2, &e["start"], &e["end"]), text);
            assert_eq!(e["title"], doc.1);
            (text.to_string(), doc.0.to_string())
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("1887".to_string(), "almanac-1998".to_string()),
            ("1893".to_string(), "guide-2021".to_string())
        ]
    );

    // Any answer carries both fields, consistent: readings exactly when ambiguous, each from
    // its own document, the answer first.
    let (_, other) = server.ask(&json!({"question": "Which NFL team represented the AFC at Super Bowl 50?", "probabilities": false}));
    let indices = other["readings"].as_array().expect("readings");
    assert_eq!(
        other["ambiguous"].as_bool(),
        Some(!indices.is_empty()),
        "{other}"
    );
    let documents: std::collections::HashSet<String> = indices
        .iter()
        .map(|i| {
            other["candidates"][i.as_u64().unwrap() as usize]["evidence"]["doc_id"].to_string()
        })
        .collect();
    assert!(indices.is_empty() || indices[0] == 0, "{other}");
    assert_eq!(documents.len(), indices.len(), "one reading per document");

    // `ambiguity_odds` is the request's: at 1 the answer must be no likelier than the runner-up.
    let (_, strict) =
        server.ask(&json!({"question": question, "probabilities": false, "ambiguity_odds": 1}));
    assert_eq!(strict["ambiguous"], false, "{strict}");
    let (status, refused) = server.ask(&json!({"question": question, "ambiguity_odds": 0.5}));
    assert_eq!(status, 400);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("ambiguity_odds"),
        "{refused}"
    );
}

#[test]
fn without_a_confidence_map_the_answer_is_not_flagged() {
    let server = Server::start(false);
    let question = "When was the Kestrel Lighthouse completed?";
    let (status, out) = server.ask(&json!({"question": question, "probabilities": false}));
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        (&out["calibrated"], &out["ambiguous"]),
        (&json!(false), &json!(false)),
        "{out}"
    );
    assert_eq!(out["readings"], json!([]));
    // A generative ask retrieves only: no readings to name.
    let (status, generated) =
        server.ask(&json!({"question": question, "mode": "generative", "k": 3, "max_tokens": 8}));
    assert_eq!(status, 200, "{generated}");
    assert!(generated["disagreement"].is_null(), "{generated}");
}

#[test]
fn a_generated_answer_names_both_readings() {
    // SmolLM2 writes what it writes: whichever years it leaves out, the answer the user gets
    // names both, each with its passage number.
    let server = Server::start(true);
    let question = "When was the Kestrel Lighthouse completed?";
    let (status, out) =
        server.ask(&json!({"question": question, "mode": "generative", "k": 3, "max_tokens": 24}));
    assert_eq!(status, 200, "{out}");
    let readings = out["disagreement"]["readings"]
        .as_array()
        .unwrap_or_else(|| panic!("{out}"));
    let mut years: Vec<&str> = readings
        .iter()
        .map(|r| r["text"].as_str().unwrap())
        .collect();
    years.sort();
    assert_eq!(years, ["1887", "1893"], "{out}");
    let text = out["text"].as_str().unwrap();
    assert!(out["answer"]["refused"] == false, "{out}");
    for r in readings {
        let year = r["text"].as_str().unwrap();
        assert!(text.contains(year), "`{year}` missing from {text}");
        let passage = &out["passages"][r["number"].as_u64().unwrap() as usize - 1];
        assert_eq!(passage["doc_id"], r["doc_id"]);
        assert!(
            passage["text"].as_str().unwrap().contains(year),
            "{passage}"
        );
    }
}

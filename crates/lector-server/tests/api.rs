//! The server over real HTTP on a loopback port: the shipped reader, a real index on disk of the
//! bundled sample (the first ten paragraphs of SQuAD v1.1 dev "Super Bowl 50").

mod common;

use common::workspace;
use lector_index::{Mode, SearchOptions};
use lector_pipeline::{Calibration, Pipeline};
use lector_querylog::{Entry, LogConfig, Verdict};
use lector_reader::Reader;
use lector_server::{AppState, Config, Limits};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server on a free loopback port; shut down (gracefully) when dropped.
struct Server {
    base: String,
    dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(limits: Limits, api_key: Option<&str>) -> Server {
        Server::start_with(limits, api_key, None)
    }

    /// A server that logs queries into `log` (see [`lector_querylog`]).
    fn start_with(limits: Limits, api_key: Option<&str>, log: Option<LogConfig>) -> Server {
        Server::start_calibrated(limits, api_key, log, None)
    }

    /// A server whose pipeline uses `calibration` (as if the index directory held it).
    fn start_calibrated(
        limits: Limits,
        api_key: Option<&str>,
        log: Option<LogConfig>,
        calibration: Option<Calibration>,
    ) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let writer = common::sample_writer(dir.path());
        let index = writer.committed().clone();
        let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
        let mut config = Config::new(SearchOptions::for_index(&index, Mode::Bm25), limits);
        config.api_key = api_key.map(|k| lector_server::ApiKey::new(k).unwrap());
        config.query_log = log;
        let pipeline = Pipeline::new(index, reader).with_calibration(calibration);
        let state = AppState::new(pipeline, Some(writer), None, config).unwrap();
        Server::launch(state, dir)
    }

    /// A read-only server over the index another server writes in `dir`.
    fn replica_of(dir: &std::path::Path) -> Server {
        let index = lector_index::Index::open(dir).unwrap();
        let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
        let config = Config::new(
            SearchOptions::for_index(&index, Mode::Bm25),
            Limits::default(),
        );
        let state = AppState::new(Pipeline::new(index, reader), None, None, config).unwrap();
        // The replica's own directory goes unused: it serves `dir`.
        Server::launch(state, tempfile::tempdir().unwrap())
    }

    fn launch(state: AppState, dir: tempfile::TempDir) -> Server {
        let state = Arc::new(state);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
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
            base,
            dir,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// (generation, documents) of the commit served, from `/healthz`.
    fn served(&self) -> (u64, u64) {
        let (status, body) = self.get("/healthz");
        assert_eq!(status, 200, "{body}");
        let health: Value = serde_json::from_str(&body).unwrap();
        (
            health["generation"].as_u64().unwrap(),
            health["documents"].as_u64().unwrap(),
        )
    }

    fn default() -> Server {
        Server::start(Limits::default(), None)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn get(&self, path: &str) -> (u16, String) {
        call("GET", &self.url(path), None, None)
    }

    fn post(&self, path: &str, body: &str) -> (u16, String) {
        call("POST", &self.url(path), Some(body), None)
    }

    fn delete(&self, path: &str) -> (u16, String) {
        call("DELETE", &self.url(path), None, None)
    }

    fn ask(&self, body: Value) -> Value {
        let (status, text) = self.post("/v1/ask", &body.to_string());
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    fn metric(&self, line_start: &str) -> Option<f64> {
        let (_, text) = self.get("/metrics");
        text.lines()
            .find_map(|l| l.strip_prefix(line_start))
            .map(|v| v.trim().parse().unwrap())
    }
}

impl Server {
    /// Shuts the server down and waits until `serve` has returned.
    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// (status, body) of one HTTP/1.1 request over a raw socket.
fn call(method: &str, url: &str, body: Option<&str>, key: Option<&str>) -> (u16, String) {
    let (status, _, body) = call_with_head(method, url, body, key);
    (status, body)
}

/// (status, head, body) of one HTTP/1.1 request over a raw socket.
fn call_with_head(
    method: &str,
    url: &str,
    body: Option<&str>,
    key: Option<&str>,
) -> (u16, String, String) {
    let (addr, path) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
        .expect("an http URL");
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(600)))
        .unwrap();
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let body = body.unwrap_or("");
    let head = format!(
        "{method} /{path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) and close before reading a large body: that is fine.
    let _ = stream.write_all(body.as_bytes());
    let mut response = Vec::new();
    if let Err(err) = stream.read_to_end(&mut response) {
        assert!(!response.is_empty(), "{method} {url}: {err}");
    }
    let response = String::from_utf8(response).unwrap();
    let status = response[9..12].parse().unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (status, head.to_string(), body.to_string())
}

/// The `error` of a JSON error body.
fn error(body: &str) -> String {
    let value: Value = serde_json::from_str(body).expect("a JSON error body");
    value["error"]
        .as_str()
        .expect("an error message")
        .to_string()
}

fn chars(text: &str, start: u64, end: u64) -> String {
    text.chars()
        .skip(start as usize)
        .take((end - start) as usize)
        .collect()
}

#[test]
fn ask_answers_with_evidence_offsets_and_token_probabilities() {
    let server = Server::default();
    let out = server.ask(json!({"question": "Which team won Super Bowl 50?", "k": 5}));
    let answer = &out["answer"];
    assert!(
        answer["text"].as_str().unwrap().contains("Broncos"),
        "{answer}"
    );
    assert!(out["abstention"].is_null());
    let e = &answer["evidence"];
    // The offsets index the stored document and the passage.
    let doc_id = e["doc_id"].as_str().unwrap();
    // Ids are percent-encoded in the path (SQuAD paragraph ids hold a `#`).
    let (status, doc) = server.get(&format!("/v1/documents/{}", doc_id.replace('#', "%23")));
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    let text = doc["text"].as_str().unwrap();
    let (start, end) = (e["start"].as_u64().unwrap(), e["end"].as_u64().unwrap());
    assert_eq!(chars(text, start, end), answer["text"].as_str().unwrap());
    let passage = e["passage_text"].as_str().unwrap();
    let (ps, pe) = (
        e["passage_start"].as_u64().unwrap(),
        e["passage_end"].as_u64().unwrap(),
    );
    assert_eq!(chars(passage, ps, pe), answer["text"].as_str().unwrap());
    assert_eq!(out["passages"].as_array().unwrap().len(), 5);
    assert!(
        out["candidates"].as_array().unwrap().len() > 1,
        "runner-ups"
    );
    for stage in ["retrieve_ms", "read_ms", "aggregate_ms"] {
        assert!(out["timings"][stage].as_f64().unwrap() >= 0.0);
    }
    // Start/end probabilities over the answer's passage: distributions peaking on the answer.
    let windows = out["token_probabilities"].as_array().unwrap();
    let tokens = windows[0]["tokens"].as_array().unwrap();
    let sum: f64 = tokens.iter().map(|t| t["p_start"].as_f64().unwrap()).sum();
    // A distribution over the tokens, shared with the no-answer position.
    assert!(
        sum > 0.5 && sum < 1.0 + 1e-3,
        "start probabilities sum to {sum}"
    );
    let best = tokens
        .iter()
        .max_by(|a, b| {
            a["p_start"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["p_start"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(best["start"].as_u64().unwrap(), ps);

    // Without probabilities, no extra field.
    let out =
        server.ask(json!({"question": "Which team won Super Bowl 50?", "probabilities": false}));
    assert!(out.get("token_probabilities").is_none());

    // The rank prior discounts answers from passages below the first; 0 weighs every passage
    // alike, so such an answer scores higher.
    let flat = server.ask(json!({"question": "Which team won Super Bowl 50?", "rank_prior": 0}));
    let score = |out: &Value, text: &str| {
        let candidates = out["candidates"].as_array().unwrap();
        let c = candidates.iter().find(|c| c["text"] == text).unwrap();
        c["score"].as_f64().unwrap()
    };
    let lower = out["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["evidence"]["rank"].as_u64().unwrap() > 1 && c["score"].as_f64().unwrap() < 1.0)
        .expect("an answer from a passage below the first");
    let text = lower["text"].as_str().unwrap();
    assert!(score(&flat, text) > score(&out, text), "{text}");
}

#[test]
fn abstains_when_no_passage_matches() {
    let server = Server::default();
    let out = server.ask(json!({"question": "xylophone quokka zeppelin?"}));
    assert!(out["answer"].is_null());
    assert_eq!(out["abstention"], "no_passages");
    assert!(out["passages"].as_array().unwrap().is_empty());
}

#[test]
fn answers_carry_the_calibrated_confidence() {
    // Without a confidence map, every candidate's confidence is null.
    let plain = Server::default();
    let question = json!({"question": "Which team won Super Bowl 50?", "probabilities": false});
    let out = plain.ask(question.clone());
    assert!(out["answer"]["confidence"].is_null(), "{}", out["answer"]);
    assert!(out["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["confidence"].is_null()));
    drop(plain);

    // With one (a Platt map of the log-odds: right half the time at log-odds 0, mostly above).
    let calibration = common::platt_calibration();
    let server = Server::start_calibrated(Limits::default(), None, None, Some(calibration.clone()));
    let out = server.ask(question);
    let answer = &out["answer"];
    let confidence = answer["confidence"].as_f64().expect("a confidence");
    assert!((0.0..=1.0).contains(&confidence), "{confidence}");
    // It is the map applied to the answer's own log-odds, and so on for every candidate.
    let expected = |c: &Value| {
        calibration
            .confidence_for(c["log_odds"].as_f64().unwrap())
            .unwrap()
    };
    assert!((confidence - expected(answer)).abs() < 1e-12);
    for c in out["candidates"].as_array().unwrap() {
        assert!(
            (c["confidence"].as_f64().unwrap() - expected(c)).abs() < 1e-12,
            "{c}"
        );
    }
}

#[test]
fn search_ranks_passages() {
    let server = Server::default();
    let (status, body) = server.get("/v1/search?q=Levi%27s%20Stadium&k=3&mode=bm25");
    assert_eq!(status, 200, "{body}");
    let out: Value = serde_json::from_str(&body).unwrap();
    let hits = out["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 3);
    assert!(hits[0]["text"].as_str().unwrap().contains("Levi's Stadium"));
    assert!(hits[0]["score"].as_f64().unwrap() >= hits[1]["score"].as_f64().unwrap());
    assert_eq!(out["mode"], "bm25");
}

#[test]
fn written_documents_are_durable_and_visible_at_once() {
    let server = Server::default();
    let doc = json!({"id": "zebra", "title": "Quagga", "text": "The zebra named Quagga lives in Lisbon since 2019.", "date": "2024-05-01", "metadata": {"source": "test"}});
    let (status, body) = server.post("/v1/documents", &doc.to_string());
    assert_eq!(status, 201, "{body}");
    let out: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(out["added"], 1);
    assert_eq!(out["documents"], 11);
    // On disk before the answer: a fresh reader of the directory sees it.
    let index = lector_index::Index::open(server.dir.path()).unwrap();
    assert_eq!(index.document("zebra").unwrap().text, doc["text"]);
    // Visible to the next requests.
    let answer = server.ask(json!({"question": "Where does the zebra named Quagga live?"}));
    assert_eq!(answer["answer"]["text"], "Lisbon");
    assert_eq!(answer["answer"]["evidence"]["doc_id"], "zebra");
    let (status, body) = server.get("/v1/documents/zebra");
    assert_eq!(status, 200);
    let stored: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stored["title"], "Quagga");
    assert_eq!(stored["metadata"], json!({"source": "test"}));
    assert_eq!(stored["passages"][0]["char_start"], 0);

    // Same content: unchanged (200); new content: replaced; a batch as an array.
    let (status, body) = server.post("/v1/documents", &doc.to_string());
    assert_eq!(
        (status, error_free(&body)["unchanged"].clone()),
        (200, json!(1))
    );
    let batch = json!([
        {"id": "zebra", "text": "The zebra named Quagga moved to Porto in 2024."},
        {"id": "okapi", "text": "The okapi Ruth lives in Antwerp."}
    ]);
    let (status, body) = server.post("/v1/documents", &batch.to_string());
    assert_eq!(status, 201, "{body}");
    let out = error_free(&body);
    assert_eq!(
        (out["replaced"].clone(), out["added"].clone()),
        (json!(1), json!(1))
    );
    let answer = server.ask(json!({"question": "Where does the zebra named Quagga live now?"}));
    assert_eq!(answer["answer"]["text"], "Porto");

    // Delete: gone from searches, 404 afterwards.
    let (status, body) = server.delete("/v1/documents/zebra");
    assert_eq!(status, 200, "{body}");
    assert_eq!(error_free(&body)["documents"], 11);
    assert_eq!(server.get("/v1/documents/zebra").0, 404);
    assert_eq!(server.delete("/v1/documents/zebra").0, 404);
    let (_, body) = server.get("/v1/search?q=zebra%20Quagga");
    assert!(error_free(&body)["hits"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["doc_id"] != "zebra"));
    assert_eq!(server.metric("lector_index_documents "), Some(11.0));
}

#[test]
fn writes_merge_segments_in_the_background() {
    let server = Server::default();
    let generation = |server: &Server| server.metric("lector_index_generation ").unwrap();
    let start = generation(&server);
    // The sample's segment and seven one-document commits fill the lowest tier (8 segments).
    for n in 0..7 {
        let doc = json!({"id": format!("crane-{n}"), "text": format!("Harbour crane {n} was painted blue in 19{n}5.")});
        let (status, body) = server.post("/v1/documents", &doc.to_string());
        assert_eq!(status, 201, "{body}");
        assert_eq!(error_free(&body)["generation"], start + n as f64 + 1.0);
    }
    // The merge is served like a commit of its own once it is done.
    let deadline = Instant::now() + Duration::from_secs(60);
    while generation(&server) < start + 8.0 {
        assert!(Instant::now() < deadline, "no merge within a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    let index = lector_index::Index::open(server.dir.path()).unwrap();
    assert_eq!((index.len(), index.stats().segments), (17, 1));
    let segment_files = std::fs::read_dir(server.dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("seg-")
        })
        .count();
    assert_eq!(segment_files, 1, "the merged inputs' files are removed");
    let answer = server.ask(json!({"question": "When was harbour crane 4 painted blue?"}));
    assert_eq!(answer["answer"]["text"], "1945");
    assert_eq!(server.get("/v1/documents/crane-0").0, 200);
    let merges = |outcome| {
        server.metric(&format!(
            "lector_segment_merges_total{{outcome=\"{outcome}\"}} "
        ))
    };
    assert_eq!((merges("done"), merges("failed")), (Some(1.0), Some(0.0)));
}

#[test]
fn shutdown_waits_for_a_running_merge() {
    let mut server = Server::default();
    for n in 0..7 {
        let doc = json!({"id": format!("crane-{n}"), "text": format!("Harbour crane {n} was painted blue in 19{n}5.")});
        assert_eq!(server.post("/v1/documents", &doc.to_string()).0, 201);
    }
    // The seventh write made a merge due; shutting down now must let it finish (and list it)
    // rather than return while it still writes into the directory.
    server.stop();
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(server.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("seg-"))
            .collect();
        names.sort();
        names
    };
    let at_shutdown = listing();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(listing(), at_shutdown, "nothing writes after shutdown");
    assert_eq!(
        at_shutdown.len(),
        1,
        "the merge was waited for and listed: {at_shutdown:?}"
    );
    let index = lector_index::Index::open(server.dir.path()).unwrap();
    assert_eq!((index.len(), index.stats().segments), (17, 1));
}

fn error_free(body: &str) -> Value {
    let value: Value = serde_json::from_str(body).unwrap();
    assert!(value.get("error").is_none(), "{body}");
    value
}

#[test]
fn bad_input_is_400_with_the_reason() {
    let server = Server::default();
    let cases: [(&str, &str, &str); 12] = [
        ("/v1/ask", r#"{"question": "Who won?""#, "EOF while parsing"),
        ("/v1/ask", "not json", "expected"),
        (
            "/v1/ask",
            r#"{"questio": "Who won?"}"#,
            "unknown field `questio`",
        ),
        ("/v1/ask", r#"{"k": 3}"#, "missing field `question`"),
        ("/v1/ask", r#"{"question": "   "}"#, "the question is empty"),
        (
            "/v1/ask",
            r#"{"question": "Who won?", "k": 0}"#,
            "k must be between 1",
        ),
        (
            "/v1/ask",
            r#"{"question": "Who won?", "k": "five"}"#,
            "invalid type",
        ),
        (
            "/v1/ask",
            r#"{"question": "Who won?", "rank_prior": -1}"#,
            "rank_prior must be between 0 and 8",
        ),
        (
            "/v1/ask",
            r#"{"question": "Who won?", "mode": "magic"}"#,
            "unknown mode `magic`",
        ),
        (
            "/v1/ask",
            r#"{"question": "Who won?", "mode": "dense"}"#,
            "no passage vectors",
        ),
        (
            "/v1/documents",
            r#"{"id": "a", "text": "x", "author": "me"}"#,
            "unknown field `author`",
        ),
        (
            "/v1/documents",
            r#"[{"id": "a", "text": "ok"}, {"id": "b", "text": " "}]"#,
            "document 1 (`b`): the text is empty",
        ),
    ];
    for (path, body, expected) in cases {
        let (status, text) = server.post(path, body);
        assert_eq!(status, 400, "{path} {body}: {text}");
        let message = error(&text);
        assert!(
            message.contains(expected),
            "{body}: `{message}` lacks `{expected}`"
        );
    }
    // The rejected batch wrote nothing.
    assert_eq!(server.get("/v1/documents/a").0, 404);
    for query in [
        "/v1/search",
        "/v1/search?q=",
        "/v1/search?q=bowl&size=3",
        "/v1/search?q=bowl&k=1000",
    ] {
        let (status, text) = server.get(query);
        assert_eq!(status, 400, "{query}: {text}");
        error(&text);
    }
    let (status, text) = server.get("/v1/nothing");
    assert_eq!(
        (status, error(&text)),
        (404, "no route /v1/nothing".to_string())
    );
    let (status, text) = server.get("/v1/ask");
    assert_eq!(status, 405);
    error(&text);
}

#[test]
fn bodies_over_the_limit_are_413() {
    let limits = Limits {
        max_ask_bytes: 1024,
        max_documents_bytes: 4096,
        ..Limits::default()
    };
    let server = Server::start(limits, None);
    let long = "a".repeat(2000);
    let (status, text) = server.post("/v1/ask", &json!({"question": long}).to_string());
    assert_eq!(status, 413, "{text}");
    assert!(error(&text).contains("length limit"), "{text}");
    // The same body is fine for documents, a larger one is not.
    let doc = json!({"id": "long", "text": long}).to_string();
    assert_eq!(server.post("/v1/documents", &doc).0, 201);
    let doc = json!({"id": "longer", "text": "b ".repeat(3000)}).to_string();
    assert_eq!(server.post("/v1/documents", &doc).0, 413);
}

#[test]
fn an_api_key_guards_every_route_but_healthz_and_the_page() {
    let server = Server::start(Limits::default(), Some("s3cret"));
    let ask = json!({"question": "Who won Super Bowl 50?", "k": 1}).to_string();
    for key in [None, Some("wrong"), Some("s3cre")] {
        let (status, text) = call("POST", &server.url("/v1/ask"), Some(&ask), key);
        assert_eq!(status, 401, "{key:?}");
        assert!(error(&text).contains("Bearer"));
        for path in [
            "/metrics",
            "/openapi.json",
            "/v1/documents/x",
            "/v1/search?q=bowl",
        ] {
            assert_eq!(call("GET", &server.url(path), None, key).0, 401, "{path}");
        }
    }
    assert_eq!(
        call("POST", &server.url("/v1/ask"), Some(&ask), Some("s3cret")).0,
        200
    );
    assert_eq!(
        call("GET", &server.url("/metrics"), None, Some("s3cret")).0,
        200
    );
    assert_eq!(server.get("/healthz").0, 200);
    assert_eq!(server.get("/").0, 200);
}

#[test]
fn a_full_queue_is_503_and_a_slow_request_504() {
    let limits = Limits {
        max_running: 1,
        max_queued: 0,
        ..Limits::default()
    };
    let server = Server::start(limits, None);
    let slow = json!({"question": "Who won Super Bowl 50?", "k": 100}).to_string();
    let url = server.url("/v1/ask");
    let busy = std::thread::spawn(move || call("POST", &url, Some(&slow), None));
    let start = Instant::now();
    while server.metric("lector_requests_running ") != Some(1.0) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the slow ask never ran"
        );
        assert!(
            !busy.is_finished(),
            "the slow ask finished before the check"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let (status, text) = server.post("/v1/ask", r#"{"question": "Who won?"}"#);
    assert_eq!(status, 503, "{text}");
    assert!(error(&text).contains("saturated"));
    assert_eq!(busy.join().unwrap().0, 200);
    assert!(server.metric("lector_http_errors_total{route=\"/v1/ask\"} ") >= Some(1.0));

    let limits = Limits {
        timeout: Duration::from_millis(1),
        ..Limits::default()
    };
    let server = Server::start(limits, None);
    let (status, text) = server.post(
        "/v1/ask",
        r#"{"question": "Who won Super Bowl 50?", "k": 20}"#,
    );
    assert_eq!(status, 504, "{text}");
    assert!(error(&text).contains("longer than the limit"));
}

#[test]
fn metrics_healthz_openapi_and_the_page() {
    let server = Server::default();
    server.ask(
        json!({"question": "Where was Super Bowl 50 played?", "k": 2, "probabilities": false}),
    );
    server.post("/v1/ask", "{");
    let (status, text) = server.get("/metrics");
    assert_eq!(status, 200);
    for expected in [
        "lector_http_requests_total{route=\"/v1/ask\",method=\"POST\",status=\"200\"} 1",
        "lector_http_requests_total{route=\"/v1/ask\",method=\"POST\",status=\"400\"} 1",
        "lector_http_request_duration_seconds_count{route=\"/v1/ask\"} 2",
        "lector_index_documents 10",
        "lector_index_passages 16",
        "lector_requests_queued 0",
    ] {
        assert!(
            text.lines().any(|l| l == expected),
            "missing `{expected}`:\n{text}"
        );
    }
    assert_eq!(
        server.get("/healthz"),
        (
            200,
            r#"{"status":"ok","generation":1,"documents":10}"#.to_string()
        )
    );
    let (status, text) = server.get("/openapi.json");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert!(doc["paths"]["/v1/ask"]["post"].is_object());
    // Every route answers 403 to a foreign Host or Origin, and every POST 415 to a non-JSON body.
    for (path, ops) in doc["paths"].as_object().unwrap() {
        let methods = ["get", "post", "put", "patch", "delete"];
        for (method, op) in ops.as_object().unwrap() {
            if !methods.contains(&method.as_str()) {
                continue;
            }
            let responses = &op["responses"];
            assert!(
                responses["403"].is_object(),
                "{method} {path} documents 403"
            );
            if method == "post" {
                assert!(
                    responses["415"].is_object(),
                    "{method} {path} documents 415"
                );
            }
        }
    }
    let (status, page) = server.get("/");
    assert_eq!(status, 200);
    assert!(page.contains("<mark") || page.contains("\"mark\""));
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "no external resources"
    );
}

#[test]
fn asks_and_feedback_are_logged_with_request_ids_and_redacted() {
    let logs = tempfile::tempdir().unwrap();
    let log = LogConfig {
        redact: true,
        ..LogConfig::new(logs.path())
    };
    let server = Server::start_with(Limits::default(), None, Some(log));
    let question = "Which team won Super Bowl 50? reply to fan@example.com";
    let body = json!({"question": question, "k": 3}).to_string();
    let (status, head, text) = call_with_head("POST", &server.url("/v1/ask"), Some(&body), None);
    assert_eq!(status, 200, "{text}");
    let out: Value = serde_json::from_str(&text).unwrap();
    let id = out["request_id"].as_str().unwrap().to_string();
    assert!(lector_querylog::is_request_id(&id), "{id}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("x-request-id: {id}")),
        "{head}"
    );
    let abstained = server.ask(json!({"question": "xylophone quokka zeppelin?"}));
    assert_ne!(abstained["request_id"], out["request_id"]);

    let feedback = json!({"request_id": id, "verdict": "down", "correct_answer": "Denver Broncos",
        "note": "call me on +1 (555) 010-9999"});
    let (status, text) = server.post("/v1/feedback", &feedback.to_string());
    assert_eq!(status, 202, "{text}");
    for (bad, why) in [
        (json!({"request_id": "nope", "verdict": "up"}), "not an id"),
        (
            json!({"request_id": id, "verdict": "meh"}),
            "unknown variant",
        ),
        (
            json!({"request_id": id, "verdict": "up", "note": "x".repeat(2001)}),
            "longer than",
        ),
    ] {
        let (status, text) = server.post("/v1/feedback", &bad.to_string());
        assert_eq!(status, 400, "{text}");
        assert!(error(&text).contains(why), "{text}");
    }
    assert_eq!(
        server.metric("lector_feedback_total{verdict=\"down\"}"),
        Some(1.0)
    );
    assert_eq!(
        server.metric("lector_answers_total{mode=\"extractive\",outcome=\"answered\"}"),
        Some(1.0)
    );
    assert_eq!(
        server.metric("lector_answers_total{mode=\"extractive\",outcome=\"abstained\"}"),
        Some(1.0)
    );
    assert_eq!(server.metric("lector_answer_confidence_count "), Some(2.0));
    assert_eq!(
        server.metric("lector_top_retrieval_score_count{retrieval=\"bm25\"} "),
        Some(1.0),
        "the abstained question retrieved nothing"
    );
    assert!(server.metric("lector_ask_stage_seconds_count{stage=\"read\"} ") >= Some(1.0));
    drop(server); // shutting down writes the log out

    let entries = lector_querylog::read_log(logs.path()).unwrap();
    assert_eq!(entries.len(), 3, "{entries:?}");
    let Entry::Ask(ask) = &entries[0] else {
        panic!("{:?}", entries[0])
    };
    assert_eq!(ask.request_id, id);
    assert_eq!(
        ask.question,
        "Which team won Super Bowl 50? reply to [email]"
    );
    assert!(ask.redacted);
    assert_eq!(ask.settings.k, 3);
    let answer = ask.answer.as_ref().unwrap();
    assert_eq!(answer.text, out["answer"]["text"].as_str().unwrap());
    assert_eq!(
        answer.start,
        out["answer"]["evidence"]["start"]
            .as_u64()
            .map(|v| v as usize)
    );
    assert_eq!(ask.passages.len(), 3);
    assert!(ask
        .passages
        .iter()
        .any(|p| Some(&p.doc_id) == answer.doc_id.as_ref()));
    assert!(ask.confidence.unwrap() > 0.5 && ask.timings.total_ms >= ask.timings.read_ms);
    let Entry::Ask(none) = &entries[1] else {
        panic!("{:?}", entries[1])
    };
    assert!(none.answer.is_none() && none.abstention.is_some() && !none.redacted);
    let Entry::Feedback(fb) = &entries[2] else {
        panic!("{:?}", entries[2])
    };
    assert_eq!(
        (fb.request_id.as_str(), fb.verdict),
        (id.as_str(), Verdict::Down)
    );
    assert_eq!(fb.note.as_deref(), Some("call me on [phone]"));
}

#[test]
fn without_a_query_log_feedback_is_404() {
    let server = Server::default();
    let out = server.ask(json!({"question": "Which team won Super Bowl 50?"}));
    let body = json!({"request_id": out["request_id"], "verdict": "up"});
    let (status, text) = server.post("/v1/feedback", &body.to_string());
    assert_eq!(status, 404, "{text}");
    assert!(error(&text).contains("--log-queries"), "{text}");
}

#[test]
fn read_only_servers_follow_the_writers_commits_whole() {
    let writer = Server::default();
    let replicas = [
        Server::replica_of(writer.dir.path()),
        Server::replica_of(writer.dir.path()),
    ];
    assert_eq!(replicas[0].served(), writer.served());
    // Each replica's /healthz, sampled while the writer commits (and merges).
    let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let samplers: Vec<_> = replicas
        .iter()
        .map(|replica| {
            let (base, writing) = (replica.base.clone(), writing.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(60);
                while writing.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline
                {
                    let (_, body) = call("GET", &format!("{base}/healthz"), None, None);
                    let health: Value = serde_json::from_str(&body).unwrap();
                    seen.push((
                        health["generation"].as_u64().unwrap(),
                        health["documents"].as_u64().unwrap(),
                    ));
                    std::thread::sleep(Duration::from_millis(10));
                }
                seen
            })
        })
        .collect();
    // The documents of each generation the writer committed.
    let mut committed = std::collections::BTreeMap::from([writer.served()]);
    let mut delays = Vec::new();
    for n in 0..8 {
        let doc = json!({"id": format!("crane-{n}"), "text": format!("Harbour crane {n} was painted blue in 19{n}5.")});
        let (status, body) = writer.post("/v1/documents", &doc.to_string());
        assert_eq!(status, 201, "{body}");
        let written = error_free(&body);
        let generation = written["generation"].as_u64().unwrap();
        committed.insert(generation, written["documents"].as_u64().unwrap());
        let start = Instant::now();
        for replica in &replicas {
            while replica.served().0 < generation {
                assert!(start.elapsed() < Duration::from_secs(5), "replica behind");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        delays.push(start.elapsed());
    }
    writing.store(false, std::sync::atomic::Ordering::SeqCst);
    // Never a part of a commit: every generation seen holds that commit's documents (a merge's
    // generation holds those of the commit before it).
    for sampler in samplers {
        for (generation, documents) in sampler.join().unwrap() {
            let (_, expected) = committed.range(..=generation).next_back().unwrap();
            assert_eq!(documents, *expected, "generation {generation}");
        }
    }
    let slowest = delays.iter().max().unwrap();
    eprintln!(
        "replicas served each write within {slowest:?} (polling every {:?})",
        lector_server::FOLLOW_EVERY
    );
    assert!(*slowest < lector_server::FOLLOW_EVERY * 5, "{delays:?}");
    // The writer's background merge removes the segment files the replicas opened earlier;
    // they answer from memory, then follow the merge too.
    let deadline = Instant::now() + Duration::from_secs(30);
    for replica in &replicas {
        while replica.served() != writer.served() {
            assert!(
                Instant::now() < deadline,
                "the replica did not follow the merge"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let answer = replica.ask(json!({"question": "When was harbour crane 7 painted blue?"}));
        assert_eq!(answer["answer"]["text"], "1975");
        // Writes go to the writer.
        assert_eq!(replica.post("/v1/documents", "{}").0, 403);
    }
}

#[test]
fn asks_and_searches_take_a_filter_in_json_or_text() {
    let server = Server::default();
    let docs = json!([
        {"id": "acme-2023", "text": "The Acme support office is in Lisbon.", "metadata": {"product": "a", "year": 2023}},
        // Haystack's name for the metadata, as the README says the route takes it.
        {"id": "acme-2024", "text": "The Acme support office is in Porto.", "meta": {"product": "b", "year": 2024}}
    ]);
    let (status, body) = server.post("/v1/documents", &docs.to_string());
    assert_eq!(status, 201, "{body}");
    let question = "Where is the Acme support office?";
    for (filter, city, id) in [
        (
            json!({"field": "meta.product", "operator": "==", "value": "b"}),
            "Porto",
            "acme-2024",
        ),
        (
            json!({"operator": "AND", "conditions": [
            {"field": "year", "operator": "<", "value": 2024},
            {"field": "product", "operator": "in", "value": ["a", "c"]}]}),
            "Lisbon",
            "acme-2023",
        ),
        (json!("product == \"a\""), "Lisbon", "acme-2023"),
    ] {
        let answer = server.ask(json!({"question": question, "filter": filter}));
        assert_eq!(answer["answer"]["text"], city, "{filter}");
        let evidence = &answer["answer"]["evidence"];
        assert_eq!(evidence["doc_id"], id);
        assert!(evidence["metadata"]["year"].is_u64(), "{evidence}");
        let read: Vec<&str> = answer["passages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["doc_id"].as_str().unwrap())
            .collect();
        assert_eq!(read, [id], "only passing documents are read: {filter}");
    }
    // Nothing passes: an abstention, not an error or another document's answer.
    let none = server.ask(json!({"question": question, "filter": "year > 2030"}));
    assert!(none["answer"].is_null(), "{none}");

    let (status, body) = server.get("/v1/search?q=Acme%20office&filter=year%20%3E%3D%202024");
    assert_eq!(status, 200, "{body}");
    let hits = error_free(&body)["hits"].as_array().unwrap().clone();
    let ids: Vec<&str> = hits.iter().map(|h| h["doc_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["acme-2024"]);
    assert_eq!(hits[0]["metadata"]["product"], "b");

    let bad = json!({"question": question, "filter": {"operator": "AND", "conditions": [{"field": "year", "operator": "~", "value": 1}]}});
    let (status, body) = server.post("/v1/ask", &bad.to_string());
    assert_eq!(status, 400);
    assert!(
        error(&body).contains("filter.conditions[0].operator"),
        "{body}"
    );
    let (status, body) = server.get("/v1/search?q=Acme&filter=year%20%3E%3E%201");
    assert_eq!(status, 400);
    assert!(error(&body).contains("column"), "{body}");
    let bad_doc = json!({"id": "x", "text": "Some text.", "metadata": ["not", "an", "object"]});
    let (status, body) = server.post("/v1/documents", &bad_doc.to_string());
    assert_eq!(status, 400);
    assert!(
        error(&body).contains("`metadata` must be an object"),
        "{body}"
    );
    let mut deep = json!("leaf");
    for _ in 0..=lector_ingest::MAX_METADATA_DEPTH {
        deep = json!({ "a": deep });
    }
    let deep_doc = json!({"id": "deep", "text": "Some text.", "metadata": deep});
    let (status, body) = server.post("/v1/documents", &deep_doc.to_string());
    assert_eq!(status, 400);
    assert!(
        error(&body).contains("`deep`): `metadata` nests too deep"),
        "{body}"
    );
}

#[test]
fn a_filter_the_server_starts_with_is_narrowed_by_requests_never_widened() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = common::sample_writer(dir.path());
    for (id, city, team) in [("a", "Lisbon", "blue"), ("b", "Porto", "red")] {
        let mut doc =
            lector_index::Document::new(id, format!("The Acme support office is in {city}."));
        doc.set_field("team", team.into());
        writer.add(doc);
    }
    writer.commit().unwrap();
    let index = writer.committed().clone();
    let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
    let mut search = SearchOptions::for_index(&index, Mode::Bm25);
    search.filter = Some(lector_index::Filter::parse("team == \"blue\"").unwrap());
    let config = Config::new(search, Limits::default());
    let state = AppState::new(Pipeline::new(index, reader), Some(writer), None, config).unwrap();
    let server = Server::launch(state, dir);
    let question = "Where is the Acme support office?";
    let answer = server.ask(json!({"question": question}));
    assert_eq!(answer["answer"]["text"], "Lisbon");
    // Asking for the other team's documents gets nothing: the two filters are joined by `and`.
    let widened =
        server.ask(json!({"question": question, "filter": "team == \"red\" or team == \"blue\""}));
    assert_eq!(widened["answer"]["text"], "Lisbon");
    let other = server.ask(json!({"question": question, "filter": {"field": "team", "operator": "==", "value": "red"}}));
    assert!(other["answer"].is_null(), "{other}");
    let (_, body) = server.get("/v1/search?q=Acme%20office%20Porto&k=20");
    let hits = error_free(&body)["hits"].as_array().unwrap().clone();
    assert!(hits.iter().all(|h| h["doc_id"] == "a"), "{hits:?}");
}

#[test]
fn pdf_and_word_files_sent_as_base64_are_read_like_index_add_reads_them() {
    use base64::Engine;
    let server = Server::default();
    let encoded = |path: std::path::PathBuf| {
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap())
    };
    let paper = lector_eval::data::require("pdf-samples/026-latex-multicolumn/multicolumn.pdf");
    let manual = workspace().join("crates/lector-ingest/tests/fixtures/manual.docx");
    let docs = json!([
        {"id": "paper.pdf", "file": {"name": "multicolumn.pdf", "base64": encoded(paper)}, "metadata": {"team": "eu"}},
        {"id": "manual.docx", "file": {"name": "manual.docx", "base64": encoded(manual)}}
    ]);
    let (status, body) = server.post("/v1/documents", &docs.to_string());
    assert_eq!(status, 201, "{body}");
    let answer = server
        .ask(json!({"question": "What is the capital of Denmark?", "filter": "team == \"eu\""}));
    let evidence = &answer["answer"]["evidence"];
    assert_eq!(evidence["doc_id"], "paper.pdf");
    assert_eq!(evidence["page"], 3, "{evidence}");
    let answer = server.ask(json!({"question": "At what time does the scheduled task run?"}));
    assert_eq!(answer["answer"]["text"], "02:30");
    assert_eq!(
        answer["answer"]["evidence"]["section"],
        "Installation > Windows"
    );

    // Refused by name, nothing stored: an encrypted PDF, bytes that are not base64, another format.
    let locked = lector_eval::data::require(
        "pdf-samples/005-libreoffice-writer-password/libreoffice-writer-password.pdf",
    );
    for (file, expected) in [
        (
            json!({"name": "locked.pdf", "base64": encoded(locked)}),
            "encrypted PDF",
        ),
        (
            json!({"name": "x.pdf", "base64": "not base64!"}),
            "`file.base64` is not base64",
        ),
        (
            json!({"name": "x.txt", "base64": ""}),
            "not a .pdf or .docx file",
        ),
    ] {
        let doc = json!({"id": "bad", "file": file});
        let (status, body) = server.post("/v1/documents", &doc.to_string());
        assert_eq!(status, 400, "{body}");
        assert!(
            error(&body).contains(expected) && error(&body).contains("`bad`"),
            "{body}"
        );
    }
    assert_eq!(server.get("/v1/documents/bad").0, 404);
}

#[test]
fn calibrations_are_written_under_the_writer_lock_and_read_only_servers_reload_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir
        .path()
        .join(lector_pipeline::calibration::CALIBRATION_FILE);
    let writer = common::sample_writer(dir.path());
    let calibration = common::platt_calibration();
    // While a writer holds the index, a calibration is refused, naming the lock; nothing written.
    let err = calibration.save(dir.path()).unwrap_err().to_string();
    assert!(err.contains("write.lock"), "{err}");
    assert!(!file.exists());
    drop(writer);

    let replica = Server::replica_of(dir.path());
    let question = json!({"question": "Which team won Super Bowl 50?", "probabilities": false});
    let confidence = || replica.ask(question.clone())["answer"].clone();
    assert!(
        confidence()["confidence"].is_null(),
        "uncalibrated at first"
    );
    // Saved with no writer: the replica answers with its confidence map at its next look.
    calibration.save(dir.path()).unwrap();
    let until = |calibrated: bool| {
        let start = Instant::now();
        loop {
            let answer = confidence();
            if answer["confidence"].is_null() != calibrated {
                return (answer, start.elapsed());
            }
            assert!(start.elapsed() < Duration::from_secs(5), "not reloaded");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let (answer, took) = until(true);
    eprintln!("calibration served after {took:?}");
    let expected = calibration
        .confidence_for(answer["log_odds"].as_f64().unwrap())
        .unwrap();
    assert!((answer["confidence"].as_f64().unwrap() - expected).abs() < 1e-12);
    // A broken file is reported, and the last calibration kept.
    std::fs::write(&file, "{").unwrap();
    std::thread::sleep(lector_server::FOLLOW_EVERY * 4);
    assert!(!confidence()["confidence"].is_null());
    // Removed: uncalibrated again.
    std::fs::remove_file(&file).unwrap();
    until(false);
}

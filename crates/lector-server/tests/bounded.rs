//! Bounded work on every route, over real HTTP on a loopback port with the shipped reader and a
//! real index of the bundled sample: writes wait for the writer without holding a worker, a write
//! that timed out stores nothing, documents are listed a page at a time in the index's own order,
//! every snapshot comes with its multi-hop title index, and a query log torn inside a character
//! is still read for labelling. (The memory bound of labelling requests is measured in
//! `labelling_memory.rs`, a process of its own.)
mod common;

use common::{logged_ask, workspace};

use lector_index::{Mode, SearchOptions};
use lector_pipeline::Pipeline;
use lector_querylog::LogConfig;
use lector_reader::Reader;
use lector_server::{AppState, Config, Limits};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server on a free loopback port, its state kept for the test; shut down when dropped.
struct Server {
    addr: String,
    state: Arc<AppState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(limits: Limits, log: Option<&Path>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let writer = common::sample_writer(dir.path());
        let index = writer.committed().clone();
        let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
        let mut config = Config::new(SearchOptions::for_index(&index, Mode::Bm25), limits);
        config.query_log = log.map(LogConfig::new);
        let pipeline = Pipeline::new(index, reader);
        let state = Arc::new(AppState::new(pipeline, Some(writer), None, config).unwrap());
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let thread = std::thread::spawn(move || {
            let shutdown = async {
                let _ = stopped.await;
            };
            runtime
                .block_on(lector_server::serve(listener, served, shutdown))
                .unwrap();
        });
        Server {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        call(&self.addr, method, path, body)
    }

    fn json(&self, path: &str) -> Value {
        let (status, text) = self.call("GET", path, "");
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Waits until the gate has admitted `admitted` requests, `running` of them on a worker.
    fn wait_for(&self, admitted: usize, running: usize) {
        let start = Instant::now();
        let gate = &self.state.gate;
        while gate.running() + gate.queued() != admitted || gate.running() != running {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "never {admitted} admitted, {running} running: {} running, {} queued",
                gate.running(),
                gate.queued()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
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

/// One request on a new connection: (status, body).
fn call(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(600)))
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8(response).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// `text` for a URL path: every byte but letters and digits as `%XX`.
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b.is_ascii_alphanumeric() {
            true => (b as char).to_string(),
            false => format!("%{b:02X}"),
        })
        .collect()
}

fn post_document(server: &Server, id: &str) -> (u16, String) {
    let doc =
        json!({"id": id, "text": format!("The {id} note is about zebras and their stripes.")});
    server.call("POST", "/v1/documents", &doc.to_string())
}

#[test]
fn writes_waiting_for_the_writer_hold_no_worker_so_reads_go_on() {
    let limits = Limits {
        max_running: 2,
        max_queued: 8,
        ..Limits::default()
    };
    let server = Arc::new(Server::start(limits, None));
    // A long commit, played by the test holding the writer.
    let held = server.state.writer().unwrap();
    let writes: Vec<_> = (0..3)
        .map(|i| {
            let server = server.clone();
            std::thread::spawn(move || post_document(&server, &format!("waiting-{i}")))
        })
        .collect();
    // All three are admitted and none holds a worker while it waits.
    server.wait_for(3, 0);
    let (status, text) = server.call("GET", "/v1/search?q=Super%20Bowl&k=1", "");
    assert_eq!(status, 200, "{text}");
    let listed = server.json("/v1/documents?limit=1");
    assert_eq!(listed["total"], 10);
    drop(held);
    for write in writes {
        let (status, text) = write.join().unwrap();
        assert_eq!(status, 201, "{text}");
    }
    assert_eq!(server.json("/v1/documents?limit=1")["total"], 13);
}

#[test]
fn a_write_answered_504_stores_nothing_then_or_later() {
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = Server::start(limits, None);
    let before = server.json("/v1/documents?limit=1");
    let generation = before["generation"].clone();
    let kept = percent_encoded(before["documents"][0]["id"].as_str().unwrap());
    let held = server.state.writer().unwrap();
    let (status, text) = post_document(&server, "late");
    assert_eq!(status, 504, "{text}");
    assert!(text.contains("nothing of it was stored"), "{text}");
    let (status, text) = server.call("DELETE", &format!("/v1/documents/{kept}"), "");
    assert_eq!(status, 504, "{text}");
    drop(held);
    // Whatever was still in flight has ended.
    server.wait_for(0, 0);
    std::thread::sleep(Duration::from_millis(100));
    let (status, text) = server.call("GET", "/v1/documents/late", "");
    assert_eq!(
        status, 404,
        "the timed-out write was committed later: {text}"
    );
    let (status, text) = server.call("GET", &format!("/v1/documents/{kept}"), "");
    assert_eq!(
        status, 200,
        "the timed-out delete was committed later: {text}"
    );
    let after = server.json("/v1/documents?limit=1");
    assert_eq!(after["generation"], generation, "{after}");
    assert_eq!(after["total"], 10);
    // The writer is free: the same write now succeeds.
    assert_eq!(post_document(&server, "late").0, 201);
}

#[test]
fn documents_are_listed_a_page_at_a_time_in_the_index_order_with_a_cursor() {
    let server = Server::start(Limits::default(), None);
    let ids = |page: &Value| -> Vec<String> {
        page["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect()
    };
    let sample = ids(&server.json("/v1/documents?limit=1000"));
    assert_eq!(sample.len(), 10);
    let docs = json!([
        {"id": "zz-last", "text": "Zürich café ☕ by the lake."},
        {"id": "aa-first", "text": "A short note."},
    ]);
    let (status, text) = server.call("POST", "/v1/documents", &docs.to_string());
    assert_eq!(status, 201, "{text}");
    // The sample's segment first, then the new one, each in the order it was written.
    let mut expected = sample.clone();
    expected.extend(["zz-last".to_string(), "aa-first".to_string()]);
    let mut paged = Vec::new();
    let mut path = "/v1/documents?limit=5".to_string();
    loop {
        let page = server.json(&path);
        assert_eq!(page["total"], 12);
        paged.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/documents?limit=5&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(paged, expected);
    let all = server.json("/v1/documents?limit=1000");
    assert_eq!(ids(&all), expected);
    assert!(all["next_cursor"].is_null(), "{all}");
    assert_eq!(
        all["documents"][10]["char_count"], 26,
        "characters, not bytes"
    );
    // `offset` skips in the same order.
    assert_eq!(
        ids(&server.json("/v1/documents?offset=9&limit=2")),
        expected[9..11]
    );
    for bad in ["cursor=nope", "cursor=seg-1.x", "limit=0"] {
        let (status, text) = server.call("GET", &format!("/v1/documents?{bad}"), "");
        assert_eq!(status, 400, "{bad}: {text}");
    }
}

#[test]
fn every_published_snapshot_has_its_multi_hop_title_index_built() {
    let server = Server::start(Limits::default(), None);
    assert!(server.state.pipeline().titles_built(), "at startup");
    assert_eq!(post_document(&server, "fresh").0, 201);
    assert!(
        server.state.pipeline().titles_built(),
        "the snapshot after a write left the title index to its first multi-hop ask"
    );
}

#[test]
fn a_query_log_torn_inside_a_character_is_still_read_for_labelling() {
    let logs = tempfile::tempdir().unwrap();
    let path = logs.path().join("queries-20261202T120000Z-000000.jsonl");
    let mut text = String::new();
    for (i, question) in ["Où est la gare ?", "Who won Super Bowl 50?"]
        .iter()
        .enumerate()
    {
        let entry = logged_ask(format!("{i:016x}"), question.to_string());
        text += &(serde_json::to_string(&entry).unwrap() + "\n");
    }
    let torn = serde_json::to_string(&logged_ask("f".repeat(16), "Qui a gagné ?".into())).unwrap();
    let mut bytes = text.into_bytes();
    // The server was killed inside the two bytes of "é".
    let cut = torn.find('é').unwrap() + 1;
    bytes.extend_from_slice(&torn.as_bytes()[..cut]);
    std::fs::write(&path, &bytes).unwrap();
    let server = Server::start(Limits::default(), Some(logs.path()));
    let next = server.json("/v1/label/next");
    assert_eq!(next["remaining"], 2, "{next}");
}

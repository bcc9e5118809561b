//! Memory bounded before admission and writes that do not stall reads, over real HTTP on a
//! loopback port: the shipped reader and a real index on disk of the bundled sample.
//!
//! Requests are written on raw sockets, so that a test controls when (and whether) a body is
//! sent: a client that the server refuses never sends its body at all.
mod common;

use common::workspace;

use lector_index::{Mode, SearchOptions};
use lector_pipeline::Pipeline;
use lector_reader::Reader;
use lector_server::{AppState, Config, Limits};
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// A server on a free loopback port; shut down when dropped.
struct Server {
    addr: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(limits: Limits) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let writer = common::sample_writer(dir.path());
        let index = writer.committed().clone();
        let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
        let config = Config::new(SearchOptions::for_index(&index, Mode::Bm25), limits);
        let pipeline = Pipeline::new(index, reader);
        let state = Arc::new(AppState::new(pipeline, Some(writer), None, config).unwrap());
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
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// Sends the head of a request (and `body`, whole) on a new connection.
    fn open(&self, method: &str, path: &str, length: usize, body: &[u8]) -> TcpStream {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        stream
    }

    fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let stream = self.open(method, path, body.len(), body.as_bytes());
        response(stream, Duration::from_secs(600)).expect("a response")
    }

    fn ask(&self, body: Value) -> Value {
        let (status, text) = self.call("POST", "/v1/ask", &body.to_string());
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    fn metric(&self, name: &str) -> f64 {
        let (_, text) = self.call("GET", "/metrics", "");
        let prefix = format!("{name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no metric {name}"))
            .trim()
            .parse()
            .unwrap()
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

/// (status, body) of the response on `stream`, or `None` when none starts within `wait`.
fn response(mut stream: TcpStream, wait: Duration) -> Option<(u16, String)> {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut response = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if response.is_empty() {
                    return None;
                }
                panic!("the response stalled after {} bytes", response.len());
            }
            Err(e) => panic!("reading the response: {e}"),
        }
    }
    let text = String::from_utf8(response).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((status, body.to_string()))
}

/// A `POST /v1/documents` body of exactly `bytes` bytes.
fn document_of_size(id: &str, bytes: usize) -> Vec<u8> {
    let empty = json!({"id": id, "text": ""}).to_string().len();
    let words = "stripes grass herd ".repeat(bytes / 19 + 1);
    let body = json!({"id": id, "text": &words[..bytes - empty]}).to_string();
    assert_eq!(body.len(), bytes);
    body.into_bytes()
}

const MIB: usize = 1 << 20;

#[test]
fn uploads_beyond_the_admission_limit_are_refused_unread_and_memory_stays_bounded() {
    // One worker, one waiting request, and a body budget of two maximum-size uploads.
    let limits = Limits {
        max_running: 1,
        max_queued: 1,
        max_documents_bytes: MIB,
        max_buffered_bytes: 2 * MIB,
        ..Limits::default()
    };
    let server = Arc::new(Server::start(limits));
    let clients = 8;
    let barrier = Arc::new(Barrier::new(clients));
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (server, barrier) = (server.clone(), barrier.clone());
            std::thread::spawn(move || {
                let body = document_of_size(&format!("big-{i}"), MIB);
                barrier.wait();
                // Only the head: a refused client never sends its megabyte.
                let stream = server.open("POST", "/v1/documents", body.len(), b"");
                let start = Instant::now();
                let early = response(stream.try_clone().unwrap(), Duration::from_secs(3));
                match early {
                    Some((status, text)) => (false, status, text, start.elapsed()),
                    None => {
                        // Admitted: waiting for the body.
                        let mut stream = stream;
                        stream.write_all(&body).unwrap();
                        let (status, text) = response(stream, Duration::from_secs(600)).unwrap();
                        (true, status, text, start.elapsed())
                    }
                }
            })
        })
        .collect();
    let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let admitted: Vec<_> = outcomes.iter().filter(|o| o.0).collect();
    let refused: Vec<_> = outcomes.iter().filter(|o| !o.0).collect();
    assert_eq!(admitted.len(), 2, "{outcomes:?}");
    for (_, status, text, _) in &admitted {
        assert_eq!(*status, 201, "{text}");
    }
    for (_, status, text, elapsed) in &refused {
        assert_eq!(*status, 503, "{text}");
        assert!(text.contains("saturated"), "{text}");
        assert!(
            *elapsed < Duration::from_secs(2),
            "refused after {elapsed:?}"
        );
    }
    let peak = server.metric("lector_body_bytes_buffered_peak");
    assert!(peak >= MIB as f64, "a whole body was buffered: {peak}");
    assert!(
        peak <= 2.0 * MIB as f64,
        "never more than the budget: {peak}"
    );
    assert_eq!(server.metric("lector_body_bytes_buffered"), 0.0);
    assert_eq!(server.metric("lector_index_documents"), 12.0);
}

#[test]
fn a_body_that_does_not_arrive_in_time_is_408_and_frees_its_slot() {
    let limits = Limits {
        max_running: 1,
        max_queued: 0,
        body_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = Server::start(limits);
    let start = Instant::now();
    // Declares 100 bytes, sends 10, then stalls.
    let stream = server.open("POST", "/v1/ask", 100, br#"{"questio"#);
    let (status, text) = response(stream, Duration::from_secs(10)).expect("an answer");
    let elapsed = start.elapsed();
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("to arrive"), "{text}");
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    assert_eq!(server.metric("lector_requests_queued"), 0.0);
    assert_eq!(server.metric("lector_body_bytes_buffered"), 0.0);
    // The only slot is free again.
    server.ask(json!({"question": "Who won Super Bowl 50?", "k": 1, "probabilities": false}));
}

#[test]
fn connections_beyond_the_limit_wait_until_one_closes() {
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let server = Server::start(limits);
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(&server.addr).unwrap())
        .collect();
    let waiting = server.open("GET", "/healthz", 0, b"");
    let mut waiting_reader = waiting.try_clone().unwrap();
    waiting_reader
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0u8; 1];
    let early = waiting_reader.read(&mut byte);
    assert!(
        early
            .as_ref()
            .is_err_and(|e| matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "the third connection was served while two were open: {early:?}"
    );
    drop(idle);
    let (status, _) = response(waiting, Duration::from_secs(10)).expect("served once one closed");
    assert_eq!(status, 200);
}

#[test]
fn an_ask_in_flight_keeps_its_snapshot_while_a_write_commits() {
    let limits = Limits {
        max_running: 2,
        ..Limits::default()
    };
    let server = Arc::new(Server::start(limits));
    // Forty passages about zebras make the ask below read for a while.
    let fillers: Vec<Value> = (0..40)
        .map(|i| json!({"id": format!("filler-{i}"), "text": format!("Note {i} on the zebra: its stripes, the grass it eats and the herd it keeps are described here.")}))
        .collect();
    let (status, text) = server.call("POST", "/v1/documents", &json!(fillers).to_string());
    assert_eq!(status, 201, "{text}");
    let question = "Where does the zebra named Quagga live?";
    let slow = {
        let server = server.clone();
        std::thread::spawn(move || {
            server.ask(json!({"question": question, "k": 100, "probabilities": false}))
        })
    };
    let start = Instant::now();
    while server.metric("lector_requests_running") < 1.0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the ask never ran"
        );
        assert!(!slow.is_finished(), "the ask ended before the write began");
        std::thread::sleep(Duration::from_millis(2));
    }
    let doc = json!({"id": "quagga", "text": "The zebra named Quagga lives in Lisbon."});
    let (status, text) = server.call("POST", "/v1/documents", &doc.to_string());
    assert_eq!(status, 201, "{text}");
    // The ask still holds its worker: the commit did not wait for it to end.
    assert_eq!(
        server.metric("lector_requests_running"),
        1.0,
        "the write waited for the ask in flight to finish"
    );
    let before = slow.join().unwrap();
    let read: Vec<&str> = before["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["doc_id"].as_str().unwrap())
        .collect();
    assert!(read.len() >= 40, "{read:?}");
    assert!(
        !read.contains(&"quagga"),
        "the ask in flight saw a commit made after it started"
    );
    let after = server.ask(json!({"question": question, "probabilities": false}));
    assert_eq!(after["answer"]["text"], "Lisbon", "{after}");
    assert_eq!(after["answer"]["evidence"]["doc_id"], "quagga");
}

#[test]
fn a_client_that_trickles_its_headers_is_cut_off_and_frees_its_connection() {
    let limits = Limits {
        max_connections: 1,
        header_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = Server::start(limits);
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let start = Instant::now();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: ")
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .expect("closed by the server");
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    // The only connection slot is free again.
    assert_eq!(server.call("GET", "/healthz", "").0, 200);
}

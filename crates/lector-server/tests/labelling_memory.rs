//! Labelling requests over a large query log stay within the admission bound in memory: N
//! concurrent `GET /v1/label/next` over real HTTP, with the shipped reader and a real index of
//! the bundled sample, grow the peak resident size of this process (where the server runs) by
//! at most what `max_running` requests at once need. A test binary of its own, so that no
//! other test's memory shares the measurement.
mod common;

use common::{logged_ask, workspace};

use lector_index::{Mode, SearchOptions};
use lector_pipeline::Pipeline;
use lector_querylog::LogConfig;
use lector_reader::Reader;
use lector_server::{AppState, Config, Limits};
use std::io::{BufWriter, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// A server on a free loopback port logging to `log`; shut down when dropped.
struct Server {
    addr: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(limits: Limits, log: &Path) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let writer = common::sample_writer(dir.path());
        let index = writer.committed().clone();
        let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
        let mut config = Config::new(SearchOptions::for_index(&index, Mode::Bm25), limits);
        config.query_log = Some(LogConfig::new(log));
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

    /// `GET path` on a new connection: (status, body).
    fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        stream.write_all(head.as_bytes()).unwrap();
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

/// `/proc/self/status` field `name`, in bytes.
fn status_bytes(name: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in /proc/self/status"));
    let kib: u64 = line
        .trim_start_matches(':')
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap();
    kib * 1024
}

/// Resets the peak resident size (VmHWM) to the current one, and returns that.
fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("resetting VmHWM (Linux 4.0 and later)");
    status_bytes("VmRSS")
}

const MIB: u64 = 1 << 20;

#[test]
fn labelling_requests_on_a_large_log_stay_within_the_admission_bound_in_memory() {
    // A log of ASKS distinct questions of QUESTION characters each (about 4 MB).
    const ASKS: usize = 6_000;
    const QUESTION: usize = 400;
    let logs = tempfile::tempdir().unwrap();
    let path = logs.path().join("queries-20261202T120000Z-000000.jsonl");
    let mut file = BufWriter::new(std::fs::File::create(&path).unwrap());
    let filler = "why does the river bend ".repeat(QUESTION / 24 + 1);
    for i in 0..ASKS {
        let question = format!("{i:08} {}", &filler[..QUESTION - 9]);
        let line = serde_json::to_string(&logged_ask(format!("{i:016x}"), question)).unwrap();
        writeln!(file, "{line}").unwrap();
    }
    drop(file);
    let running = 1;
    let limits = Limits {
        max_running: running,
        max_queued: 64,
        ..Limits::default()
    };
    let server = Arc::new(Server::start(limits, logs.path()));
    // The first request reads the log; what it keeps is the server's, not a request's.
    let (status, first) = server.get("/v1/label/next");
    assert_eq!(status, 200, "{first}");
    assert!(first.contains(&format!("\"remaining\":{ASKS}")), "{first}");

    // Each request builds its queue of the asks left: for every ask a sort key, a reference and
    // its normalised question (80 bytes, and the question's bytes with about 16 of allocator
    // overhead), then a set of the questions (up to 2 x 48 bytes of hash table while it grows)
    // and the queue (8 bytes): about QUESTION + 200 bytes per ask, 6,000 x 600 = 3.6 MB a request.
    let per_request = (ASKS * (QUESTION + 200)) as u64;
    // With at most `running` requests working at once, the peak grows by at most that many
    // working sets, twice over for allocator slack (freed memory kept in per-thread arenas),
    // plus 4 MiB for the connections, threads and responses of the waiting requests:
    // 1 x 3.6 x 2 + 4.2 = 11.4 MB. Without admission all CLIENTS run at once: 12 x 3.6 = 43 MB.
    let bound = running as u64 * per_request * 2 + 4 * MIB;
    const CLIENTS: usize = 12;
    let before = reset_peak();
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (server, barrier) = (server.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                server.get("/v1/label/next?sample=random")
            })
        })
        .collect();
    for client in clients {
        let (status, text) = client.join().unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(text.contains(&format!("\"remaining\":{ASKS}")), "{text}");
    }
    let growth = status_bytes("VmHWM").saturating_sub(before);
    eprintln!(
        "{CLIENTS} concurrent labelling requests, {running} running at once: peak grew {:.1} MB \
         (bound {:.1} MB)",
        growth as f64 / 1e6,
        bound as f64 / 1e6
    );
    assert!(
        growth <= bound,
        "{CLIENTS} labelling requests grew the peak by {} MB, over the {} MB that {running} \
         running at once allow",
        growth / 1_000_000,
        bound / 1_000_000
    );
}

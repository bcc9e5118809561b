//! Helpers the `lector` process tests share: running the binary, indexing the bundled sample,
//! a `lector serve` on a free port and raw HTTP to it, a scripted OpenAI-compatible endpoint,
//! and headless Chromium for the web pages.
//! Each test binary uses only some of them.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `lector` with `args`, to the end.
pub fn lector(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lector"))
        .args(args)
        // A command without --index must not pick up the caller's default index.
        .env_remove("LECTOR_INDEX")
        .env_remove("LECTOR_STORE")
        .output()
        .expect("lector runs")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The stdout of a run that succeeded.
pub fn ok(out: &Output) -> String {
    assert!(out.status.success(), "lector failed: {}", stderr(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stderr of a run that failed with exit code 2 (an error).
pub fn fails(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "expected exit code 2");
    stderr(out)
}

/// The bundled SQuAD v1.1 sample: 10 paragraphs of one article, about Super Bowl 50.
pub fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/squad-v1.1-sample.json")
}

/// `documents` indexed into a new `dir/name` with `extra` flags for `lector index add`.
pub fn index_documents(documents: &str, dir: &Path, name: &str, extra: &[&str]) -> String {
    let index = dir.join(name).to_string_lossy().into_owned();
    let mut args = vec!["index", "add", documents, "--index", index.as_str()];
    args.extend_from_slice(extra);
    ok(&lector(&args));
    index
}

/// The bundled sample indexed into `dir/name` with `extra` flags for `lector index add`.
pub fn index_with(dir: &Path, name: &str, extra: &[&str]) -> String {
    index_documents(&sample().to_string_lossy(), dir, name, extra)
}

/// The bundled sample indexed into `dir/index`.
pub fn index(dir: &Path) -> String {
    index_with(dir, "index", &[])
}

/// The sample indexed with passage vectors (all-MiniLM-L6-v2, fetched into the cache if missing).
pub fn dense_index(dir: &Path) -> String {
    index_with(dir, "dense", &["--dense"])
}

/// A `lector serve` process, killed when dropped (also when a test fails half-way, so no
/// server outlives its test).
pub struct Server(Child);

impl Server {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill_hard(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }

    /// Sends SIGTERM: the server finishes the requests in flight, then exits.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the server to exit.
    pub fn wait(&mut self) -> ExitStatus {
        self.0.wait().unwrap()
    }

    /// SIGTERM, and how the server exited.
    pub fn stop(&mut self) -> ExitStatus {
        self.terminate();
        self.wait()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `lector serve` on a free port with `extra` flags; returns the process and its address once
/// it listens.
pub fn serve(index: &str, extra: &[&str]) -> (Server, String) {
    serve_with(&[&["--index", index], extra].concat())
}

/// `lector serve ARGS` on a free port; returns the process and its address once it listens.
pub fn serve_with(args: &[&str]) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lector"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("lector serve starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in `{line}`"))
        .to_string();
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
        print!("{rest}");
    });
    (Server(child), addr)
}

/// One HTTP/1.1 request over a raw socket with extra header lines: (status, body).
pub fn http_with(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[&str],
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    let body = body.unwrap_or("");
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// One HTTP/1.1 request over a raw socket: (status, body).
pub fn http(addr: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    http_with(addr, method, path, body, &[])
}

/// A GET answered 200, as JSON.
pub fn get_json(addr: &str, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path, None);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Chromium, if installed: the `CHROMIUM` variable, else the usual names on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Chromium, or `None` (and a loud note that `test` was skipped) when it is missing outside CI.
pub fn browser_or_skip(test: &str) -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        // CI installs Chromium (`tools/setup-chromium.sh`): there, a missing browser is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "no Chromium found under CI: run tools/setup-chromium.sh or set CHROMIUM"
        );
        eprintln!(
            "!!! SKIPPED {test}: no Chromium found (tools/setup-chromium.sh installs it, or set CHROMIUM) !!!"
        );
    }
    found
}

/// Headless Chromium on `url` with its profile in `profile` and `extra` flags (`--dump-dom`,
/// `--screenshot=FILE`), in UTC so that dates on the page do not depend on the machine.
pub fn headless(browser: &Path, profile: &Path, url: &str, extra: &[&str]) -> Output {
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            // Virtual time waits for the page's requests and its rendering.
            "--virtual-time-budget=60000",
            "--window-size=1100,1400",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .env("TZ", "UTC")
        .output()
        .expect("chromium runs")
}

/// The page at `url` after its requests settle, as `--dump-dom` prints it; it must contain
/// `expected` (the message shows the page and what Chromium said otherwise).
pub fn dump_dom(browser: &Path, profile: &Path, url: &str, expected: &str) -> String {
    let out = headless(browser, profile, url, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dom.contains(expected),
        "the page at {url} lacks `{expected}`:\n{dom}\n{}",
        stderr(&out)
    );
    dom
}

/// An OpenAI-compatible endpoint that answers every chat completion with `reply` and keeps
/// the request bodies; returns its base URL.
pub fn scripted_endpoint(reply: &'static str, requests: Arc<Mutex<Vec<String>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                if line == "\r\n" || line.is_empty() {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            requests
                .lock()
                .unwrap()
                .push(String::from_utf8(body).unwrap());
            let out = serde_json::json!({
                "choices": [{"message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10}
            })
            .to_string();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
                out.len()
            )
            .unwrap();
        }
    });
    url
}

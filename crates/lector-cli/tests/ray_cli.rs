//! Batch indexing on a real Ray cluster (tools/ray_index.py): a Ray head started by this test in a
//! network namespace that has only loopback, the driver splitting a SciFact and a SQuAD slice into
//! shards and a folder of PDFs into runs of its files, indexed by `lector index add` as Ray tasks
//! and merged with `lector index merge`, and the result compared with the index one process
//! builds; then the same shards written by the tasks straight into a Redis store (started in the
//! namespace too), compared with a store one process fills. Needs root (for `ip netns`) and PyPI's
//! `ray` (tools/setup-ray.sh installs it, cached); fails, never skips, without them.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `../shared/data/<rel>` (or `$LECTOR_DATA_DIR/<rel>`).
fn data(rel: &str) -> PathBuf {
    let dir = match std::env::var_os("LECTOR_DATA_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => repo().join("../shared/data"),
    };
    dir.join(rel)
}

/// The password of the Redis store the tasks write to: the driver must put it on no command line.
const REDIS_PASSWORD: &str = "ray-test-secret";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run a command");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// The interpreter of the Ray environment (tools/setup-ray.sh, cached after the first run).
fn ray_python() -> PathBuf {
    let out = run(Command::new("bash").arg(repo().join("tools/setup-ray.sh")));
    PathBuf::from(text(&out.stdout).lines().last().expect("a path").trim())
}

/// A network namespace with only `lo`, up; deleted (after everything the test started in it has
/// been stopped) when dropped.
struct Namespace(String);

impl Namespace {
    fn new() -> Self {
        let name = format!("lector-ray-{}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]));
        run(Command::new("ip").args(["netns", "exec", &name, "ip", "link", "set", "lo", "up"]));
        Namespace(name)
    }

    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.0]).arg(program);
        cmd
    }

    /// The processes still running in the namespace.
    fn pids(&self) -> Vec<String> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.0])
            .output()
            .expect("ip netns pids");
        text(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Ray's helpers that outlived the head (started by it, so by this test): by their ids.
        for pid in self.pids() {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// `ray start --head --block` in the namespace: this test's child, stopped by its pid.
struct RayHead {
    child: Child,
}

impl RayHead {
    fn start(ns: &Namespace, python: &Path, temp: &Path, port: u16) -> Self {
        let ray = python.with_file_name("ray");
        let child = ns
            .command(&ray)
            .args(["start", "--head", "--block", "--num-cpus", "2"])
            .args(["--include-dashboard=false", "--disable-usage-stats"])
            .arg(format!("--port={port}"))
            .arg(format!("--temp-dir={}", temp.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Ray head");
        let head = RayHead { child };
        // Ready when `ray status` reaches it: at most 60 tries a second apart.
        let address = format!("127.0.0.1:{port}");
        for _ in 0..60 {
            let status = ns
                .command(&ray)
                .args(["status", "--address", &address])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("ray status");
            if status.success() {
                return head;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        panic!("the Ray head did not come up within 60 s");
    }
}

impl Drop for RayHead {
    fn drop(&mut self) {
        // SIGTERM: the head's shutdown hook stops the processes it started.
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lector(args: &[&str]) -> Output {
    run(Command::new(env!("CARGO_BIN_EXE_lector")).args(args))
}

/// The top 10 of `query` in `index`: doc id, passage and score.
fn top10(index: &Path, query: &str) -> Vec<(String, u64, f64)> {
    let out = lector(&[
        "search",
        query,
        "--index",
        index.to_str().unwrap(),
        "--json",
    ]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let id = h["doc_id"].as_str().unwrap().to_string();
            (
                id,
                h["passage"].as_u64().unwrap(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn shards_indexed_as_ray_tasks_merge_into_what_one_process_builds() {
    let tmp = tempfile::tempdir().unwrap();
    // 300 SciFact abstracts and 6 SQuAD articles (both splitters), and the 31 sample PDFs.
    let pdfs = data("pdf-samples");
    let corpus = std::fs::read_to_string(data("beir/scifact/corpus.jsonl")).unwrap();
    let scifact = tmp.path().join("scifact.jsonl");
    let lines: Vec<&str> = corpus.lines().take(300).collect();
    std::fs::write(&scifact, lines.join("\n")).unwrap();
    let squad_text = std::fs::read_to_string(data("squad/dev-v1.1.json")).unwrap();
    let mut squad: Value = serde_json::from_str(&squad_text).unwrap();
    squad["data"].as_array_mut().unwrap().truncate(6);
    let squad_file = tmp.path().join("squad.json");
    std::fs::write(&squad_file, squad.to_string()).unwrap();

    let python = ray_python();
    let ns = Namespace::new();
    let port = 6390;
    let head = RayHead::start(&ns, &python, &tmp.path().join("ray"), port);
    let merged = tmp.path().join("merged");
    let out = run(ns
        .command(&python)
        .arg(repo().join("tools/ray_index.py"))
        .args([&scifact, &squad_file, &pdfs])
        .arg("--out")
        .arg(&merged)
        .args(["--shards", "3", "--json"])
        .arg(format!("--address=127.0.0.1:{port}"))
        .arg(format!("--lector={}", env!("CARGO_BIN_EXE_lector"))));
    let into_redis = shards_into_redis(
        &ns,
        &python,
        port,
        tmp.path(),
        &[&scifact, &squad_file, &pdfs],
    );
    drop(head);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    println!("{summary}");
    let progress = text(&out.stderr);
    // Three shards of the files, three runs of the folder.
    for k in 1..=6 {
        assert!(progress.contains(&format!("shard {k}/6: ")), "{progress}");
    }
    assert_eq!(summary["shards"], 6);
    assert!(
        !tmp.path().join("merged.work").exists(),
        "work folder removed"
    );

    assert_eq!(into_redis["documents"], summary["documents"]);

    let single = tmp.path().join("single");
    lector(&[
        "index",
        "add",
        scifact.to_str().unwrap(),
        squad_file.to_str().unwrap(),
        pdfs.to_str().unwrap(),
        "--index",
        single.to_str().unwrap(),
    ]);
    let stats = |index: &Path| -> Value {
        let out = lector(&[
            "index",
            "stats",
            "--index",
            index.to_str().unwrap(),
            "--json",
        ]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (m, s) = (stats(&merged), stats(&single));
    assert_eq!(m["documents"], s["documents"]);
    assert_eq!(m["passages"], s["passages"]);
    assert_eq!(summary["documents"], s["documents"]);
    for query in [
        "cancer risk in children",
        "Which NFL team represented the AFC at Super Bowl 50?",
        "vitamin D deficiency",
        "What is the capital of Denmark?",
    ] {
        let (got, want) = (top10(&merged, query), top10(&single, query));
        assert_eq!(got.len(), 10, "{query}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((&g.0, g.1), (&w.0, w.1), "{query}");
            assert!((g.2 - w.2).abs() <= 1e-6, "{query}: {} vs {}", g.2, w.2);
        }
    }
}

/// A Redis (tools/setup-redis.sh) in the namespace, this test's child, killed by its pid.
struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The same inputs indexed by the driver straight into a Redis store in the namespace (no
/// merge), checked against a store one process fills: the same counts, and the same top 10 with
/// the same scores. Returns the driver's summary.
fn shards_into_redis(
    ns: &Namespace,
    python: &Path,
    ray_port: u16,
    tmp: &Path,
    inputs: &[&Path],
) -> Value {
    let launcher = run(Command::new("bash").arg(repo().join("tools/setup-redis.sh")));
    let launcher = PathBuf::from(text(&launcher.stdout).lines().last().unwrap().trim());
    let port = "6391";
    let dir = tmp.join("redis");
    std::fs::create_dir_all(&dir).unwrap();
    let _redis = Redis(
        ns.command(&launcher)
            .args([
                "--port",
                port,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--requirepass",
                REDIS_PASSWORD,
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Redis in the namespace"),
    );
    let reachable = || {
        let probe = format!("import socket; socket.create_connection(('127.0.0.1', {port}), 1)");
        let status = ns
            .command(python)
            .args(["-c", &probe])
            .stderr(Stdio::null())
            .status();
        status.is_ok_and(|s| s.success())
    };
    let mut tries = 0;
    while !reachable() {
        tries += 1;
        assert!(tries < 100, "Redis did not come up in the namespace");
        std::thread::sleep(Duration::from_millis(100));
    }
    let lector_bin = Path::new(env!("CARGO_BIN_EXE_lector"));
    let store = |name: &str| format!("redis://:{REDIS_PASSWORD}@127.0.0.1:{port}/{name}");
    let driver = |out: &str| {
        let mut cmd = ns.command(python);
        cmd.arg(repo().join("tools/ray_index.py"))
            .args(inputs)
            .args(["--out", out])
            .arg("--work")
            .arg(tmp.join("redis-work"))
            .args(["--shards", "3", "--json"])
            .arg(format!("--address=127.0.0.1:{ray_port}"))
            .arg(format!("--lector={}", lector_bin.display()));
        cmd
    };
    // A password on the command line (where `ps` shows it) is refused before any work.
    let refused = driver(&store("ray")).output().unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("--store-file"),
        "{}",
        text(&refused.stderr)
    );
    // From a file only its owner reads: the driver hands the tasks its path, never the URL.
    let store_file = tmp.join("store-url");
    std::fs::write(&store_file, store("ray") + "\n").unwrap();
    let out = run(driver("store").arg("--store-file").arg(&store_file));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    println!("{summary}");
    let shown = summary["index"].as_str().unwrap();
    assert!(
        shown.ends_with("/ray") && !shown.contains(REDIS_PASSWORD),
        "{shown}"
    );
    // Each shard line counts the shard's own documents: together, the store's.
    let progress = text(&out.stderr);
    let per_shard: u64 = progress
        .lines()
        .filter_map(|l| {
            l.split(": ")
                .nth(1)?
                .split(" documents")
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert_eq!(Some(per_shard), summary["documents"].as_u64(), "{progress}");
    run(ns
        .command(lector_bin)
        .args(["index", "add"])
        .args(inputs)
        .args(["--store", &store("single")]));
    let json = |args: &[&str]| -> Value {
        serde_json::from_slice(&run(ns.command(lector_bin).args(args)).stdout).unwrap()
    };
    let (r, s) = (
        json(&["index", "stats", "--store", &store("ray"), "--json"]),
        json(&["index", "stats", "--store", &store("single"), "--json"]),
    );
    assert_eq!(
        (&r["documents"], &r["passages"]),
        (&s["documents"], &s["passages"])
    );
    for query in [
        "cancer risk in children",
        "Which NFL team represented the AFC at Super Bowl 50?",
    ] {
        let hits = |name: &str| {
            json(&["search", query, "--store", &store(name), "--json"])["hits"].clone()
        };
        let (got, want) = (hits("ray"), hits("single"));
        assert_eq!(got.as_array().unwrap().len(), 10, "{query}");
        for (g, w) in got.as_array().unwrap().iter().zip(want.as_array().unwrap()) {
            assert_eq!(
                (&g["doc_id"], &g["passage"]),
                (&w["doc_id"], &w["passage"]),
                "{query}"
            );
            let (g, w) = (g["score"].as_f64().unwrap(), w["score"].as_f64().unwrap());
            assert!((g - w).abs() <= 1e-6, "{query}: {g} vs {w}");
        }
    }
    summary
}

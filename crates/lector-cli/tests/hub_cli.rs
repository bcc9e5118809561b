//! `lector models pull ROLE ORG/NAME[@REVISION]` against a hub-compatible server on loopback
//! (the revision API, resolve URLs, an LFS redirect to a second origin, ETags, a transfer broken
//! half-way, a private repository), run as the real binary with its cache in a temporary folder.

use lector_models::registry::sha256_hex;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const TOKEN: &str = "hf_test_secret_token_4242";
const READER_FILES: [&str; 6] = [
    "config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
];

fn shipped_reader() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/reader-minilm-squad")
}

/// A repository the server holds.
struct Repo {
    sha: String,
    files: HashMap<String, Arc<Vec<u8>>>,
    /// Requests need `Authorization: Bearer TOKEN`.
    private: bool,
    /// Files whose ETag is the sha256 of other bytes.
    wrong_etag: Vec<String>,
    /// Files whose first transfer stops half-way.
    break_once: Vec<String>,
    /// Ranged requests are answered 206 with the whole file (`Content-Range: bytes 0-...`).
    bad_range: bool,
}

#[derive(Default)]
struct State {
    repos: HashMap<String, Repo>,
    /// (origin: "hub" or "cdn", path, authorization header, range header)
    log: Vec<(String, String, Option<String>, Option<String>)>,
    broken: Vec<String>,
}

/// The hub on one port and its "CDN" (another origin) on another; stopped and joined on drop.
struct HubServer {
    endpoint: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl HubServer {
    fn start(repos: Vec<(&str, Repo)>) -> Self {
        let state = Arc::new(Mutex::new(State {
            repos: repos
                .into_iter()
                .map(|(name, repo)| (name.to_string(), repo))
                .collect(),
            ..State::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let hub = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://127.0.0.1:{}", hub.local_addr().unwrap().port());
        let cdn_base = format!("http://127.0.0.1:{}", cdn.local_addr().unwrap().port());
        let threads = [("hub", hub), ("cdn", cdn)]
            .into_iter()
            .map(|(origin, listener)| {
                let (state, stop, cdn_base) = (state.clone(), stop.clone(), cdn_base.clone());
                std::thread::spawn(move || serve(origin, listener, &state, &stop, &cdn_base))
            })
            .collect();
        Self {
            endpoint,
            state,
            stop,
            threads,
        }
    }

    fn log(&self) -> Vec<(String, String, Option<String>, Option<String>)> {
        self.state.lock().unwrap().log.clone()
    }
}

impl Drop for HubServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn serve(origin: &str, listener: TcpListener, state: &Mutex<State>, stop: &AtomicBool, cdn: &str) {
    listener.set_nonblocking(true).unwrap();
    // A thread per connection, all joined when the scope ends (after `stop`).
    std::thread::scope(|scope| {
        // Bounded: about ten minutes of polling at most.
        for _ in 0..60_000 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).unwrap();
                    scope.spawn(move || handle(origin, stream, state, cdn));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => break,
            }
        }
    });
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(String, String)], body: &[u8]) {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
}

/// One request per connection (`Connection: close`).
fn handle(origin: &str, mut stream: TcpStream, state: &Mutex<State>, cdn: &str) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut auth = None;
    let mut range = None;
    for _ in 0..100 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "authorization" => auth = Some(v.trim().to_string()),
                "range" => range = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_string();
    let mut state = state.lock().unwrap();
    state
        .log
        .push((origin.into(), path.clone(), auth.clone(), range.clone()));
    let not_found = |stream: &mut TcpStream| {
        respond(
            stream,
            "404 Not Found",
            &[("Content-Length".into(), "0".into())],
            b"",
        )
    };
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // /api/models/ORG/NAME/revision/REV, /ORG/NAME/resolve/SHA/FILE, cdn: /lfs/ORG/NAME/FILE
    let (repo_name, rest): (String, Vec<&str>) = match (origin, parts.as_slice()) {
        ("hub", ["api", "models", org, name, "revision", _rev]) => {
            (format!("{org}/{name}"), vec!["revision"])
        }
        ("hub", [org, name, "resolve", sha, file @ ..]) => (
            format!("{org}/{name}"),
            [&["resolve", sha][..], file].concat(),
        ),
        ("cdn", ["lfs", org, name, file @ ..]) => {
            (format!("{org}/{name}"), [&["lfs"][..], file].concat())
        }
        _ => return not_found(&mut stream),
    };
    let Some(repo) = state.repos.get(&repo_name) else {
        // The hub's answer for a repository it does not have (the same as for a private one
        // without a token): 401 with its error code.
        let body = br#"{"error":"Repository Not Found"}"#;
        return respond(
            &mut stream,
            "401 Unauthorized",
            &[
                ("Content-Length".into(), body.len().to_string()),
                ("X-Error-Code".into(), "RepoNotFound".into()),
            ],
            body,
        );
    };
    if origin == "hub" && repo.private && auth.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        let body = br#"{"error":"Invalid credentials in Authorization header"}"#;
        return respond(
            &mut stream,
            "401 Unauthorized",
            &[("Content-Length".into(), body.len().to_string())],
            body,
        );
    }
    if rest == ["revision"] {
        let siblings: Vec<_> = repo
            .files
            .keys()
            .map(|f| serde_json::json!({ "rfilename": f }))
            .collect();
        let body =
            serde_json::json!({"id": repo_name, "sha": repo.sha, "siblings": siblings}).to_string();
        return respond(
            &mut stream,
            "200 OK",
            &[
                ("Content-Type".into(), "application/json".into()),
                ("Content-Length".into(), body.len().to_string()),
            ],
            body.as_bytes(),
        );
    }
    let file = rest[if rest[0] == "lfs" { 1 } else { 2 }..].join("/");
    let Some(bytes) = repo.files.get(&file).cloned() else {
        return not_found(&mut stream);
    };
    let sha256 = if repo.wrong_etag.contains(&file) {
        sha256_hex(b"other bytes")
    } else {
        sha256_hex(&bytes)
    };
    let lfs = file.ends_with(".safetensors");
    if origin == "hub" && rest[0] == "resolve" && rest[1] != repo.sha {
        return not_found(&mut stream);
    }
    if origin == "hub" && lfs {
        // The hub's LFS answer: a redirect to the CDN with the file's sha256 and size.
        let location = format!("{cdn}/lfs/{repo_name}/{file}");
        return respond(
            &mut stream,
            "302 Found",
            &[
                ("Location".into(), location),
                ("X-Linked-Etag".into(), format!("\"{sha256}\"")),
                ("X-Linked-Size".into(), bytes.len().to_string()),
                ("X-Repo-Commit".into(), repo.sha.clone()),
                ("ETag".into(), "\"a-git-pointer-sha1\"".into()),
                ("Content-Length".into(), "0".into()),
            ],
            b"",
        );
    }
    let first_break = repo.break_once.contains(&file) && !state.broken.contains(&file);
    let bad_range = repo.bad_range;
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n < bytes.len());
    let mut headers = vec![
        ("ETag".to_string(), format!("\"{sha256}\"")),
        ("X-Repo-Commit".to_string(), repo.sha.clone()),
    ];
    if first_break {
        state.broken.push(file.clone());
    }
    drop(state);
    match start {
        Some(start) if bad_range => {
            // A server that ignores where the range starts, and says so.
            headers.push((
                "Content-Range".into(),
                format!("bytes 0-{}/{}", bytes.len() - 1, bytes.len()),
            ));
            headers.push(("Content-Length".into(), bytes.len().to_string()));
            let _ = start;
            respond(&mut stream, "206 Partial Content", &headers, &bytes);
        }
        Some(start) => {
            headers.push((
                "Content-Range".into(),
                format!("bytes {start}-{}/{}", bytes.len() - 1, bytes.len()),
            ));
            headers.push(("Content-Length".into(), (bytes.len() - start).to_string()));
            respond(
                &mut stream,
                "206 Partial Content",
                &headers,
                &bytes[start..],
            );
        }
        None => {
            headers.push(("Content-Length".into(), bytes.len().to_string()));
            let body = if first_break {
                &bytes[..bytes.len() / 2]
            } else {
                &bytes[..]
            };
            respond(&mut stream, "200 OK", &headers, body);
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn files_of(dir: &Path, names: &[&str]) -> HashMap<String, Arc<Vec<u8>>> {
    names
        .iter()
        .map(|n| (n.to_string(), Arc::new(std::fs::read(dir.join(n)).unwrap())))
        .collect()
}

fn reader_repo(sha: &str) -> Repo {
    Repo {
        sha: sha.into(),
        files: files_of(&shipped_reader(), &READER_FILES),
        private: false,
        wrong_etag: vec![],
        break_once: vec![],
        bad_range: false,
    }
}

fn pull(server: &HubServer, cache: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lector"));
    cmd.args(["models", "pull"])
        .args(args)
        .env("HF_ENDPOINT", &server.endpoint)
        .env("LECTOR_CACHE_DIR", cache)
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("LECTOR_INDEX");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("lector runs")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SHA_OK: &str = "1111111111111111111111111111111111111111";

#[test]
fn a_hub_pull_follows_the_lfs_redirect_resumes_verifies_and_reads_like_the_shipped_reader() {
    let mut repo = reader_repo(SHA_OK);
    repo.break_once = vec!["tokenizer.json".into()];
    let server = HubServer::start(vec![("lector-test/reader", repo)]);
    let cache = tempfile::tempdir().unwrap();

    // Offline before any pull: an error naming the repository, no request made.
    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/reader"],
        &[("HF_HUB_OFFLINE", "1")],
    );
    let (_, err) = text(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("lector-test/reader") && err.contains("HF_HUB_OFFLINE"),
        "{err}"
    );
    assert!(server.log().is_empty());

    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/reader"],
        &[],
    );
    let (stdout, err) = text(&out);
    assert!(out.status.success(), "{err}");
    println!("pull: {stdout}");
    let repo_dir = cache.path().join("hub/lector-test--reader");
    let snapshot = repo_dir.join("snapshots").join(SHA_OK);
    assert!(stdout.contains(&snapshot.display().to_string()), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("refs/main")).unwrap(),
        SHA_OK
    );
    for name in READER_FILES {
        assert_eq!(
            std::fs::read(snapshot.join(name)).unwrap(),
            std::fs::read(shipped_reader().join(name)).unwrap(),
            "{name}"
        );
        assert!(!snapshot.join(format!("{name}.incomplete")).exists());
    }
    let log = server.log();
    assert!(
        log.iter()
            .any(|(o, p, _, _)| o == "cdn" && p.ends_with("/model.safetensors")),
        "the safetensors came through the redirect: {log:?}"
    );
    assert!(
        log.iter().any(|(o, p, _, r)| o == "hub"
            && p.ends_with("/tokenizer.json")
            && r.as_deref().is_some_and(|r| r.starts_with("bytes="))),
        "the broken transfer resumed with Range: {log:?}"
    );

    // Offline after the pull: the cached snapshot, no request.
    let requests = server.log().len();
    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/reader"],
        &[("HF_HUB_OFFLINE", "1")],
    );
    let (stdout, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(stdout.contains(&snapshot.display().to_string()), "{stdout}");
    assert_eq!(server.log().len(), requests);

    // The pulled reader answers as the shipped one.
    let context = cache.path().join("context.txt");
    std::fs::write(
        &context,
        "Super Bowl 50 was an American football game to determine the champion of the National \
         Football League (NFL) for the 2015 season. The American Football Conference (AFC) \
         champion Denver Broncos defeated the National Football Conference (NFC) champion \
         Carolina Panthers 24-10 to earn their third Super Bowl title.",
    )
    .unwrap();
    let lector_read = |model: Option<&Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lector"));
        cmd.args([
            "read",
            "--json",
            "--question",
            "Which team won Super Bowl 50?",
        ])
        .arg("--context")
        .arg(&context)
        .env_remove("LECTOR_READER")
        .env("LECTOR_CACHE_DIR", cache.path());
        if let Some(model) = model {
            cmd.arg("--model").arg(model);
        }
        cmd.output().unwrap()
    };
    let read = |model: Option<&Path>| {
        let out = lector_read(model);
        let (stdout, err) = text(&out);
        assert!(out.status.success(), "{err}");
        stdout
    };
    let pulled = read(Some(&snapshot));
    println!("read: {pulled}");
    let shipped = read(None);
    assert!(pulled.contains("Denver Broncos"), "{pulled}");
    assert_eq!(pulled, shipped);
    // `--model ORG/NAME` is the pulled snapshot; one never pulled says how to pull it.
    assert_eq!(read(Some(Path::new("lector-test/reader"))), shipped);
    assert_eq!(read(Some(Path::new("lector-test/reader@main"))), shipped);
    let out = lector_read(Some(Path::new("lector-test/absent")));
    let (_, err) = text(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("lector models pull reader lector-test/absent"),
        "{err}"
    );
}

#[test]
fn a_file_not_matching_its_etag_is_named_and_deleted() {
    let mut repo = reader_repo(SHA_OK);
    repo.wrong_etag = vec!["tokenizer.json".into()];
    let server = HubServer::start(vec![("lector-test/tampered", repo)]);
    let cache = tempfile::tempdir().unwrap();
    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/tampered"],
        &[],
    );
    let (_, err) = text(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("tokenizer.json") && err.contains("sha256"),
        "{err}"
    );
    let snapshot = cache
        .path()
        .join("hub/lector-test--tampered/snapshots")
        .join(SHA_OK);
    assert!(!snapshot.join("tokenizer.json").exists());
    assert!(!snapshot.join("tokenizer.json.incomplete").exists());
    assert!(!cache
        .path()
        .join("hub/lector-test--tampered/refs/main")
        .exists());
    // Not cached, so offline it is refused.
    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/tampered"],
        &[("HF_HUB_OFFLINE", "1")],
    );
    assert!(!out.status.success());
}

#[test]
fn a_private_repo_needs_hf_token_which_is_never_shown_nor_sent_to_the_cdn() {
    let mut repo = reader_repo(SHA_OK);
    repo.private = true;
    let server = HubServer::start(vec![("lector-test/private", repo)]);
    let cache = tempfile::tempdir().unwrap();
    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/private"],
        &[],
    );
    let (stdout, err) = text(&out);
    assert!(!out.status.success());
    assert!(err.contains("401") && err.contains("HF_TOKEN"), "{err}");
    assert!(!stdout.contains(TOKEN));

    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/private@main"],
        &[("HF_TOKEN", TOKEN)],
    );
    let (stdout, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(!stdout.contains(TOKEN) && !err.contains(TOKEN));
    let log = server.log();
    assert!(log
        .iter()
        .any(|(o, _, a, _)| o == "hub" && a.as_deref() == Some(&format!("Bearer {TOKEN}"))));
    assert!(
        log.iter().any(|(o, _, _, _)| o == "cdn"),
        "the weights came from the CDN"
    );
    assert!(
        log.iter().all(|(o, _, a, _)| o != "cdn" || a.is_none()),
        "the token went to another origin: {log:?}"
    );
}

#[test]
fn a_checkpoint_with_only_pickle_weights_is_refused_before_any_download() {
    let repo = Repo {
        sha: SHA_OK.into(),
        files: [
            ("config.json", &br#"{"model_type": "bert"}"#[..]),
            ("pytorch_model.bin", b"not loaded"),
            ("tokenizer.json", b"{}"),
        ]
        .into_iter()
        .map(|(n, b)| (n.to_string(), Arc::new(b.to_vec())))
        .collect(),
        private: false,
        wrong_etag: vec![],
        break_once: vec![],
        bad_range: false,
    };
    let server = HubServer::start(vec![("lector-test/pickle", repo)]);
    let cache = tempfile::tempdir().unwrap();
    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/pickle"],
        &[],
    );
    let (_, err) = text(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("pickle") && err.contains("model.safetensors"),
        "{err}"
    );
    assert!(
        server
            .log()
            .iter()
            .all(|(_, p, _, _)| p.starts_with("/api/")),
        "nothing but the revision was requested"
    );
}

fn generator_repo(files: &[(&str, &[u8])]) -> Repo {
    Repo {
        sha: SHA_OK.into(),
        files: files
            .iter()
            .map(|(n, b)| (n.to_string(), Arc::new(b.to_vec())))
            .collect(),
        private: false,
        wrong_etag: vec![],
        break_once: vec![],
        bad_range: false,
    }
}

#[test]
fn a_file_name_from_the_hub_that_leaves_the_snapshot_is_refused_before_any_download() {
    for name in ["../../../evil.gguf", "/tmp/lector-evil.gguf"] {
        let server = HubServer::start(vec![(
            "lector-test/gguf",
            generator_repo(&[(name, b"GGUF written outside the cache")]),
        )]);
        let cache = tempfile::tempdir().unwrap();
        let out = pull(
            &server,
            cache.path(),
            &["generator", "lector-test/gguf"],
            &[],
        );
        let (_, err) = text(&out);
        assert!(!out.status.success());
        assert!(
            err.contains("not a plain relative path inside the snapshot"),
            "{err}"
        );
        assert!(
            server
                .log()
                .iter()
                .all(|(_, p, _, _)| p.starts_with("/api/")),
            "nothing but the revision was requested: {:?}",
            server.log()
        );
        assert!(!cache.path().join("evil.gguf").exists());
        assert!(!Path::new("/tmp/lector-evil.gguf").exists());
    }
}

#[test]
fn a_missing_repository_is_named_as_the_hub_says_and_leaves_no_cache_folder() {
    let server = HubServer::start(vec![]);
    let cache = tempfile::tempdir().unwrap();
    for env in [&[][..], &[("HF_TOKEN", TOKEN)][..]] {
        let out = pull(
            &server,
            cache.path(),
            &["reader", "lector-test/absent"],
            env,
        );
        let (_, err) = text(&out);
        assert!(!out.status.success());
        assert!(
            err.contains("RepoNotFound") && err.contains("no repository lector-test/absent"),
            "{err}"
        );
        assert!(
            !err.contains("private or gated") && !err.contains("sent and refused"),
            "{err}"
        );
        assert!(!err.contains(TOKEN));
        assert!(
            !cache.path().join("hub/lector-test--absent").exists(),
            "a failed pull left its folder"
        );
    }
}

#[test]
fn a_branch_is_pulled_again_when_it_moved_and_a_commit_never_is() {
    const SHA_NEXT: &str = "2222222222222222222222222222222222222222";
    let server = HubServer::start(vec![("lector-test/moving", reader_repo(SHA_OK))]);
    let cache = tempfile::tempdir().unwrap();
    let repo_dir = cache.path().join("hub/lector-test--moving");
    let pulled = |args: &[&str]| {
        let out = pull(&server, cache.path(), args, &[]);
        let (stdout, err) = text(&out);
        assert!(out.status.success(), "{err}");
        stdout
    };
    pulled(&["reader", "lector-test/moving"]);
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("refs/main")).unwrap(),
        SHA_OK
    );

    // `main` moves on the hub: the next pull asks, and fetches the new commit.
    server
        .state
        .lock()
        .unwrap()
        .repos
        .get_mut("lector-test/moving")
        .unwrap()
        .sha = SHA_NEXT.into();
    let stdout = pulled(&["reader", "lector-test/moving"]);
    let next = repo_dir.join("snapshots").join(SHA_NEXT);
    assert!(stdout.contains(&next.display().to_string()), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("refs/main")).unwrap(),
        SHA_NEXT
    );
    assert!(next.join("model.safetensors").is_file());
    let leftovers: Vec<_> = std::fs::read_dir(repo_dir.join("refs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["main"], "the ref is written through a rename");

    // Unmoved, it asks for the revision only; a commit is not asked for at all.
    let requests = server.log().len();
    pulled(&["reader", "lector-test/moving"]);
    let log = server.log();
    assert!(
        log[requests..]
            .iter()
            .all(|(_, p, _, _)| p.starts_with("/api/")),
        "{log:?}"
    );
    let requests = log.len();
    pulled(&["reader", &format!("lector-test/moving@{SHA_OK}")]);
    assert_eq!(server.log().len(), requests);
}

#[test]
fn a_pull_for_another_role_fetches_the_files_that_role_needs() {
    let mut repo = reader_repo(SHA_OK);
    repo.files.insert(
        "1_Pooling/config.json".into(),
        Arc::new(br#"{"pooling_mode_mean_tokens": true}"#.to_vec()),
    );
    let server = HubServer::start(vec![("lector-test/both", repo)]);
    let cache = tempfile::tempdir().unwrap();
    let snapshot = cache
        .path()
        .join("hub/lector-test--both/snapshots")
        .join(SHA_OK);
    let out = pull(&server, cache.path(), &["reader", "lector-test/both"], &[]);
    assert!(out.status.success(), "{}", text(&out).1);
    assert!(!snapshot.join("1_Pooling/config.json").exists());

    let requests = server.log().len();
    let out = pull(
        &server,
        cache.path(),
        &["embedder", "lector-test/both"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out).1);
    assert!(snapshot.join("1_Pooling/config.json").is_file());
    let fetched: Vec<String> = server.log()[requests..]
        .iter()
        .filter(|(_, p, _, _)| !p.starts_with("/api/"))
        .map(|(_, p, _, _)| p.clone())
        .collect();
    assert_eq!(
        fetched,
        [format!(
            "/lector-test/both/resolve/{SHA_OK}/1_Pooling/config.json"
        )],
        "only the embedder's own file"
    );
}

#[test]
fn a_resumed_reply_that_starts_elsewhere_is_not_appended() {
    let mut repo = reader_repo(SHA_OK);
    repo.break_once = vec!["tokenizer.json".into()];
    repo.bad_range = true;
    let server = HubServer::start(vec![("lector-test/ranges", repo)]);
    let cache = tempfile::tempdir().unwrap();
    let out = pull(
        &server,
        cache.path(),
        &["reader", "lector-test/ranges"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out).1);
    let snapshot = cache
        .path()
        .join("hub/lector-test--ranges/snapshots")
        .join(SHA_OK);
    assert_eq!(
        std::fs::read(snapshot.join("tokenizer.json")).unwrap(),
        std::fs::read(shipped_reader().join("tokenizer.json")).unwrap()
    );
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lector-models/tests/fixtures")
        .join(name)
}

/// The float32 matrix of a `.npy` file written by `lector models embed`.
fn npy_rows(path: &Path, dim: usize) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).unwrap();
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect::<Vec<f32>>()
        .chunks(dim)
        .map(<[f32]>::to_vec)
        .collect()
}

#[test]
fn embedders_pulled_from_the_hub_pool_as_their_sentence_transformers_files_say() {
    let files = [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.txt",
        "modules.json",
        "1_Pooling/config.json",
        "config_sentence_transformers.json",
    ];
    let repo = |name: &str| Repo {
        sha: SHA_OK.into(),
        files: files_of(&fixture(name), &files),
        private: false,
        wrong_etag: vec![],
        break_once: vec![],
        bad_range: false,
    };
    let server = HubServer::start(vec![
        ("lector-test/embed-cls", repo("tiny-embed-cls")),
        ("lector-test/embed-mean", repo("tiny-embed-mean")),
    ]);
    let cache = tempfile::tempdir().unwrap();
    for (name, repo, column) in [
        ("tiny-embed-cls", "lector-test/embed-cls", "passages"),
        ("tiny-embed-mean", "lector-test/embed-mean", "embeddings"),
    ] {
        let out = pull(&server, cache.path(), &["embedder", repo], &[]);
        assert!(out.status.success(), "{}", text(&out).1);
        let expected: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(name).join("expected.json")).unwrap(),
        )
        .unwrap();
        let texts: Vec<&str> = expected["texts"].as_array().unwrap()[..3]
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let input = cache.path().join("texts.txt");
        std::fs::write(&input, texts.join("\n") + "\n").unwrap();
        let vectors = cache.path().join(format!("{name}.npy"));
        let out = Command::new(env!("CARGO_BIN_EXE_lector"))
            .args(["models", "embed"])
            .arg(&input)
            .arg("--embedder")
            .arg(repo)
            .arg("--out")
            .arg(&vectors)
            .env("LECTOR_CACHE_DIR", cache.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out).1);
        let ours = npy_rows(&vectors, 32);
        for (i, want) in expected[column].as_array().unwrap()[..3].iter().enumerate() {
            let want: Vec<f32> = want
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            let worst = ours[i]
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-4, "{repo}: text {i} differs by {worst}");
        }
    }
}

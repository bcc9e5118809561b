//! Pulling checkpoints from a Hugging Face-compatible hub, with the hub's own protocol.
//!
//! - `$HF_ENDPOINT` is the hub's base URL (default `https://huggingface.co`); `$HF_TOKEN` is sent
//!   as `Authorization: Bearer` to that host only (never to a host a download redirects to, never
//!   printed); `$HF_HUB_OFFLINE=1` uses only what is cached.
//! - `GET {endpoint}/api/models/{repo}/revision/{revision}` gives the commit (`sha`) and the
//!   files (`siblings[].rfilename`); each file is `GET {endpoint}/{repo}/resolve/{sha}/{file}`,
//!   redirects followed by hand, verified against `X-Linked-Etag` (LFS: sha256) or `ETag`
//!   (64 hex: sha256; else a git blob sha1, checked as a size against `Content-Length`).
//! - Downloads go to `<file>.incomplete` and resume with `Range: bytes=N-`.
//! - Cache: `<cache_root>/hub/<org>--<name>/snapshots/<sha>/<files>` and
//!   `.../refs/<revision>` holding the sha; `.../.lock` is locked while a pull runs.

use crate::error::{io_err, Error, Result};
use crate::registry::cache_root;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default hub.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// What the pulled checkpoint will be used as; decides which files are fetched and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Reader,
    Embedder,
    Reranker,
    /// A GGUF repository for the generator.
    Generator,
}

impl Role {
    const ALL: [Role; 4] = [
        Role::Reader,
        Role::Embedder,
        Role::Reranker,
        Role::Generator,
    ];

    /// The role named `name` (`reader`, `embedder`, `reranker`, `generator`).
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Embedder => "embedder",
            Role::Reranker => "reranker",
            Role::Generator => "generator",
        }
    }
}

/// Encoders lector implements (`config.json` `model_type`).
pub const SUPPORTED_MODEL_TYPES: [&str; 4] = ["bert", "distilbert", "roberta", "xlm-roberta"];

/// Files fetched for a transformer checkpoint when the repository has them.
const ENCODER_FILES: [&str; 6] = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
];
/// Added for the embedder (sentence-transformers' description: the modules, the pooling, the
/// prompts), which decides how its vectors are made.
const EMBEDDER_FILES: [&str; 4] = [
    "modules.json",
    "1_Pooling/config.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
];

/// A repository and revision: `org/name[@revision]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoRef {
    pub repo: String,
    pub revision: String,
}

impl RepoRef {
    /// Parses `org/name[@revision]` (revision `main` when absent).
    pub fn parse(spec: &str) -> Result<Self> {
        let (repo, revision) = match spec.split_once('@') {
            Some((repo, rev)) => (repo, rev),
            None => (spec, "main"),
        };
        let valid_part = |p: &str| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        let parts: Vec<&str> = repo.split('/').collect();
        if parts.len() != 2 || !parts.iter().all(|p| valid_part(p)) {
            return Err(Error::Fetch(format!(
                "{spec:?} is not a hub repository: expected ORG/NAME[@REVISION]"
            )));
        }
        if revision.is_empty()
            || revision.contains("..")
            || revision.starts_with('/')
            || revision.chars().any(|c| c.is_control() || c == '\\')
        {
            return Err(Error::Fetch(format!("{spec:?}: invalid revision")));
        }
        Ok(Self {
            repo: repo.to_string(),
            revision: revision.to_string(),
        })
    }

    /// `<cache_root>/hub/<org>--<name>`.
    pub fn cache_dir(&self) -> Result<PathBuf> {
        Ok(cache_root()?.join("hub").join(self.repo.replace('/', "--")))
    }
}

impl std::fmt::Display for RepoRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.repo, self.revision)
    }
}

/// Progress of one file: its name, bytes done, total bytes when known.
pub type Progress<'a> = &'a mut dyn FnMut(&str, u64, Option<u64>);

/// Options of a pull.
#[derive(Debug, Clone)]
pub struct Hub {
    pub endpoint: String,
    pub token: Option<String>,
    pub offline: bool,
}

impl Hub {
    /// From `$HF_ENDPOINT`, `$HF_TOKEN` and `$HF_HUB_OFFLINE`.
    pub fn from_env() -> Self {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .filter(|e| !e.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let token = std::env::var("HF_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty());
        let offline = std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        });
        Self {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token,
            offline,
        }
    }
}

/// The cached snapshot of `org/name[@revision]` (revision `main` when absent), if a pull for
/// `role` completed it (a reader's pull lacks an embedder's pooling files); `None` for anything
/// else (not a repository spec, not cached, pulled for another role).
pub fn cached_snapshot(repo_and_revision: &str, role: Role) -> Option<PathBuf> {
    let spec = RepoRef::parse(repo_and_revision).ok()?;
    let dir = spec.cache_dir().ok()?;
    snapshot_in(&dir, &sha_of(&dir, &spec.revision)?, role)
}

/// `ORG/NAME@COMMIT` when `dir` is a snapshot folder of the hub cache
/// (`hub/ORG--NAME/snapshots/COMMIT`), the name a pulled model is known by; `None` otherwise.
pub fn snapshot_name(dir: &Path) -> Option<String> {
    let commit = dir.file_name()?.to_str()?;
    let snapshots = dir.parent()?;
    let repo = snapshots.parent()?;
    let in_hub = repo.parent()?.file_name()? == "hub";
    let (org, name) = repo.file_name()?.to_str()?.split_once("--")?;
    (is_commit(commit) && snapshots.file_name()? == "snapshots" && in_hub)
        .then(|| format!("{org}/{name}@{commit}"))
}

fn is_commit(rev: &str) -> bool {
    rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit())
}

/// Written into a snapshot once every file of a pull is verified (not a hub file): the roles
/// pulled into it, one per line.
const COMPLETE_MARKER: &str = ".lector-complete";

/// The commit `revision` names: itself when it is one, else what `refs/<revision>` holds.
fn sha_of(repo_dir: &Path, revision: &str) -> Option<String> {
    let sha = if is_commit(revision) {
        revision.to_ascii_lowercase()
    } else {
        std::fs::read_to_string(repo_dir.join("refs").join(revision))
            .ok()?
            .trim()
            .to_string()
    };
    is_commit(&sha).then_some(sha)
}

/// The snapshot of commit `sha` when a pull for `role` completed it.
fn snapshot_in(repo_dir: &Path, sha: &str, role: Role) -> Option<PathBuf> {
    let snapshot = repo_dir.join("snapshots").join(sha);
    completed_roles(&snapshot)?
        .contains(&role)
        .then_some(snapshot)
}

/// The roles whose pulls completed `snapshot` (one name per line of its marker; an empty marker,
/// written before roles were recorded, stands for every role but the embedder, whose pooling
/// files older pulls did not fetch for other roles); `None` when no pull completed it.
fn completed_roles(snapshot: &Path) -> Option<Vec<Role>> {
    let marker = std::fs::read_to_string(snapshot.join(COMPLETE_MARKER)).ok()?;
    if marker.trim().is_empty() {
        return Some(vec![Role::Reader, Role::Reranker, Role::Generator]);
    }
    Some(marker.lines().filter_map(Role::from_name).collect())
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader sees the old
/// content or the new, never a part.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temporary, bytes).map_err(io_err(&temporary))?;
    std::fs::rename(&temporary, path).map_err(io_err(path))
}

/// Whether a file name the hub lists is a plain relative path (`1_Pooling/config.json`): no
/// `..`, no root, no empty or `.` part, no backslash or control character. Anything else could
/// put a download outside its snapshot.
fn is_plain_relative(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 1024
        && !name
            .chars()
            .any(|c| c.is_control() || c == '\\' || c == ':')
        && name
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// What the hub says about a revision.
#[derive(Debug, serde::Deserialize)]
struct RevisionInfo {
    sha: String,
    #[serde(default)]
    siblings: Vec<Sibling>,
}

#[derive(Debug, serde::Deserialize)]
struct Sibling {
    rfilename: String,
}

/// Pulls `spec` for `role` into the cache and returns its snapshot directory. `gguf_file` picks
/// the generator's file when the repository has several. Cached snapshots are returned without
/// touching the network.
pub fn pull(
    hub: &Hub,
    spec: &RepoRef,
    role: Role,
    gguf_file: Option<&str>,
    progress: Progress<'_>,
) -> Result<PathBuf> {
    let repo_dir = spec.cache_dir()?;
    let cached = sha_of(&repo_dir, &spec.revision)
        .and_then(|sha| snapshot_in(&repo_dir, &sha, role))
        .filter(|snapshot| gguf_file.is_none_or(|file| snapshot.join(file).is_file()));
    if let Some(snapshot) = &cached {
        // A commit never changes; a branch or tag is asked again, unless the hub is not to be
        // (or cannot be) reached.
        if is_commit(&spec.revision) || hub.offline {
            return Ok(snapshot.clone());
        }
    }
    if hub.offline {
        return Err(Error::Fetch(format!(
            "{spec} is not in the cache ({}) and HF_HUB_OFFLINE is set: pull it without HF_HUB_OFFLINE first",
            repo_dir.display()
        )));
    }
    let existed = repo_dir.exists();
    std::fs::create_dir_all(&repo_dir).map_err(io_err(&repo_dir))?;
    let pulled = pull_locked(hub, spec, role, gguf_file, &repo_dir, cached, progress);
    if pulled.is_err() && !existed {
        // Nothing worth keeping (a partial download is kept for the next try to resume).
        remove_empty_dirs(&repo_dir);
    }
    pulled
}

/// The rest of [`pull`], under the repository's lock.
fn pull_locked(
    hub: &Hub,
    spec: &RepoRef,
    role: Role,
    gguf_file: Option<&str>,
    repo_dir: &Path,
    cached: Option<PathBuf>,
    progress: Progress<'_>,
) -> Result<PathBuf> {
    let lock_path = repo_dir.join(".lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_err(&lock_path))?;
    lock.lock().map_err(io_err(&lock_path))?;
    let client = Client::new(hub);
    let info = match client.revision(spec) {
        Ok(info) => info,
        // The cached snapshot of a branch serves while the hub is unreachable, as Hugging Face's
        // own client does; a refusal (HTTP status) is reported.
        Err(Failed::Unreached(_)) if cached.is_some() => return Ok(cached.expect("checked")),
        Err(Failed::Unreached(err) | Failed::Answered(err)) => return Err(err),
    };
    if !is_commit(&info.sha) {
        return Err(Error::Fetch(format!(
            "{spec}: the hub answered an invalid commit {:?}",
            info.sha
        )));
    }
    let sha = info.sha.to_ascii_lowercase();
    let snapshot = repo_dir.join("snapshots").join(&sha);
    // Another pull may have completed it while this one waited, or the branch has not moved.
    let done = snapshot_in(repo_dir, &sha, role)
        .filter(|snapshot| gguf_file.is_none_or(|file| snapshot.join(file).is_file()));
    if done.is_none() {
        let files: Vec<&str> = info.siblings.iter().map(|s| s.rfilename.as_str()).collect();
        let wanted = select_files(spec, role, &files, gguf_file)?;
        if let Some(bad) = wanted.iter().find(|file| !is_plain_relative(file)) {
            return Err(Error::Fetch(format!(
                "{spec}: the hub lists the file {bad:?}, which is not a plain relative path inside the snapshot; refused"
            )));
        }
        std::fs::create_dir_all(&snapshot).map_err(io_err(&snapshot))?;
        let roles = completed_roles(&snapshot).unwrap_or_default();
        for file in &wanted {
            let target = snapshot.join(file);
            // Files of a completed pull for another role were verified then.
            if roles.is_empty() || !target.is_file() {
                client.download(spec, &sha, file, &target, progress)?;
            }
            if *file == "config.json" && role != Role::Generator {
                check_model_type(spec, &target)?;
            }
        }
        let mut names: Vec<&str> = roles.iter().map(|r| r.name()).collect();
        names.push(role.name());
        write_atomically(&snapshot.join(COMPLETE_MARKER), names.join("\n").as_bytes())?;
    }
    if !is_commit(&spec.revision) {
        let reference = repo_dir.join("refs").join(&spec.revision);
        if let Some(parent) = reference.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        write_atomically(&reference, sha.as_bytes())?;
    }
    drop(lock);
    Ok(snapshot)
}

/// Removes `dir` and the folders under it that hold no file (the lock file aside), deepest
/// first; keeps any folder with a file in it.
fn remove_empty_dirs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_empty_dirs(&entry.path());
        }
    }
    let only_lock = std::fs::read_dir(dir)
        .is_ok_and(|mut entries| entries.all(|e| e.is_ok_and(|e| e.file_name() == ".lock")));
    if only_lock {
        let _ = std::fs::remove_file(dir.join(".lock"));
        let _ = std::fs::remove_dir(dir);
    }
}

/// The files to fetch, or why lector cannot run this checkpoint.
fn select_files<'a>(
    spec: &RepoRef,
    role: Role,
    files: &[&'a str],
    gguf_file: Option<&str>,
) -> Result<Vec<&'a str>> {
    let has = |name: &str| files.contains(&name);
    if role == Role::Generator {
        let ggufs: Vec<&str> = files
            .iter()
            .copied()
            .filter(|f| f.to_ascii_lowercase().ends_with(".gguf"))
            .collect();
        return match (gguf_file, ggufs.as_slice()) {
            (Some(want), _) => ggufs
                .iter()
                .copied()
                .find(|f| *f == want)
                .map(|f| vec![f])
                .ok_or_else(|| {
                    Error::Fetch(format!(
                        "{spec} has no file {want:?} (GGUF files: {})",
                        list(&ggufs)
                    ))
                }),
            (None, []) => Err(Error::Fetch(format!(
                "{spec} has no .gguf file: the generator runs GGUF models"
            ))),
            (None, [one]) => Ok(vec![*one]),
            (None, many) => Err(Error::Fetch(format!(
                "{spec} has several GGUF files; choose one with --file: {}",
                list(many)
            ))),
        };
    }
    if !has("config.json") {
        return Err(Error::Fetch(format!(
            "{spec} cannot be run by lector: it has no config.json"
        )));
    }
    if !has("model.safetensors") {
        let pickles: Vec<&str> = files
            .iter()
            .copied()
            .filter(|f| *f == "pytorch_model.bin" || f.ends_with(".ckpt") || f.ends_with(".pt"))
            .collect();
        return Err(Error::Fetch(if pickles.is_empty() {
            format!("{spec} cannot be run by lector: it has no model.safetensors")
        } else {
            format!(
                "{spec} cannot be run by lector: it has only {} (pickle files are never loaded: lector needs model.safetensors)",
                list(&pickles)
            )
        }));
    }
    if !has("tokenizer.json") {
        return Err(Error::Fetch(format!(
            "{spec} cannot be run by lector: it has no tokenizer.json (lector's models load the fast tokenizer's tokenizer.json)"
        )));
    }
    let extra: &[&str] = if role == Role::Embedder {
        &EMBEDDER_FILES
    } else {
        &[]
    };
    // config.json first: its model_type is checked before the weights are fetched.
    Ok(ENCODER_FILES
        .iter()
        .chain(extra)
        .filter_map(|want| files.iter().copied().find(|f| f == want))
        .collect())
}

fn list(files: &[&str]) -> String {
    files.join(", ")
}

fn check_model_type(spec: &RepoRef, config: &Path) -> Result<()> {
    let text = std::fs::read_to_string(config).map_err(io_err(config))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Config {
        path: config.to_path_buf(),
        message: e.to_string(),
    })?;
    let model_type = value["model_type"].as_str().unwrap_or("");
    if SUPPORTED_MODEL_TYPES.contains(&model_type) {
        return Ok(());
    }
    let snapshot = config.parent().unwrap_or(config);
    let _ = std::fs::remove_dir_all(snapshot);
    Err(Error::Fetch(format!(
        "{spec} cannot be run by lector: config.json model_type {model_type:?} is not one of {}",
        SUPPORTED_MODEL_TYPES.join(", ")
    )))
}

/// Redirects followed per file.
const MAX_REDIRECTS: usize = 5;
/// Attempts per file (a broken connection resumes where it stopped).
const ATTEMPTS: usize = 4;

struct Client<'h> {
    hub: &'h Hub,
    agent: ureq::Agent,
}

/// What the hub said a file is.
#[derive(Debug, Default)]
struct Expected {
    sha256: Option<String>,
    size: Option<u64>,
}

/// Why the hub's answer is missing: it could not be reached (a cached snapshot may serve), or
/// it answered with a refusal or nonsense (reported).
enum Failed {
    Unreached(Error),
    Answered(Error),
}

enum Attempt {
    Done,
    /// The connection broke; what was read is kept in the .incomplete file.
    Broken(String),
}

impl<'h> Client<'h> {
    fn new(hub: &'h Hub) -> Self {
        let agent = ureq::AgentBuilder::new()
            .redirects(0)
            .timeout_connect(Duration::from_secs(30))
            .timeout_read(Duration::from_secs(60))
            .user_agent(concat!("lector/", env!("CARGO_PKG_VERSION")))
            .build();
        Self { hub, agent }
    }

    /// `scheme://host[:port]`, lowercase: where a token may go is decided by the whole origin,
    /// so a token for `https://hub` never goes to `http://hub`.
    fn origin_of(url: &str) -> Option<String> {
        let (scheme, rest) = url.split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        Some(format!("{scheme}://{authority}").to_ascii_lowercase())
    }

    /// A GET to `url`, with the token only when `url` is on the hub's own origin.
    fn get(
        &self,
        url: &str,
        range_from: u64,
    ) -> std::result::Result<ureq::Response, Box<ureq::Error>> {
        let mut request = self.agent.get(url);
        if let Some(token) = &self.hub.token {
            if Self::origin_of(url) == Self::origin_of(&self.hub.endpoint) {
                request = request.set("Authorization", &format!("Bearer {token}"));
            }
        }
        if range_from > 0 {
            request = request.set("Range", &format!("bytes={range_from}-"));
        }
        request.call().map_err(Box::new)
    }

    /// An HTTP refusal, in the hub's own words when it gave them (`X-Error-Code`: the hub
    /// answers 401 `RepoNotFound` for a repository that does not exist as for a private one).
    fn status_error(&self, spec: &RepoRef, what: &str, response: &ureq::Response) -> Error {
        let code = response.status();
        let said = response.header("X-Error-Code").unwrap_or("").trim();
        let token = self.hub.token.is_some();
        let hint = match (said, code, token) {
            ("RepoNotFound", _, false) => format!(
                " (the hub says RepoNotFound: no repository {}, or a private one: then set HF_TOKEN)",
                spec.repo
            ),
            ("RepoNotFound", _, true) => format!(
                " (the hub says RepoNotFound: no repository {}, or HF_TOKEN has no access to it)",
                spec.repo
            ),
            ("RevisionNotFound", _, _) => format!(
                " (the hub says RevisionNotFound: {} has no revision {:?})",
                spec.repo, spec.revision
            ),
            ("EntryNotFound", _, _) => " (the hub says EntryNotFound: no such file)".to_string(),
            ("GatedRepo", _, _) => {
                " (the hub says GatedRepo: accept the repository's terms on the hub, then set HF_TOKEN)"
                    .to_string()
            }
            (_, 401 | 403, false) => {
                " (the repository is private or gated: set HF_TOKEN to an access token)".to_string()
            }
            (_, 401 | 403, true) => {
                " (HF_TOKEN was sent and refused: check it has access)".to_string()
            }
            (_, 404, _) => " (no such repository, revision or file)".to_string(),
            _ => String::new(),
        };
        Error::Fetch(format!("{spec}: {what}: HTTP {code}{hint}"))
    }

    fn transport_error(&self, spec: &RepoRef, what: &str, e: Box<ureq::Error>) -> Failed {
        match *e {
            ureq::Error::Status(_, response) => {
                Failed::Answered(self.status_error(spec, what, &response))
            }
            ureq::Error::Transport(t) => Failed::Unreached(Error::Fetch(format!(
                "{spec}: {what}: cannot reach {}: {t}",
                self.hub.endpoint
            ))),
        }
    }

    fn revision(&self, spec: &RepoRef) -> std::result::Result<RevisionInfo, Failed> {
        let url = format!(
            "{}/api/models/{}/revision/{}",
            self.hub.endpoint,
            spec.repo,
            encode_path(&spec.revision)
        );
        let what = "revision info";
        let response = self
            .get(&url, 0)
            .map_err(|e| self.transport_error(spec, what, e))?;
        if response.status() != 200 {
            return Err(Failed::Answered(self.status_error(spec, what, &response)));
        }
        let answered = |message: String| Failed::Answered(Error::Fetch(message));
        let body = response
            .into_string()
            .map_err(|e| answered(format!("{spec}: {what}: {e}")))?;
        serde_json::from_str(&body)
            .map_err(|e| answered(format!("{spec}: {what}: unexpected answer: {e}")))
    }

    /// Fetches `file` of commit `sha` to `target`, verified; resumes a broken transfer.
    fn download(
        &self,
        spec: &RepoRef,
        sha: &str,
        file: &str,
        target: &Path,
        progress: Progress<'_>,
    ) -> Result<()> {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let partial = PathBuf::from(format!("{}.incomplete", target.display()));
        let url = format!(
            "{}/{}/resolve/{sha}/{}",
            self.hub.endpoint,
            spec.repo,
            encode_path(file)
        );
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            match self.attempt(spec, file, &url, &partial, progress)? {
                (Attempt::Done, expected) => {
                    return self.finish(spec, file, &partial, target, &expected);
                }
                (Attempt::Broken(why), _) => last = why,
            }
        }
        Err(Error::Fetch(format!(
            "{spec}: {file}: download kept failing ({last}); run the pull again to resume"
        )))
    }

    fn attempt(
        &self,
        spec: &RepoRef,
        file: &str,
        url: &str,
        partial: &Path,
        progress: Progress<'_>,
    ) -> Result<(Attempt, Expected)> {
        let have = std::fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
        let mut expected = Expected::default();
        let mut url = url.to_string();
        let mut response = None;
        for hop in 0..=MAX_REDIRECTS {
            let r = match self.get(&url, have).map_err(|e| *e) {
                Ok(r) => r,
                Err(ureq::Error::Status(416, _)) if have > 0 => {
                    // The partial file is not a prefix the server knows: start over.
                    std::fs::remove_file(partial).map_err(io_err(partial))?;
                    return Ok((Attempt::Broken("range not satisfiable".into()), expected));
                }
                Err(ureq::Error::Status(_, response)) => {
                    return Err(self.status_error(spec, file, &response));
                }
                Err(ureq::Error::Transport(t)) => {
                    return Ok((Attempt::Broken(t.to_string()), expected));
                }
            };
            if hop == 0 || (expected.sha256.is_none() && expected.size.is_none()) {
                record_expected(&r, &mut expected);
            }
            if (300..400).contains(&r.status()) {
                let Some(location) = r.header("Location") else {
                    return Err(Error::Fetch(format!(
                        "{spec}: {file}: redirect without a Location"
                    )));
                };
                url = resolve_location(&url, location);
                continue;
            }
            response = Some(r);
            break;
        }
        let Some(response) = response else {
            return Err(Error::Fetch(format!(
                "{spec}: {file}: more than {MAX_REDIRECTS} redirects"
            )));
        };
        let resumed = response.status() == 206 && have > 0;
        if response.status() != 200 && !resumed {
            return Err(self.status_error(spec, file, &response));
        }
        if resumed && range_start(&response) != Some(have) {
            // Bytes from elsewhere in the file would be appended as if they followed: start over.
            std::fs::remove_file(partial).map_err(io_err(partial))?;
            let range = response.header("Content-Range").unwrap_or("none");
            return Ok((
                Attempt::Broken(format!(
                    "asked for bytes from {have}, the reply's Content-Range is {range:?}"
                )),
                expected,
            ));
        }
        let length: Option<u64> = response
            .header("Content-Length")
            .and_then(|v| v.trim().parse().ok());
        let start = if resumed { have } else { 0 };
        let total = expected.size.or(length.map(|l| l + start));
        if expected.size.is_none() {
            expected.size = total;
        }
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(resumed)
            .truncate(!resumed)
            .open(partial)
            .map_err(io_err(partial))?;
        let mut done = start;
        progress(file, done, total);
        let mut reader = response.into_reader();
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            let n = match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    out.flush().map_err(io_err(partial))?;
                    return Ok((Attempt::Broken(e.to_string()), expected));
                }
            };
            out.write_all(&buffer[..n]).map_err(io_err(partial))?;
            done += n as u64;
            progress(file, done, total);
        }
        out.flush().map_err(io_err(partial))?;
        if let Some(total) = total {
            if done < total {
                return Ok((
                    Attempt::Broken(format!("connection closed after {done} of {total} bytes")),
                    expected,
                ));
            }
        }
        Ok((Attempt::Done, expected))
    }

    fn finish(
        &self,
        spec: &RepoRef,
        file: &str,
        partial: &Path,
        target: &Path,
        expected: &Expected,
    ) -> Result<()> {
        let size = std::fs::metadata(partial).map_err(io_err(partial))?.len();
        let fail = |why: String| {
            let _ = std::fs::remove_file(partial);
            let _ = std::fs::remove_file(target);
            Err(Error::Fetch(format!(
                "{spec}: {file}: {why}; the download was deleted"
            )))
        };
        if let Some(want) = expected.size {
            if size != want {
                return fail(format!("{size} bytes, the hub announced {want}"));
            }
        }
        if let Some(want) = &expected.sha256 {
            let actual = sha256_file(partial)?;
            if actual != *want {
                return fail(format!("sha256 {actual}, the hub's ETag says {want}"));
            }
        }
        std::fs::rename(partial, target).map_err(io_err(target))
    }
}

/// Reads the hub's description of the file from a response: `X-Linked-Etag` / `X-Linked-Size`
/// (LFS), else `ETag` (sha256 when 64 hex digits) and `Content-Length` of a 200.
fn record_expected(response: &ureq::Response, expected: &mut Expected) {
    let unquote = |v: &str| {
        v.trim()
            .trim_start_matches("W/")
            .trim_matches('"')
            .to_ascii_lowercase()
    };
    let is_sha256 = |v: &str| v.len() == 64 && v.chars().all(|c| c.is_ascii_hexdigit());
    if let Some(linked) = response.header("X-Linked-Etag").map(unquote) {
        if is_sha256(&linked) {
            expected.sha256 = Some(linked);
        }
        expected.size = response
            .header("X-Linked-Size")
            .and_then(|v| v.trim().parse().ok());
        return;
    }
    let is_redirect = (300..400).contains(&response.status());
    if let Some(etag) = response.header("ETag").map(unquote) {
        if is_sha256(&etag) {
            expected.sha256 = Some(etag);
        }
    }
    if response.status() == 200 && !is_redirect {
        expected.size = response
            .header("Content-Length")
            .and_then(|v| v.trim().parse().ok());
    }
}

/// The first byte of a 206 reply's `Content-Range: bytes FIRST-LAST/TOTAL`.
fn range_start(response: &ureq::Response) -> Option<u64> {
    let range = response.header("Content-Range")?.trim();
    let (first, _) = range.strip_prefix("bytes ")?.split_once('-')?;
    first.trim().parse().ok()
}

fn resolve_location(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(path) = location.strip_prefix('/') {
        format!("{scheme}://{authority}/{path}")
    } else {
        let dir = base.rsplit_once('/').map_or(base, |(d, _)| d);
        format!("{dir}/{location}")
    }
}

/// Percent-encodes what a path segment cannot hold (keeps `/`).
fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buffer).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_folders_are_named_by_repository_and_commit() {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let dir = Path::new("/c/hub/acme--reader/snapshots").join(commit);
        assert_eq!(snapshot_name(&dir), Some(format!("acme/reader@{commit}")));
        for other in [
            Path::new("/c/models/reader-minilm-squad").to_path_buf(),
            Path::new("/c/hub/acme--reader/snapshots/main").to_path_buf(),
            Path::new("/c/elsewhere/acme--reader/snapshots").join(commit),
            Path::new("/c/hub/acme-reader/snapshots").join(commit),
        ] {
            assert_eq!(snapshot_name(&other), None, "{}", other.display());
        }
    }

    #[test]
    fn repo_specs_parse_and_bad_ones_are_refused() {
        let r = RepoRef::parse("org/name").unwrap();
        assert_eq!((r.repo.as_str(), r.revision.as_str()), ("org/name", "main"));
        let r = RepoRef::parse("org/name@v1.0").unwrap();
        assert_eq!(r.revision, "v1.0");
        for bad in ["name", "a/b/c", "../x", "org/..", "org/na me", "org/name@"] {
            assert!(RepoRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn files_are_chosen_and_unrunnable_checkpoints_refused() {
        let spec = RepoRef::parse("o/n").unwrap();
        let files = [
            "config.json",
            "model.safetensors",
            "pytorch_model.bin",
            "tokenizer.json",
            "vocab.txt",
            "modules.json",
            "README.md",
        ];
        assert_eq!(
            select_files(&spec, Role::Reader, &files, None).unwrap(),
            [
                "config.json",
                "model.safetensors",
                "tokenizer.json",
                "vocab.txt"
            ]
        );
        assert!(select_files(&spec, Role::Embedder, &files, None)
            .unwrap()
            .contains(&"modules.json"));
        let pickle = ["config.json", "pytorch_model.bin", "tokenizer.json"];
        let err = select_files(&spec, Role::Reader, &pickle, None).unwrap_err();
        assert!(err.to_string().contains("pickle"), "{err}");
        let err = select_files(&spec, Role::Reader, &["model.safetensors"], None).unwrap_err();
        assert!(err.to_string().contains("config.json"), "{err}");
        let err = select_files(
            &spec,
            Role::Reader,
            &["config.json", "model.safetensors"],
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("tokenizer.json"), "{err}");
        let ggufs = ["a.Q4.gguf", "a.Q8.gguf"];
        assert!(select_files(&spec, Role::Generator, &ggufs, None).is_err());
        assert_eq!(
            select_files(&spec, Role::Generator, &ggufs, Some("a.Q8.gguf")).unwrap(),
            ["a.Q8.gguf"]
        );
    }

    #[test]
    fn locations_resolve_against_the_request() {
        assert_eq!(
            resolve_location("http://h:1/a/b/c", "/x/y"),
            "http://h:1/x/y"
        );
        assert_eq!(resolve_location("http://h:1/a/b", "c"), "http://h:1/a/c");
        assert_eq!(
            resolve_location("http://h:1/a", "https://cdn/z"),
            "https://cdn/z"
        );
        assert_eq!(
            Client::origin_of("http://H:1/a?b"),
            Some("http://h:1".into())
        );
        // The token's origin is the scheme too: https://hub's token never goes to http://hub.
        assert_ne!(
            Client::origin_of("http://hub/x"),
            Client::origin_of("https://hub/x")
        );
    }

    #[test]
    fn only_plain_relative_names_may_be_downloaded() {
        for good in ["model.gguf", "1_Pooling/config.json", "a/b.c/d..gguf"] {
            assert!(is_plain_relative(good), "{good}");
        }
        for bad in [
            "../evil.gguf",
            "a/../../evil.gguf",
            "/etc/evil.gguf",
            "a//b.gguf",
            "./a.gguf",
            "a\\..\\b.gguf",
            "C:evil.gguf",
            "",
            "a\nb.gguf",
        ] {
            assert!(!is_plain_relative(bad), "{bad:?}");
        }
    }
}

//! Named keys with scopes and tenants, read from a key file that the server re-reads when it
//! changes (rotation without a restart).
//!
//! ```json
//! {"keys": [
//!   {"name": "ops", "sha256": "<hex digest of the key>", "scopes": ["ask", "write", "admin"]},
//!   {"name": "acme-app", "sha256": "<hex digest>", "scopes": ["ask", "write"], "tenant": "acme"}
//! ]}
//! ```
//!
//! The file holds only SHA-256 digests: a request's key is hashed and compared with every entry
//! in constant time. Scopes: `ask` (ask, search, chat, feedback, reading documents), `write`
//! (adding and replacing documents), `admin` (deleting documents, labelling, metrics). A key
//! with a `tenant` sees and changes only that tenant's documents: the server adds the filter
//! `tenant == "<tenant>"` to every search, stores the documents it writes under the id
//! `<tenant>/<id>` with the metadata field `tenant` set, and answers any other document as if it
//! did not exist; its asks are logged with the tenant, and labelling shows it only those. Metrics
//! count every tenant's traffic, so they need a key without a tenant.

use crate::error::Error;
use lector_index::filter::{CompareOp, Field};
use lector_index::Filter;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime};
use subtle::ConstantTimeEq;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Ask, search, chat, send feedback, read documents.
    Ask,
    /// Add and replace documents.
    Write,
    /// Delete documents, label, read metrics.
    Admin,
}

impl Scope {
    /// The scope's name in the key file.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Ask => "ask",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }
}

/// Who a request comes from: the key that authenticated it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The key's name (never the key).
    pub name: String,
    /// What it may do.
    pub scopes: Vec<Scope>,
    /// The tenant it is confined to.
    pub tenant: Option<String>,
}

impl Principal {
    /// The single `--api-key`: every scope, no tenant.
    pub fn api_key() -> Self {
        Principal {
            name: "api-key".into(),
            scopes: vec![Scope::Ask, Scope::Write, Scope::Admin],
            tenant: None,
        }
    }

    /// Whether the key has `scope`.
    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// The filter every search by this key gets: `tenant == "<tenant>"`.
    pub fn filter(&self) -> Option<Filter> {
        self.tenant.as_deref().map(tenant_filter)
    }

    /// The stored id of document `id` as this key names it: `<tenant>/<id>` for a tenant's key
    /// (an id already in that form is kept), `id` otherwise.
    pub fn document_id(&self, id: &str) -> String {
        match &self.tenant {
            Some(tenant) if !id.starts_with(&format!("{tenant}/")) => format!("{tenant}/{id}"),
            _ => id.to_string(),
        }
    }
}

/// The documents of `tenant`: `tenant == "<tenant>"`.
pub fn tenant_filter(tenant: &str) -> Filter {
    Filter::Compare {
        field: Field::Meta(vec![TENANT_FIELD.into()]),
        op: CompareOp::Eq,
        value: tenant.into(),
    }
}

/// The metadata field that holds a document's tenant.
pub const TENANT_FIELD: &str = "tenant";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKeys {
    keys: Vec<FileKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKey {
    name: String,
    sha256: String,
    scopes: Vec<Scope>,
    #[serde(default)]
    tenant: Option<String>,
}

struct Entry {
    digest: [u8; 32],
    principal: Principal,
}

struct Loaded {
    /// What `stat` said of the file read, to notice a new version at once.
    stamp: Option<Stamp>,
    /// The SHA-256 of the bytes read: a change the stamp misses (same size, within the clock's
    /// granularity, times set back) is noticed by reading again every [`RECHECK`].
    content: [u8; 32],
    checked: Instant,
    /// The keys in force; `Err` (every request refused) while the file cannot be read or is
    /// invalid, with the reason, which goes to the server's log once.
    entries: Result<Vec<Entry>, String>,
}

/// How often the key file is read again though `stat` says nothing changed.
const RECHECK: Duration = Duration::from_secs(2);

/// What the file's metadata says: modification and change times, length and inode (a file
/// replaced through a rename has a new inode; the change time cannot be set back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    changed: (i64, i64),
    len: u64,
    inode: u64,
}

/// The key file cannot be used: every request is refused until it can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeysUnavailable;

/// The key file, re-read when it changes. When it is deleted, cannot be read or is invalid,
/// every key is refused (fail closed) until a valid version is back; the reason is logged.
pub struct KeyFile {
    path: PathBuf,
    loaded: RwLock<Loaded>,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyFile({})", self.path.display())
    }
}

impl KeyFile {
    /// Reads the key file; errors name the file and what is wrong in it.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let stamp = stamp(path);
        let bytes = read_bytes(path)?;
        let entries = parse_entries(path, &bytes)?;
        Ok(KeyFile {
            path: path.to_path_buf(),
            loaded: RwLock::new(Loaded {
                stamp,
                content: sha256_bytes(&bytes),
                checked: Instant::now(),
                entries: Ok(entries),
            }),
        })
    }

    /// The principal whose key is `given` (`None`: no such key), reading the file again first
    /// if it changed; `Err` while the file cannot be used.
    pub fn principal(&self, given: &str) -> Result<Option<Principal>, KeysUnavailable> {
        self.reload_if_changed();
        let digest = sha256(given);
        let loaded = self.loaded.read().unwrap_or_else(|e| e.into_inner());
        let entries = loaded.entries.as_ref().map_err(|_| KeysUnavailable)?;
        // Every entry is compared, so the time taken does not say which one matched.
        let mut found = None;
        for entry in entries {
            if bool::from(entry.digest.ct_eq(&digest)) {
                found = Some(entry.principal.clone());
            }
        }
        Ok(found)
    }

    fn reload_if_changed(&self) {
        let now = stamp(&self.path);
        {
            let loaded = self.loaded.read().unwrap_or_else(|e| e.into_inner());
            if now.is_some() && now == loaded.stamp && loaded.checked.elapsed() < RECHECK {
                return;
            }
        }
        let mut loaded = self.loaded.write().unwrap_or_else(|e| e.into_inner());
        loaded.checked = Instant::now();
        let read = read_bytes(&self.path);
        loaded.stamp = now;
        // Touched or re-saved with the same keys: nothing to reload.
        if read
            .as_ref()
            .is_ok_and(|bytes| sha256_bytes(bytes) == loaded.content)
        {
            return;
        }
        let entries = read.and_then(|bytes| {
            loaded.content = sha256_bytes(&bytes);
            parse_entries(&self.path, &bytes)
        });
        match entries {
            Ok(entries) => {
                eprintln!(
                    "key file {} reloaded: {} keys",
                    self.path.display(),
                    entries.len()
                );
                loaded.entries = Ok(entries);
            }
            Err(e) => {
                let reason = e.to_string();
                if loaded.entries.as_ref().err() != Some(&reason) {
                    eprintln!("error: {reason}; every request is refused (503) until the key file is valid again");
                }
                loaded.content = [0; 32];
                loaded.entries = Err(reason);
            }
        }
    }
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: meta.modified().ok(),
        changed: (meta.ctime(), meta.ctime_nsec()),
        len: meta.len(),
        inode: meta.ino(),
    })
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::ApiKey(format!("key file {}: {e}", path.display())))
}

fn sha256_bytes(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn read_entries(path: &Path) -> Result<Vec<Entry>, Error> {
    parse_entries(path, &read_bytes(path)?)
}

fn parse_entries(path: &Path, bytes: &[u8]) -> Result<Vec<Entry>, Error> {
    let fail = |message: String| Error::ApiKey(format!("key file {}: {message}", path.display()));
    let file: FileKeys = serde_json::from_slice(bytes).map_err(|e| fail(e.to_string()))?;
    let mut entries = Vec::with_capacity(file.keys.len());
    for (i, key) in file.keys.into_iter().enumerate() {
        let at = |what: &str| fail(format!("keys[{i}] (`{}`): {what}", key.name));
        let digest =
            decode_hex(&key.sha256).ok_or_else(|| at("`sha256` must be 64 hexadecimal digits"))?;
        if key.name.trim().is_empty() {
            return Err(at("`name` is empty"));
        }
        if key.scopes.is_empty() {
            return Err(at("`scopes` is empty"));
        }
        if let Some(tenant) = &key.tenant {
            let valid = !tenant.is_empty()
                && tenant
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !valid {
                return Err(at("`tenant` must be letters, digits, `-` or `_`"));
            }
        }
        if entries.iter().any(|e: &Entry| e.digest == digest) {
            return Err(at("the same key is listed twice"));
        }
        entries.push(Entry {
            digest,
            principal: Principal {
                name: key.name,
                scopes: key.scopes,
                tenant: key.tenant,
            },
        });
    }
    Ok(entries)
}

fn decode_hex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

pub(crate) fn sha256(text: &str) -> [u8; 32] {
    sha256_bytes(text.as_bytes())
}

/// The key file's `sha256` for `key`: its SHA-256 digest in lowercase hexadecimal.
pub fn key_digest(key: &str) -> String {
    sha256(key).iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random key: 32 bytes from the operating system's generator, as 64 hexadecimal digits
/// behind `lk_` (so a leaked one is recognisable in logs and scanners).
pub fn new_key() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::ApiKey(format!("no random bytes from the system: {e}")))?;
    Ok(format!(
        "lk_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// Appends a key named `name` with `scopes` (and `tenant`) to the key file at `path` (created
/// when missing), writing it whole and durably; returns the new key, which is stored only as its
/// digest.
pub fn add_key(
    path: &Path,
    name: &str,
    scopes: &[Scope],
    tenant: Option<&str>,
) -> Result<String, Error> {
    let mut file: serde_json::Value = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| Error::ApiKey(format!("key file {}: {e}", path.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({"keys": []}),
        Err(e) => return Err(Error::ApiKey(format!("key file {}: {e}", path.display()))),
    };
    let key = new_key()?;
    let mut entry = serde_json::json!({"name": name, "sha256": key_digest(&key), "scopes": scopes});
    if let Some(tenant) = tenant {
        entry["tenant"] = tenant.into();
    }
    let keys = file["keys"]
        .as_array_mut()
        .ok_or_else(|| Error::ApiKey(format!("key file {}: no `keys` list", path.display())))?;
    if keys.iter().any(|k| k["name"] == name) {
        return Err(Error::ApiKey(format!(
            "key file {}: a key named `{name}` exists",
            path.display()
        )));
    }
    keys.push(entry);
    let text = serde_json::to_string_pretty(&file).expect("JSON values serialise") + "\n";
    // Checked before it replaces the file: a server re-reading it must never see a broken one.
    let tmp = path.with_extension("tmp-check");
    std::fs::write(&tmp, &text).map_err(|e| Error::ApiKey(format!("{}: {e}", tmp.display())))?;
    let checked = read_entries(&tmp);
    let _ = std::fs::remove_file(&tmp);
    checked?;
    lector_index::write_durably(path, text.as_bytes())
        .map_err(|e| Error::ApiKey(format!("{}: {e}", path.display())))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_by_digest_with_their_scopes_and_tenant() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let ops = add_key(&path, "ops", &[Scope::Ask, Scope::Admin], None).unwrap();
        let acme = add_key(&path, "acme", &[Scope::Ask], Some("acme")).unwrap();
        assert_ne!(ops, acme);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(&ops) && text.contains(&key_digest(&ops)),
            "stored hashed"
        );
        let keys = KeyFile::open(&path).unwrap();
        let found = keys.principal(&acme).unwrap().unwrap();
        assert_eq!(
            (found.name.as_str(), found.tenant.as_deref()),
            ("acme", Some("acme"))
        );
        assert!(found.allows(Scope::Ask) && !found.allows(Scope::Write));
        assert_eq!(found.document_id("x"), "acme/x");
        assert_eq!(found.document_id("acme/x"), "acme/x");
        assert_eq!(keys.principal("lk_not-a-key"), Ok(None));
        assert!(
            add_key(&path, "ops", &[Scope::Ask], None).is_err(),
            "names are unique"
        );
    }

    #[test]
    fn a_deleted_or_broken_key_file_refuses_every_key_until_it_is_valid_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let key = add_key(&path, "ops", &[Scope::Ask], None).unwrap();
        let keys = KeyFile::open(&path).unwrap();
        assert!(keys.principal(&key).unwrap().is_some());
        let valid = std::fs::read(&path).unwrap();

        std::fs::remove_file(&path).unwrap();
        assert_eq!(keys.principal(&key), Err(KeysUnavailable));
        std::fs::write(&path, b"{not json").unwrap();
        assert_eq!(keys.principal(&key), Err(KeysUnavailable));
        std::fs::write(&path, &valid).unwrap();
        assert!(keys.principal(&key).unwrap().is_some());

        // The same length and modification time, other keys: noticed all the same.
        let other = String::from_utf8(valid.clone())
            .unwrap()
            .replace("\"ops\"", "\"xps\"");
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, &other).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        let renamed = keys.principal(&key).unwrap().unwrap();
        assert_eq!(renamed.name, "xps");
    }

    #[test]
    fn a_bad_key_file_names_the_entry_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let digest = key_digest("k");
        for (body, expected) in [
            (
                format!(r#"{{"keys": [{{"name": "a", "sha256": "{digest}", "scopes": []}}]}}"#),
                "keys[0] (`a`): `scopes` is empty",
            ),
            (
                r#"{"keys": [{"name": "a", "sha256": "abc", "scopes": ["ask"]}]}"#.to_string(),
                "`sha256` must be 64",
            ),
            (
                format!(
                    r#"{{"keys": [{{"name": "a", "sha256": "{digest}", "scopes": ["root"]}}]}}"#
                ),
                "unknown variant `root`",
            ),
            (
                format!(
                    r#"{{"keys": [{{"name": "a", "sha256": "{digest}", "scopes": ["ask"], "tenant": "a/b"}}]}}"#
                ),
                "`tenant` must be",
            ),
        ] {
            std::fs::write(&path, body).unwrap();
            let err = KeyFile::open(&path).unwrap_err().to_string();
            assert!(err.contains("keys.json") && err.contains(expected), "{err}");
        }
    }
}

//! lector-redis: lector's document store on the Redis Query Engine (RediSearch 2.10+).
//!
//! lector keeps chunking and embedding (the same passages, offsets and vectors as its embedded
//! index: [`lector_index::docstore`]); Redis keeps the passages, their metadata and vectors, and
//! answers BM25 (`SCORER BM25STD`) and KNN (HNSW, cosine) queries; lector fuses hybrid rankings.
//! [`RedisStore`] is the [`DocumentStore`], [`RedisWriter`] the [`StoreWriter`].
//!
//! # Layout in Redis, for a store named `NAME`
//!
//! - `NAME:p:ID#N`: a hash per passage N of document ID, with the fields a hit needs (`doc`,
//!   `n`, `title`, `text`, offsets, `page`, `section`, `meta`), `body` (the terms BM25 indexes:
//!   title, headings and passage analysed by lector, stemmed and without stopwords, indexed by
//!   Redis as they are) and, in a dense store, `vec`;
//! - `NAME:d:ID`: a hash per document (`hash`: its content digest, `passages`, `date`);
//! - `NAME:docs`: the set of document ids; `NAME:lector`: the store's settings and generation;
//!   `NAME:file:FILE`: a file kept with the store (`calibration.json`);
//! - the search index `NAME` over the `NAME:p:` hashes.
//!
//! Keys are derived from document ids, so writing a document again overwrites it: a failed commit
//! can be retried without duplicates. Commits go out as transactions (`MULTI`/`EXEC`) of at most
//! [`DOCS_PER_TRANSACTION`] documents each.
//!
//! # What differs from the embedded index
//!
//! lector analyses passages and queries itself (tokenizer, stopwords, stemmer) and Redis indexes
//! the resulting terms unstemmed, so both stores count the same terms; Redis scores them with its
//! BM25 (`BM25STD`, k1 = 1.2, b = 0.75 fixed: other values are refused). Its HNSW is approximate
//! even where the embedded index scans exactly. Filters and per-query BM25
//! parameters are refused with a clear error rather than applied differently. README and
//! BENCHMARKS.md measure the ranking difference on BEIR SciFact.
//!
//! Cross-shard search needs the Redis 8 / Redis Enterprise coordinator: run a store on one
//! primary (with replicas for reads) or on such a cluster; lector does no scatter-gather itself.

mod filter;
mod search;
mod url;
mod writer;

pub use url::{is_store_url, StoreUrl, UrlError};
pub use writer::{RedisWriter, DOCS_PER_TRANSACTION};

use lector_index::analysis::Analyzer;
use lector_index::{
    DenseMeta, DocumentStore, Embedder, Error, Hit, IndexSettings, Result, Retriever,
    SearchOptions, StoreCounts,
};
use redis::{Connection, Value};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// The store format this build writes and reads (`NAME:lector` field `format`).
pub const FORMAT: &str = "lector-redis-1";

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Connecting, and each request, give up after this long (then the store is unavailable).
    pub timeout: Duration,
    /// A PEM file of the certificate authority a `rediss://` server's certificate is checked
    /// against, instead of the system's.
    pub ca_cert: Option<PathBuf>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            timeout: Duration::from_secs(5),
            ca_cert: None,
        }
    }
}

/// How passage vectors are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorType {
    /// 4 bytes per dimension.
    Float32,
    /// 2 bytes per dimension (half the RAM; similarity rounded to about 3 digits).
    Float16,
}

impl VectorType {
    fn name(self) -> &'static str {
        match self {
            VectorType::Float32 => "FLOAT32",
            VectorType::Float16 => "FLOAT16",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "FLOAT32" => Some(VectorType::Float32),
            "FLOAT16" => Some(VectorType::Float16),
            _ => None,
        }
    }

    /// `vector` as the little-endian bytes Redis stores.
    fn bytes(self, vector: &[f32]) -> Vec<u8> {
        match self {
            VectorType::Float32 => vector.iter().flat_map(|v| v.to_le_bytes()).collect(),
            VectorType::Float16 => vector
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect(),
        }
    }
}

impl std::str::FromStr for VectorType {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        VectorType::parse(&s.to_ascii_uppercase())
            .ok_or_else(|| format!("unknown vector type `{s}` (float32 or float16)"))
    }
}

/// What a store records about itself in `NAME:lector`.
#[derive(Debug, Clone)]
pub(crate) struct StoreMeta {
    pub settings: IndexSettings,
    pub dense: Option<DenseMeta>,
    pub vector_type: VectorType,
    /// Whether its passages carry the tags filters match ([`filter`]): stores created by
    /// earlier builds do not.
    pub filterable: bool,
}

/// A connection to Redis that is dropped at the first failure and made again at the next
/// request, so a store recovers when the server comes back.
pub(crate) struct Link {
    url: StoreUrl,
    client: redis::Client,
    timeout: Duration,
    connection: Mutex<Option<Connection>>,
}

impl Link {
    pub(crate) fn open(url: &StoreUrl, options: &ConnectOptions) -> Result<Link> {
        let unavailable = |reason: String| Error::Unavailable {
            location: url.to_string(),
            reason,
        };
        let info = url
            .connection_info()
            .map_err(|e| unavailable(e.to_string()))?;
        let client = match &options.ca_cert {
            None => redis::Client::open(info),
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| Error::Io {
                    path: path.clone(),
                    source: e,
                })?;
                redis::Client::build_with_tls(
                    info,
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(pem),
                    },
                )
            }
        }
        .map_err(|e| unavailable(e.to_string()))?;
        let link = Link {
            url: url.clone(),
            client,
            timeout: options.timeout,
            connection: Mutex::new(None),
        };
        link.run(|c| redis::cmd("PING").query::<String>(c))?;
        Ok(link)
    }

    /// Runs `request` on the connection (made first if there is none). A failed connection is
    /// dropped; a server error (a bad command, a missing index) is not a connection failure.
    pub(crate) fn run<T>(
        &self,
        request: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut slot = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(self.connect().map_err(|e| self.failure(&e))?);
        }
        let connection = slot.as_mut().expect("connected above");
        match request(connection) {
            Ok(value) => Ok(value),
            Err(err) => {
                if is_connection_failure(&err) {
                    *slot = None;
                }
                Err(self.failure(&err))
            }
        }
    }

    fn connect(&self) -> redis::RedisResult<Connection> {
        let connection = self.client.get_connection_with_timeout(self.timeout)?;
        connection.set_read_timeout(Some(self.timeout))?;
        connection.set_write_timeout(Some(self.timeout))?;
        Ok(connection)
    }

    fn failure(&self, err: &redis::RedisError) -> Error {
        if is_connection_failure(err) || is_passing(err) {
            Error::Unavailable {
                location: self.url.to_string(),
                reason: err.to_string(),
            }
        } else {
            Error::Config(format!("the Redis store {}: {err}", self.url))
        }
    }

    pub(crate) fn url(&self) -> &StoreUrl {
        &self.url
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A key of this store: `NAME:SUFFIX`.
    pub(crate) fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.url.name())
    }
}

/// `text` as the terms lector's analyser makes of it (its tokenizer, stopwords and stemmer), each
/// with every character RediSearch would split on replaced by `_`: the store indexes these terms
/// and queries with them, so Redis counts exactly the terms the embedded index counts, and no
/// query syntax reaches it.
pub(crate) fn redis_terms(analyzer: &Analyzer, text: &str) -> Vec<String> {
    (analyzer.terms(text).into_iter())
        .map(|term| {
            term.chars()
                .map(|c| {
                    if c.is_alphanumeric() || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        })
        .collect()
}

fn no_store(url: &StoreUrl) -> Error {
    Error::Config(format!(
        "no lector store at {url} (create one with `lector index add PATH --store {url}`)"
    ))
}

/// A server that cannot answer yet, but will: loading its data (a replica's first sync, a
/// restart), or a primary or cluster in failover.
fn is_passing(err: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        err.kind(),
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
        )
    )
}

fn is_connection_failure(err: &redis::RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_unrecoverable_error()
}

/// A lector store in Redis, for searching. Requests from several threads share one connection
/// (one at a time); open one store per worker thread for parallel requests.
pub struct RedisStore {
    link: Link,
    meta: StoreMeta,
    analyzer: Analyzer,
}

impl RedisStore {
    /// Connects to the store at `url`. Fails with [`Error::Unavailable`] naming the URL (never its
    /// password) when Redis cannot be reached, and with a message saying how to create the store
    /// when there is none of that name.
    pub fn open(url: &StoreUrl, options: &ConnectOptions) -> Result<RedisStore> {
        let link = Link::open(url, options)?;
        let meta = writer::read_meta(&link)?.ok_or_else(|| no_store(url))?;
        let analyzer = Analyzer::new(meta.settings.analyzer);
        Ok(RedisStore {
            link,
            meta,
            analyzer,
        })
    }

    /// The store's URL (its Display hides the password).
    pub fn url(&self) -> &StoreUrl {
        self.link.url()
    }

    /// How its vectors are stored.
    pub fn vector_type(&self) -> VectorType {
        self.meta.vector_type
    }

    /// Memory Redis reports in use (`INFO memory`, `used_memory`), in bytes.
    pub fn used_memory(&self) -> Result<u64> {
        let info: String = self
            .link
            .run(|c| redis::cmd("INFO").arg("memory").query(c))?;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| Error::Config(format!("{}: INFO memory has no used_memory", self.url())))
    }
}

impl DocumentStore for RedisStore {
    fn location(&self) -> String {
        self.link.url().to_string()
    }

    fn settings(&self) -> IndexSettings {
        self.meta.settings
    }

    fn dense_meta(&self) -> Option<DenseMeta> {
        self.meta.dense.clone()
    }

    fn generation(&self) -> Result<u64> {
        let key = self.link.key("lector");
        let generation: Option<u64> = self
            .link
            .run(|c| redis::cmd("HGET").arg(&key).arg("generation").query(c))?;
        Ok(generation.unwrap_or(0))
    }

    fn counts(&self) -> Result<StoreCounts> {
        let docs = self.link.key("docs");
        let documents: usize = self.link.run(|c| redis::cmd("SCARD").arg(&docs).query(c))?;
        let info: Value = self
            .link
            .run(|c| redis::cmd("FT.INFO").arg(self.link.url().name()).query(c))?;
        let passages = search::info_field(&info, "num_docs")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok(StoreCounts {
            documents,
            passages,
        })
    }

    fn retriever<'a>(
        &'a self,
        options: &SearchOptions,
        embedder: Option<&'a dyn Embedder>,
    ) -> Result<Box<dyn Retriever + 'a>> {
        search::retriever(self, options, embedder)
    }

    fn passages(&self, id: &str) -> Result<Vec<Hit>> {
        search::document_passages(self, id)
    }

    fn document_date(&self, id: &str) -> Result<Option<String>> {
        let key = writer::document_key(&self.link, id);
        self.link
            .run(|c| redis::cmd("HGET").arg(&key).arg("date").query(c))
    }

    fn titles(&self) -> Result<Vec<(String, String)>> {
        search::titles(self)
    }

    fn read_file(&self, name: &str) -> Result<Option<String>> {
        let key = self.link.key(&format!("file:{name}"));
        self.link.run(|c| redis::cmd("GET").arg(&key).query(c))
    }

    fn write_file(&self, name: &str, text: &str) -> Result<()> {
        let key = self.link.key(&format!("file:{name}"));
        self.link
            .run(|c| redis::cmd("SET").arg(&key).arg(text).query(c))
    }
}

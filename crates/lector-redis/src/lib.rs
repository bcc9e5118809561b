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
//!   `n`, `title`, `text`, offsets, `page`, `section`; `meta` in stores written before it moved
//!   to the document's record), `tags` (filters), `body` (the terms BM25 indexes:
//!   title, headings and passage analysed by lector, stemmed and without stopwords, indexed by
//!   Redis as they are) and, in a dense store, `vec`;
//! - `NAME:d:ID`: a hash per document (`hash`: its content digest, `passages`, `date`, `meta`:
//!   its metadata, once, fetched for the final hits only);
//! - `NAME:docs`: the set of document ids; `NAME:lector`: the store's settings and generation;
//!   `NAME:file:FILE`: a file kept with the store (`calibration.json`);
//! - the search index `NAME` over the `NAME:p:` hashes.
//!
//! Keys are derived from document ids, so writing a document again overwrites it: a failed commit
//! can be retried without duplicates. Commits go out as transactions (`MULTI`/`EXEC`) of at most
//! [`MAX_TRANSACTION_PASSAGES`] passages and [`MAX_TRANSACTION_BYTES`] bytes, each within
//! [`WRITE_TIMEOUT`]; a document's record is written in the transaction of its last passages.
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
pub use writer::{RedisWriter, MAX_TRANSACTION_BYTES, MAX_TRANSACTION_PASSAGES, WRITE_TIMEOUT};

use lector_index::analysis::Analyzer;
use lector_index::{
    DenseMeta, DocumentStore, Embedder, Error, Hit, IndexSettings, Result, Retriever,
    SearchOptions, StoreCounts,
};
use redis::{Connection, Value};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// Connections to Redis for the requests of one store: a few idle connections, each used by one
/// request at a time (the lock is held only to take or return one, never across a connect or a
/// request); a failed connection is dropped and made again at the next request, so a store
/// recovers when the server comes back.
///
/// A server that stops answering (a stopped process, a partition) fails only after the timeout,
/// for every request: so after one timeout, requests fail at once for [`COOL_DOWN`], then one
/// request at a time tries again until one succeeds. A store then answers "unavailable" within
/// one timeout, not one per call of each request.
pub(crate) struct Link {
    url: StoreUrl,
    client: redis::Client,
    timeout: Duration,
    idle: Mutex<Vec<Connection>>,
    outage: Mutex<Option<Outage>>,
}

/// The most idle connections a store keeps (more may be open while as many requests run).
const MAX_IDLE: usize = 16;

/// How long a store's requests fail at once (unavailable) after Redis did not answer one within
/// the timeout; then one request at a time tries again.
pub const COOL_DOWN: Duration = Duration::from_secs(1);

/// Redis did not answer within the timeout at `since`.
struct Outage {
    since: Instant,
    reason: String,
    /// A request is trying Redis again now.
    probing: bool,
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
            idle: Mutex::new(Vec::new()),
            outage: Mutex::new(None),
        };
        link.run(|c| redis::cmd("PING").query::<String>(c))?;
        Ok(link)
    }

    /// Runs `request` on a connection (made first if none is idle). A failed connection is
    /// dropped; a server error (a bad command, a missing index) is not a connection failure.
    pub(crate) fn run<T>(
        &self,
        request: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let probing = self.admit()?;
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut connection = match taken {
            Some(connection) => connection,
            None => self.connect().map_err(|e| self.failed(&e, probing))?,
        };
        match request(&mut connection) {
            Ok(value) => {
                if probing {
                    *self.outage.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() < MAX_IDLE {
                    idle.push(connection);
                }
                Ok(value)
            }
            // The connection is dropped when it failed; a server error leaves it usable.
            Err(err) if is_connection_failure(&err) => Err(self.failed(&err, probing)),
            Err(err) => {
                self.end_probe(probing);
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() < MAX_IDLE {
                    idle.push(connection);
                }
                Err(self.failure(&err))
            }
        }
    }

    /// [`Link::run`] with `timeout` for the request's reply instead of the link's (at least the
    /// link's).
    pub(crate) fn run_with_timeout<T>(
        &self,
        timeout: Duration,
        request: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let usual = Some(self.timeout);
        self.run(|connection| {
            connection.set_read_timeout(Some(timeout.max(self.timeout)))?;
            let reply = request(connection);
            connection.set_read_timeout(usual)?;
            reply
        })
    }

    /// Whether this request may try Redis: `Ok(true)` when it is the one trying again after a
    /// timeout, an error at once while Redis is cooling down or another request is trying.
    fn admit(&self) -> Result<bool> {
        let mut outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        let Some(outage) = outage.as_mut() else {
            return Ok(false);
        };
        if outage.probing || outage.since.elapsed() < COOL_DOWN {
            return Err(Error::Unavailable {
                location: self.url.to_string(),
                reason: format!(
                    "{} ({:.1} s ago; trying again)",
                    outage.reason,
                    outage.since.elapsed().as_secs_f64()
                ),
            });
        }
        outage.probing = true;
        Ok(true)
    }

    /// The error of a failed connection; a timeout starts (or renews) an outage, and ends the
    /// pool's idle connections, which went to the same server.
    fn failed(&self, err: &redis::RedisError, probing: bool) -> Error {
        if err.is_timeout() {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
            *self.outage.lock().unwrap_or_else(|e| e.into_inner()) = Some(Outage {
                since: Instant::now(),
                reason: format!("no answer within {:.1} s", self.timeout.as_secs_f64()),
                probing: false,
            });
        } else {
            self.end_probe(probing);
        }
        self.failure(err)
    }

    /// A probe that ended without a timeout: the next request may try again.
    fn end_probe(&self, probing: bool) {
        if probing {
            if let Some(outage) = self
                .outage
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
            {
                outage.probing = false;
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
                reason: brief(err),
            }
        } else {
            Error::Config(format!("the Redis store {}: {}", self.url, brief(err)))
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
    as_redis_terms(analyzer.terms(text))
}

/// A query's terms as [`redis_terms`] makes them, at most
/// [`MAX_QUERY_TERMS`](lector_index::analysis::MAX_QUERY_TERMS) of them as the embedded index
/// scores, so a huge question is never one unbounded union.
pub(crate) fn redis_query_terms(analyzer: &Analyzer, query: &str) -> Vec<String> {
    as_redis_terms(analyzer.query_terms(query))
}

fn as_redis_terms(terms: Vec<String>) -> Vec<String> {
    (terms.into_iter())
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

/// The most characters of a Redis error kept in lector's: a transaction's error lists every
/// command's (thousands of times "Redis is loading the dataset in memory").
const MAX_REASON_CHARS: usize = 400;

/// `err`'s message, cut at [`MAX_REASON_CHARS`].
fn brief(err: &redis::RedisError) -> String {
    let message = err.to_string();
    match message.char_indices().nth(MAX_REASON_CHARS) {
        Some((cut, _)) => format!(
            "{}... ({} characters more)",
            &message[..cut],
            message[cut..].chars().count()
        ),
        None => message,
    }
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

/// A lector store in Redis, for searching. Requests from several threads run in parallel, each
/// on a connection of its own (a few are kept open between requests).
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

//! Creating a store and writing documents to it.

use crate::{ConnectOptions, Link, StoreMeta, StoreUrl, VectorType, FORMAT};
use lector_index::analysis::Analyzer;
use lector_index::docstore::{embedding_text, passages_of, Passage};
use lector_index::{
    AddOutcome, CommitInfo, DenseMeta, Document, Embedder, Error, IndexSettings, Result,
    StoreWriter,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The most passages one `MULTI`/`EXEC` transaction of a commit writes: large enough to amortise
/// round trips, small enough that Redis, which runs a transaction whole while every other client
/// waits, is never held long (about 1.5 MB of 384-float vectors).
pub const MAX_TRANSACTION_PASSAGES: usize = 1_000;

/// The most bytes (texts, terms, metadata and vectors) one transaction of a commit sends.
pub const MAX_TRANSACTION_BYTES: usize = 4 << 20;

/// How long a commit's transaction may take before the commit is reported failed (each is
/// bounded above, so this only ever waits for a slow Redis; asks keep their own timeout).
pub const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Passages embedded per call to the embedder (progress is reported after each).
const EMBED_BATCH: usize = 64;

/// A staged document's passages and, in a dense store, their vectors as Redis stores them.
struct Prepared {
    passages: Vec<Passage>,
    vectors: Vec<Vec<u8>>,
}

/// The one writer of a store (lector takes no lock in Redis: run one writer per store).
pub struct RedisWriter {
    link: Link,
    meta: StoreMeta,
    analyzer: Analyzer,
    embedder: Option<Arc<dyn Embedder>>,
    staged: Vec<Document>,
    staged_ids: HashMap<String, usize>,
    removed: HashSet<String>,
    committed: usize,
}

impl RedisWriter {
    /// Opens the store at `url` for writing, creating it with `settings` (and, with an
    /// `embedder`, a vector field of its dimension stored as `vector_type`) when there is none.
    /// An existing store keeps its own settings and vector type, and refuses an embedder other
    /// than its own.
    pub fn open_or_create(
        url: &StoreUrl,
        options: &ConnectOptions,
        settings: IndexSettings,
        embedder: Option<Arc<dyn Embedder>>,
        vector_type: VectorType,
    ) -> Result<RedisWriter> {
        let link = Link::open(url, options)?;
        let meta = match read_meta(&link)? {
            Some(meta) => meta,
            None => create(&link, settings, embedder.as_deref(), vector_type)?,
        };
        match (&meta.dense, &embedder) {
            (Some(dense), Some(embedder)) => dense.check(embedder.as_ref(), url)?,
            (None, Some(_)) => {
                return Err(Error::Config(format!(
                    "the store {url} was created without passage vectors; create a new store with --dense to search by embedding"
                )))
            }
            _ => {}
        }
        Self::with(link, meta, embedder)
    }

    /// Opens the existing store at `url` for writing without an embedder: enough to remove
    /// documents (adding to a dense store needs [`RedisWriter::open_or_create`] with its embedder).
    pub fn open(url: &StoreUrl, options: &ConnectOptions) -> Result<RedisWriter> {
        let link = Link::open(url, options)?;
        let meta = read_meta(&link)?.ok_or_else(|| crate::no_store(url))?;
        Self::with(link, meta, None)
    }

    fn with(link: Link, meta: StoreMeta, embedder: Option<Arc<dyn Embedder>>) -> Result<Self> {
        let docs = link.key("docs");
        let committed = link.run(|c| redis::cmd("SCARD").arg(&docs).query(c))?;
        Ok(RedisWriter {
            link,
            analyzer: Analyzer::new(meta.settings.analyzer),
            meta,
            embedder,
            staged: Vec::new(),
            staged_ids: HashMap::new(),
            removed: HashSet::new(),
            committed,
        })
    }

    /// The store's settings (an existing store's own).
    pub fn settings(&self) -> IndexSettings {
        self.meta.settings
    }

    /// Whether the store keeps passage vectors.
    pub fn is_dense(&self) -> bool {
        self.meta.dense.is_some()
    }

    fn stored_hash(&self, id: &str) -> Result<Option<String>> {
        let key = document_key(&self.link, id);
        self.link
            .run(|c| redis::cmd("HGET").arg(&key).arg("hash").query(c))
    }

    /// The passages and vectors of every staged document.
    fn prepare(&self, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Prepared>> {
        let chunked: Vec<Vec<Passage>> = (self.staged.iter())
            .map(|doc| passages_of(doc, self.meta.settings.chunking))
            .collect();
        let Some(dense) = self.meta.dense.as_ref().filter(|_| !self.staged.is_empty()) else {
            return Ok(chunked
                .into_iter()
                .map(|passages| Prepared {
                    passages,
                    vectors: Vec::new(),
                })
                .collect());
        };
        let Some(embedder) = &self.embedder else {
            return Err(Error::Config(format!(
                "the store {} keeps vectors of `{}`: new documents need that embedder (--embedder)",
                self.link.url(),
                dense.model
            )));
        };
        let texts: Vec<String> = (self.staged.iter().zip(&chunked))
            .flat_map(|(doc, passages)| {
                passages
                    .iter()
                    .map(|p| embedding_text(doc.title.as_deref(), &p.text))
            })
            .collect();
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(EMBED_BATCH) {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            let embedded = embedder.embed(&refs).map_err(Error::Embed)?;
            if embedded.len() != refs.len() || embedded.iter().any(|v| v.len() != dense.dim) {
                return Err(Error::Embed(format!(
                    "the embedder `{}` returned vectors of the wrong number or size",
                    dense.model
                )));
            }
            vectors.extend(embedded.iter().map(|v| self.meta.vector_type.bytes(v)));
            progress(vectors.len(), texts.len());
        }
        let mut vectors = vectors.into_iter();
        Ok(chunked
            .into_iter()
            .map(|passages| Prepared {
                vectors: vectors.by_ref().take(passages.len()).collect(),
                passages,
            })
            .collect())
    }

    /// Passages stored now for each of `ids` (0 for a document not stored).
    fn stored_passages(&self, ids: &[&str]) -> Result<Vec<usize>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("HGET")
                .arg(document_key(&self.link, id))
                .arg("passages");
        }
        let counts: Vec<Option<usize>> = self.link.run(|c| pipe.query(c))?;
        Ok(counts.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Writes the commit: removes `removed` and writes `docs` (each over its old passages) in
    /// transactions of at most [`MAX_TRANSACTION_PASSAGES`] passages and
    /// [`MAX_TRANSACTION_BYTES`] bytes. A document larger than that spans several, and its record
    /// (`NAME:d:ID`, and its id in `NAME:docs`) goes in the last: what counts, lists and checks
    /// documents sees it whole or not at all, and a commit cut short is written again whole
    /// (keys come from ids). The generation moves in the very last transaction.
    fn write_transactions(&self, removed: &[&str], docs: &[(&Document, &Prepared)]) -> Result<()> {
        let ids: Vec<&str> = (removed.iter().copied())
            .chain(docs.iter().map(|(d, _)| d.id.as_str()))
            .collect();
        let before = self.stored_passages(&ids)?;
        let docs_key = self.link.key("docs");
        let mut tx = Transaction::default();
        for (id, &old) in removed.iter().zip(&before) {
            for n in 0..old {
                tx.pipe
                    .cmd("DEL")
                    .arg(passage_key(&self.link, id, n))
                    .ignore();
            }
            tx.pipe
                .cmd("DEL")
                .arg(document_key(&self.link, id))
                .ignore();
            tx.pipe.cmd("SREM").arg(&docs_key).arg(*id).ignore();
            tx.add(old, 0);
            if tx.is_full() {
                self.flush(&mut tx)?;
            }
        }
        for ((doc, Prepared { passages, vectors }), &old) in
            docs.iter().zip(&before[removed.len()..])
        {
            let vectors = vectors_or_none(vectors, passages.len());
            for (passage, vector) in passages.iter().zip(vectors) {
                let key = passage_key(&self.link, &doc.id, passage.n);
                // Deleted first, so that no field of an older version (a page, a vector) lingers.
                tx.pipe.cmd("DEL").arg(&key).ignore();
                let hset = tx.pipe.cmd("HSET").arg(key);
                let body = crate::redis_terms(&self.analyzer, &passage.searchable).join(" ");
                let mut bytes = 0;
                for (field, value) in passage_fields(doc, passage, &body) {
                    bytes += field.len() + value.len();
                    hset.arg(field).arg(value);
                }
                if let Some(vector) = vector {
                    bytes += vector.len();
                    hset.arg("vec").arg(vector.as_slice());
                }
                hset.ignore();
                tx.add(1, bytes);
                if tx.is_full() {
                    self.flush(&mut tx)?;
                }
            }
            // The record last: older passages past the new count go with it.
            for n in passages.len()..old {
                tx.pipe
                    .cmd("DEL")
                    .arg(passage_key(&self.link, &doc.id, n))
                    .ignore();
            }
            let record = tx
                .pipe
                .cmd("HSET")
                .arg(document_key(&self.link, &doc.id))
                .arg("hash")
                .arg(hex(&doc.content_hash()))
                .arg("passages")
                .arg(passages.len());
            if let Some(date) = &doc.date {
                record.arg("date").arg(date);
            }
            // The metadata once, here, rather than in every passage.
            if let Some(metadata) = &doc.metadata {
                record.arg("meta").arg(metadata.to_string());
            }
            record.ignore();
            for (field, absent) in [
                ("date", doc.date.is_none()),
                ("meta", doc.metadata.is_none()),
            ] {
                if absent {
                    tx.pipe
                        .cmd("HDEL")
                        .arg(document_key(&self.link, &doc.id))
                        .arg(field)
                        .ignore();
                }
            }
            tx.pipe.cmd("SADD").arg(&docs_key).arg(&doc.id).ignore();
            tx.add(old.saturating_sub(passages.len()), 0);
            if tx.is_full() {
                self.flush(&mut tx)?;
            }
        }
        tx.pipe
            .cmd("HINCRBY")
            .arg(self.link.key("lector"))
            .arg("generation")
            .arg(1)
            .ignore();
        self.flush(&mut tx)
    }

    /// Sends `tx` as one transaction, with the write timeout, and starts the next.
    fn flush(&self, tx: &mut Transaction) -> Result<()> {
        let pipe = std::mem::take(tx).pipe;
        self.link
            .run_with_timeout(WRITE_TIMEOUT, |c| pipe.query::<()>(c))
    }
}

/// The transaction a commit is filling.
struct Transaction {
    pipe: redis::Pipeline,
    passages: usize,
    bytes: usize,
}

impl Default for Transaction {
    fn default() -> Self {
        let mut pipe = redis::pipe();
        pipe.atomic();
        Transaction {
            pipe,
            passages: 0,
            bytes: 0,
        }
    }
}

impl Transaction {
    /// Counts `passages` written or deleted and `bytes` sent.
    fn add(&mut self, passages: usize, bytes: usize) {
        self.passages += passages;
        self.bytes += bytes;
    }

    fn is_full(&self) -> bool {
        self.passages >= MAX_TRANSACTION_PASSAGES || self.bytes >= MAX_TRANSACTION_BYTES
    }
}

fn vectors_or_none(vectors: &[Vec<u8>], n: usize) -> Vec<Option<&Vec<u8>>> {
    if vectors.is_empty() {
        vec![None; n]
    } else {
        vectors.iter().map(Some).collect()
    }
}

impl StoreWriter for RedisWriter {
    fn add(&mut self, doc: Document) -> Result<AddOutcome> {
        if doc.embedding.is_some() {
            return Err(Error::Config(format!(
                "document `{}` brings its own vector: a Redis store holds only vectors lector \
                 makes (use the embedded index for vectors made outside lector)",
                doc.id
            )));
        }
        let hash = hex(&doc.content_hash());
        if let Some(&slot) = self.staged_ids.get(&doc.id) {
            if hex(&self.staged[slot].content_hash()) == hash {
                return Ok(AddOutcome::Unchanged);
            }
            self.staged[slot] = doc;
            return Ok(AddOutcome::Replaced);
        }
        let stored = self.stored_hash(&doc.id)?;
        if stored.as_deref() == Some(hash.as_str()) {
            self.removed.remove(&doc.id);
            return Ok(AddOutcome::Unchanged);
        }
        self.removed.remove(&doc.id);
        self.staged_ids.insert(doc.id.clone(), self.staged.len());
        self.staged.push(doc);
        Ok(match stored {
            Some(_) => AddOutcome::Replaced,
            None => AddOutcome::Added,
        })
    }

    fn remove(&mut self, id: &str) -> Result<bool> {
        let mut found = false;
        if let Some(slot) = self.staged_ids.remove(id) {
            self.staged.remove(slot);
            for s in self.staged_ids.values_mut() {
                if *s > slot {
                    *s -= 1;
                }
            }
            found = true;
        }
        if self.stored_hash(id)?.is_some() {
            self.removed.insert(id.to_string());
            found = true;
        }
        Ok(found)
    }

    fn pending(&self) -> usize {
        self.staged.len()
    }

    fn commit(&mut self, progress: &mut dyn FnMut(usize, usize)) -> Result<CommitInfo> {
        if !self.staged.is_empty() || !self.removed.is_empty() {
            let prepared = self.prepare(progress)?;
            let removed: Vec<&str> = self.removed.iter().map(String::as_str).collect();
            let docs: Vec<_> = self.staged.iter().zip(&prepared).collect();
            self.write_transactions(&removed, &docs)?;
            self.staged.clear();
            self.staged_ids.clear();
            self.removed.clear();
        }
        let docs = self.link.key("docs");
        self.committed = self.link.run(|c| redis::cmd("SCARD").arg(&docs).query(c))?;
        let meta = self.link.key("lector");
        let generation: Option<u64> = self
            .link
            .run(|c| redis::cmd("HGET").arg(&meta).arg("generation").query(c))?;
        Ok(CommitInfo {
            generation: generation.unwrap_or(0),
            documents: self.committed,
            segments: 0,
        })
    }

    fn committed_documents(&self) -> usize {
        self.committed
    }
}

/// The fields of a passage's hash, but its vector.
fn passage_fields(doc: &Document, passage: &Passage, body: &str) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("doc", doc.id.clone()),
        ("n", passage.n.to_string()),
        ("text", passage.text.clone()),
        ("body", body.to_string()),
        ("bs", passage.span.byte_start.to_string()),
        ("be", passage.span.byte_end.to_string()),
        ("cs", passage.span.char_start.to_string()),
        ("ce", passage.span.char_end.to_string()),
    ];
    if let Some(title) = &doc.title {
        fields.push(("title", title.clone()));
    }
    if let Some(page) = passage.page {
        fields.push(("page", page.to_string()));
    }
    if let Some(section) = &passage.section {
        fields.push(("section", section.clone()));
    }
    fields.push(("tags", crate::filter::document_tags(doc)));
    fields
}

/// The `filters` entry of a store's record whose passages carry filter tags (`crate::filter`).
const FILTER_TAGS: &str = "tags-1";

/// Creates the store: its search index, then its record (last, so that a store whose creation
/// failed half-way is created again).
fn create(
    link: &Link,
    settings: IndexSettings,
    embedder: Option<&dyn Embedder>,
    vector_type: VectorType,
) -> Result<StoreMeta> {
    let bm25 = settings.bm25;
    let default_bm25 = lector_index::Bm25Params::default();
    if bm25 != default_bm25 {
        return Err(Error::Config(format!(
            "Redis scores BM25 with k1 = {} and b = {}; a store cannot be created with k1 = {}, b = {}",
            default_bm25.k1, default_bm25.b, bm25.k1, bm25.b
        )));
    }
    let name = link.url().name();
    let mut create = redis::cmd("FT.CREATE");
    create
        .arg(name)
        .arg("ON")
        .arg("HASH")
        .arg("PREFIX")
        .arg(1)
        .arg(link.key("p:"))
        .arg("LANGUAGE")
        .arg("english");
    // lector removes stopwords and stems before Redis sees a term (`redis_terms`).
    create
        .arg("STOPWORDS")
        .arg(0)
        .arg("SCHEMA")
        .arg("body")
        .arg("TEXT")
        .arg("NOSTEM")
        .arg("tags")
        .arg("TAG");
    if let Some(embedder) = embedder {
        create
            .arg("vec")
            .arg("VECTOR")
            .arg("HNSW")
            .arg(6)
            .arg("TYPE")
            .arg(vector_type.name())
            .arg("DIM")
            .arg(embedder.dim())
            .arg("DISTANCE_METRIC")
            .arg("COSINE");
    }
    let exists: std::result::Result<(), Error> = link.run(|c| create.query::<()>(c));
    if let Err(err) = exists {
        // An index left by a creation that failed before its record was written is reused, and
        // so is one that another writer (a parallel Ray shard) created a moment ago. RediSearch
        // says "Index already exists"; the client shows it as `"Index": already exists`.
        if !err.to_string().contains("already exists") {
            return Err(err);
        }
    }
    wait_for_initial_scan(link, name)?;
    let dense = embedder.map(DenseMeta::of);
    let settings_json = serde_json::to_string(&settings).expect("settings serialise");
    let mut record = redis::cmd("HSET");
    record
        .arg(link.key("lector"))
        .arg("format")
        .arg(FORMAT)
        .arg("settings")
        .arg(settings_json)
        .arg("vector_type")
        .arg(vector_type.name())
        .arg("filters")
        .arg(FILTER_TAGS);
    if let Some(dense) = &dense {
        record
            .arg("dense")
            .arg(serde_json::to_string(dense).expect("dense metadata serialises"));
    }
    link.run(|c| record.query::<()>(c))?;
    Ok(StoreMeta {
        settings,
        dense,
        vector_type,
        filterable: true,
    })
}

/// The store's record, or `None` when there is no store of this name.
pub(crate) fn read_meta(link: &Link) -> Result<Option<StoreMeta>> {
    let key = link.key("lector");
    let fields: HashMap<String, String> = link.run(|c| redis::cmd("HGETALL").arg(&key).query(c))?;
    if fields.is_empty() {
        return Ok(None);
    }
    let corrupt = |what: &str| {
        Error::Config(format!(
            "the store {} has an unreadable record ({key}: {what}); was it written by another program?",
            link.url()
        ))
    };
    if fields.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(corrupt(&format!(
            "format {:?}, this build reads {FORMAT}",
            fields.get("format")
        )));
    }
    let settings = (fields.get("settings"))
        .and_then(|s| serde_json::from_str(s).ok())
        .ok_or_else(|| corrupt("settings"))?;
    let dense = match fields.get("dense") {
        Some(text) => Some(serde_json::from_str(text).map_err(|_| corrupt("dense"))?),
        None => None,
    };
    let vector_type = (fields.get("vector_type"))
        .and_then(|t| VectorType::parse(t))
        .ok_or_else(|| corrupt("vector_type"))?;
    Ok(Some(StoreMeta {
        settings,
        dense,
        vector_type,
        filterable: fields.get("filters").map(String::as_str) == Some(FILTER_TAGS),
    }))
}

/// The longest a new store waits for RediSearch's scan of the existing keys.
const INITIAL_SCAN_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits until RediSearch has scanned the keys that existed when index `name` was created.
/// Passages written during that scan are indexed twice (by the scan and by the write), and the
/// copy left behind counts in BM25's statistics until Redis's garbage collector removes it, so
/// scores would depend on when the store was queried.
fn wait_for_initial_scan(link: &Link, name: &str) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        let info: redis::Value = link.run(|c| redis::cmd("FT.INFO").arg(name).query(c))?;
        if crate::search::info_field(&info, "indexing").as_deref() == Some("0") {
            return Ok(());
        }
        if start.elapsed() > INITIAL_SCAN_LIMIT {
            return Err(Error::Config(format!(
                "Redis is still scanning its keys for the new store {} after {} s; add the documents again once FT.INFO {name} shows indexing 0",
                link.url(),
                INITIAL_SCAN_LIMIT.as_secs()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `NAME:d:ID`: the record of document ID.
pub(crate) fn document_key(link: &Link, id: &str) -> String {
    link.key(&format!("d:{id}"))
}

/// `NAME:p:ID#N`: passage N of document ID (unambiguous: N, after the last `#`, has none).
pub(crate) fn passage_key(link: &Link, id: &str, n: usize) -> String {
    link.key(&format!("p:{id}#{n}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

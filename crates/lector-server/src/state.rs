//! What every request shares: the pipeline (index snapshot and reader), the index writer, the
//! generator (optional), the gate, the metrics and the settings.
//!
//! Questions read an immutable snapshot: [`AppState::pipeline`] hands out an `Arc<Served>`
//! (a pointer copied under a lock held for nanoseconds), and a commit builds the next pipeline
//! beside it and swaps the pointer. An ask keeps the snapshot it started with to its end, and a
//! write never waits for asks, nor asks for a write.
//!
//! Commits do not merge segments: the merges the index's policy asks for run on a thread of
//! their own (see [`WriterGuard::commit`]), so a write never waits for a large merge either.

use crate::access::ApiKey;
use crate::error::ApiError;
use crate::label::routes::Labelling;
use crate::limit::{Gate, Limits};
use crate::metrics::{Gauges, LogLines, Metrics};
use lector_generate::Generator;
use lector_index::{
    CommitInfo, DocumentStore, Embedder, Index, IndexWriter, MergeJob, MergedSegment,
    SearchOptions, StoreCounts,
};
use lector_pipeline::{Calibration, Pipeline};
use lector_querylog::{Entry, QueryLog};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use tokio::sync::OwnedMutexGuard;

/// How the server is set up (everything but the socket).
#[derive(Clone)]
pub struct Config {
    /// Requests must carry `Authorization: Bearer <key>` (all routes but `/healthz` and the
    /// page, which holds no data and asks for the key).
    pub api_key: Option<ApiKey>,
    /// Host names served besides loopback names and addresses and the bound address (e.g. the
    /// name a reverse proxy forwards): `NAME`, `NAME:PORT` or `http(s)://NAME[:PORT]`. Pages may
    /// call the server from that entry's one origin: the scheme written (else `https`) and the
    /// port written (else the scheme's default). Requests naming another `Host`, or coming from
    /// a page of another origin, get 403 (see [`crate::access`]).
    pub allowed_hosts: Vec<String>,
    /// Named keys with scopes and tenants (see [`crate::keys`]); instead of `api_key`.
    pub keys: Option<Arc<crate::keys::KeyFile>>,
    /// Serve beyond loopback without an API key (refused otherwise).
    pub insecure_no_auth: bool,
    /// Retrieval of requests that name no mode (and BM25 and fusion parameters for all).
    pub search: SearchOptions,
    /// Request limits.
    pub limits: Limits,
    /// Log every ask and feedback here (`None`: no log, and `POST /v1/feedback` and the
    /// labelling routes answer 404).
    pub query_log: Option<lector_querylog::LogConfig>,
    /// Read uploaded PDF and Word files in worker processes with these limits (`None`: in this
    /// process, bounded only by the readers' own limits; see [`lector_ingest::IsolatedReader`]).
    pub upload_reader: Option<Arc<lector_ingest::IsolatedReader>>,
    /// The prompts generative asks may name (`prompt`): the shipped ones, and the operator's.
    pub prompts: lector_generate::prompt::PromptLibrary,
    /// Take a whole prompt from a request (`prompt_toml`); refused (403) otherwise: prompt
    /// text steers the model, and only the operator's should.
    pub client_prompts: bool,
}

impl Config {
    /// Whether requests must carry a key (an API key or a key file).
    pub fn authenticates(&self) -> bool {
        self.api_key.is_some() || self.keys.is_some()
    }

    /// The principal whose key is `given`: the API key has every scope, a key file's keys
    /// theirs; `None` for a key that is not one; `Err` while the key file cannot be used.
    pub fn principal(
        &self,
        given: &str,
    ) -> Result<Option<crate::keys::Principal>, crate::keys::KeysUnavailable> {
        if let Some(key) = &self.api_key {
            return Ok(key.matches(given).then(crate::keys::Principal::api_key));
        }
        match &self.keys {
            Some(keys) => keys.principal(given),
            None => Ok(None),
        }
    }

    /// No API key, no extra hosts, with `search` and `limits`.
    pub fn new(search: SearchOptions, limits: Limits) -> Self {
        Config {
            api_key: None,
            keys: None,
            allowed_hosts: Vec::new(),
            insecure_no_auth: false,
            search,
            limits,
            query_log: None,
            upload_reader: None,
            prompts: Default::default(),
            client_prompts: false,
        }
    }
}

/// The pipeline a server runs: over a snapshot of the embedded index, or over an external store
/// (read-only; its documents are written by `lector index add --store`).
pub type Served = Pipeline<Arc<dyn DocumentStore>>;

/// The shared state of a running server.
pub struct AppState {
    /// The snapshot asks and searches read; the lock guards only the pointer, never a read.
    pipeline: RwLock<Arc<Served>>,
    /// The single writer of the index; `None` when serving read-only, or after shutdown. An
    /// async lock, so that writes wait for it without holding a worker ([`Self::lock_writer`]).
    writer: Arc<tokio::sync::Mutex<Option<IndexWriter>>>,
    /// The index's embedder (dense indexes): embeds queries and new passages.
    embedder: Option<Arc<dyn Embedder>>,
    /// The language model of generative asks and chat completions; `None`: those get 501.
    generator: Option<Arc<dyn Generator>>,
    /// Admission of CPU-heavy work.
    pub gate: Gate,
    /// Request and answer-quality metrics.
    pub metrics: Metrics,
    /// The query log, when the server logs (`config.query_log`).
    query_log: Option<QueryLog>,
    /// The labels of the logged questions (with the query log).
    labelling: Option<Arc<Labelling>>,
    /// The settings.
    pub config: Config,
    read_only: bool,
    /// The address the server listens on, once [`crate::serve`] knows it.
    bound: OnceLock<IpAddr>,
    documents: AtomicUsize,
    passages: AtomicUsize,
    generation: AtomicU64,
    /// Why the external store could not be reached at the follower's last look (`None`: it
    /// was), which `/healthz` answers from without a call of its own.
    unreachable: std::sync::Mutex<Option<String>>,
    /// The thread running merges, if one was started: shutdown waits for it.
    merge_thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Set by shutdown: a running merge finishes and lists its output, and plans no other.
    stopping: AtomicBool,
    /// The thread of a read-only server that serves the commits another process makes.
    follower: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// How often a read-only server looks at its index's manifest for a newer commit.
pub const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

impl AppState {
    /// State serving `pipeline`'s store, written through `writer` (none: read-only; a writer
    /// needs the store to be its embedded index). For a dense store, `embedder` must be the one
    /// the pipeline uses for queries (the `Arc` it was given); the writer gets it too, to embed
    /// new passages.
    pub fn new<S: DocumentStore + 'static>(
        pipeline: Pipeline<S>,
        writer: Option<IndexWriter>,
        embedder: Option<Arc<dyn Embedder>>,
        config: Config,
    ) -> Result<Self, crate::Error> {
        let query_log = match &config.query_log {
            Some(log) => Some(QueryLog::open(log).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot open the query log in {}: {e}", log.dir.display()),
                )
            })?),
            None => None,
        };
        let mut writer = writer;
        if let Some(w) = writer.as_mut() {
            prepare(w, embedder.as_ref())?;
        }
        let state = AppState {
            read_only: writer.is_none(),
            pipeline: RwLock::new(Arc::new(with_titles(served(pipeline)))),
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            embedder,
            generator: None,
            gate: Gate::new(config.limits),
            metrics: Metrics::default(),
            labelling: config
                .query_log
                .as_ref()
                .map(|log| Arc::new(Labelling::new(log.dir.clone()))),
            query_log,
            config,
            bound: OnceLock::new(),
            documents: AtomicUsize::new(0),
            passages: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            unreachable: std::sync::Mutex::new(None),
            merge_thread: std::sync::Mutex::new(None),
            stopping: AtomicBool::new(false),
            follower: std::sync::Mutex::new(None),
        };
        state.note_size(state.pipeline().store().as_ref())?;
        Ok(state)
    }

    /// The current snapshot: the pipeline over the last published commit. Holding it keeps that
    /// commit readable however many commits follow.
    pub fn pipeline(&self) -> Arc<Served> {
        self.pipeline
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Serves generative asks and chat completions with `generator` (one loaded model serves
    /// concurrent generations, each behind the same gate as the other CPU-heavy requests).
    pub fn with_generator(mut self, generator: Arc<dyn Generator>) -> Self {
        self.generator = Some(generator);
        self
    }

    /// The generator; 501 when the server was started without one (a client can do nothing
    /// about that, and no retry changes it).
    pub fn generator(&self) -> Result<Arc<dyn Generator>, ApiError> {
        self.generator.clone().ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::NOT_IMPLEMENTED,
                "this server was started without a generator: generative answers and chat \
                 completions need `lector serve --generate`",
            )
        })
    }

    /// The embedder of a dense index.
    pub fn embedder(&self) -> Option<&dyn Embedder> {
        self.embedder.as_deref()
    }

    /// The address the server is bound to (none before [`crate::serve`] starts).
    pub fn bound_ip(&self) -> Option<IpAddr> {
        self.bound.get().copied()
    }

    /// Notes the address the server is bound to, for the `Host` check.
    pub(crate) fn set_bound(&self, ip: IpAddr) {
        let _ = self.bound.set(ip);
    }

    /// Whether document writes are refused.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// 403 when serving read-only.
    pub fn check_writable(&self) -> Result<(), ApiError> {
        if !self.read_only {
            return Ok(());
        }
        // An external store is always served read-only; an index folder only when asked to.
        let store = self.pipeline().store().clone();
        let why = match store.as_index() {
            Some(_) => "the server is read-only (started with --read-only)".to_string(),
            None => format!(
                "the server serves the store {} read-only: write to it with `lector index add --store`",
                store.location()
            ),
        };
        Err(ApiError::new(axum::http::StatusCode::FORBIDDEN, why))
    }

    /// The writer, locked (one write at a time), waiting for it on this thread (not from
    /// async code: see [`Self::lock_writer`]); 403 when serving read-only, 503 after shutdown.
    pub fn writer(self: &Arc<Self>) -> Result<WriterGuard, ApiError> {
        self.check_writable()?;
        self.guarded(self.writer.clone().blocking_lock_owned())
    }

    /// [`Self::writer`], waited for asynchronously: a write queued behind another holds no
    /// thread meanwhile.
    pub async fn lock_writer(self: &Arc<Self>) -> Result<WriterGuard, ApiError> {
        self.check_writable()?;
        self.guarded(self.writer.clone().lock_owned().await)
    }

    fn guarded(
        self: &Arc<Self>,
        guard: OwnedMutexGuard<Option<IndexWriter>>,
    ) -> Result<WriterGuard, ApiError> {
        if guard.is_none() {
            return Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "the server is shutting down",
            ));
        }
        Ok(WriterGuard {
            guard,
            state: self.clone(),
        })
    }

    /// Gauges for the metrics.
    pub fn gauges(&self) -> Gauges {
        let (body_bytes, body_bytes_peak) = self.gate.buffered_bytes();
        Gauges {
            documents: self.documents.load(Ordering::Relaxed),
            passages: self.passages.load(Ordering::Relaxed),
            generation: self.generation.load(Ordering::Relaxed),
            running: self.gate.running(),
            queued: self.gate.queued(),
            body_bytes,
            body_bytes_peak,
            body_budget: self.gate.limits().max_buffered_bytes,
            connections: self.gate.open_connections(),
            query_log: self.query_log.as_ref().map(|log| {
                let c = log.counters();
                LogLines {
                    written: c.written.load(Ordering::Relaxed),
                    dropped: c.dropped.load(Ordering::Relaxed),
                    failed: c.failed.load(Ordering::Relaxed),
                }
            }),
        }
    }

    /// The labelling state of the log; `None` when the server does not log.
    pub fn labelling(&self) -> Option<&Arc<Labelling>> {
        self.labelling.as_ref()
    }

    /// The query log; `None` when the server does not log.
    pub fn query_log(&self) -> Option<&QueryLog> {
        self.query_log.as_ref()
    }

    /// Appends `entry` to the query log, if there is one (never blocks; see [`QueryLog::write`]).
    pub fn log(&self, entry: impl FnOnce(bool) -> Entry) {
        if let Some(log) = &self.query_log {
            log.write(&entry(log.config().redact));
        }
    }

    /// Commits what is staged (nothing, normally: every write commits before it answers) and
    /// closes the writer, releasing the index lock. Later writes get 503. The query log is
    /// written out and closed first.
    pub fn shutdown(&self) -> Result<Option<CommitInfo>, lector_index::Error> {
        if let Some(log) = &self.query_log {
            log.close();
        }
        self.stopping.store(true, Ordering::SeqCst);
        let merge_thread = self
            .merge_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(thread) = merge_thread {
            // Not under the writer lock: the merge takes it to list its output.
            let _ = thread.join();
        }
        let follower = self
            .follower
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(thread) = follower {
            let _ = thread.join();
        }
        let mut guard = self.writer.blocking_lock();
        match guard.take() {
            Some(mut writer) => writer.commit().map(Some),
            None => Ok(None),
        }
    }

    /// A read-only server serves the commits another process (the writer) makes to its index
    /// directory: every [`FOLLOW_EVERY`] it reads the manifest's generation, and when it
    /// changed it opens that commit whole (segments and vectors read into memory and verified
    /// by checksum) and swaps it in as a write would, so an ask never sees part of a commit, and
    /// files a later merge removes are no longer read. It serves the index's calibration the
    /// same way: a new `calibration.json` (which `lector calibrate` writes under the writer
    /// lock, so never while a read-write server holds the index) replaces the one in use, and
    /// a broken one is reported and the last one kept. Does nothing on a read-write server.
    ///
    /// Over an external store, which every ask reads live, it follows the store's generation
    /// instead: the sizes in `/metrics` and the calibration kept with the store.
    pub fn follow_commits(self: &Arc<Self>) {
        if !self.read_only {
            return;
        }
        let state = Arc::clone(self);
        let thread = std::thread::Builder::new()
            .name("lector-follow".into())
            .spawn(move || state.follow());
        match thread {
            Ok(thread) => {
                *self.follower.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
            }
            Err(err) => eprintln!("warning: cannot follow the index's commits: {err}"),
        }
    }

    fn follow(&self) {
        let dir = (self.pipeline().store().as_index()).map(|index| index.dir().to_path_buf());
        let mut last_error = String::new();
        while !self.stopping.load(Ordering::SeqCst) {
            std::thread::sleep(FOLLOW_EVERY);
            let caught_up = match &dir {
                Some(dir) => self.catch_up(dir),
                None => self.catch_up_with_store(),
            };
            match caught_up {
                Ok(()) => last_error.clear(),
                // Said once per cause: the last commit is served meanwhile.
                Err(err) if err.to_string() != last_error => {
                    last_error = err.to_string();
                    eprintln!(
                        "warning: cannot follow the store (serving what was served before): {err}"
                    );
                }
                Err(_) => {}
            }
        }
    }

    /// Serves the index's last commit if it is not the one served, and its calibration if it is
    /// not the one in use.
    fn catch_up(&self, dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
        let current = self.pipeline();
        let served = self.generation.load(Ordering::Relaxed);
        // A broken calibration file is reported after the commits are followed, not instead.
        let (calibration, broken) = match Calibration::load(dir) {
            Ok(loaded) if loaded.as_ref() != current.calibration() => (Some(loaded), None),
            Ok(_) => (None, None),
            Err(err) => (None, Some(err)),
        };
        if calibration.is_some() || Index::committed_generation(dir)? != served {
            let index = Index::open(dir)?;
            if let Some(calibration) = calibration {
                let threshold = calibration.as_ref().map(|c| c.threshold);
                eprintln!("serving the index's new calibration (threshold {threshold:?})");
                self.swap_in(
                    current
                        .with_store(served_index(index))
                        .with_calibration(calibration),
                );
            } else if index.generation() != served {
                self.publish(index);
            }
        }
        broken.map_or(Ok(()), |err| Err(err.into()))
    }

    /// Notes an external store's new generation and size, and serves the calibration kept with
    /// it when it is not the one in use (a small key, read like the embedded index's file).
    fn catch_up_with_store(&self) -> Result<(), Box<dyn std::error::Error>> {
        let current = self.pipeline();
        let store = current.store();
        let reached = store.generation();
        *self.unreachable.lock().unwrap_or_else(|e| e.into_inner()) =
            reached.as_ref().err().map(|e| e.to_string());
        let generation = reached?;
        let calibration = Calibration::load_from(store.as_ref())?;
        let recalibrated = calibration.as_ref() != current.calibration();
        if recalibrated {
            let threshold = calibration.as_ref().map(|c| c.threshold);
            eprintln!("serving the store's new calibration (threshold {threshold:?})");
        }
        if recalibrated || generation != self.generation.load(Ordering::Relaxed) {
            // A fresh pipeline: its title index (multi-hop) is rebuilt on first use.
            let next = current.with_store(store.clone());
            self.swap_in(next.with_calibration(calibration));
        }
        Ok(())
    }

    /// Notes the size and generation of the store served, for `/metrics` and `/healthz`.
    fn note_size(&self, store: &dyn DocumentStore) -> lector_index::Result<()> {
        // The generation first: a commit between the two reads is then seen again next time.
        let generation = store.generation()?;
        let StoreCounts {
            documents,
            passages,
        } = store.counts()?;
        self.documents.store(documents, Ordering::Relaxed);
        self.passages.store(passages, Ordering::Relaxed);
        self.generation.store(generation, Ordering::Relaxed);
        Ok(())
    }

    /// The generation of the store served (as of the last commit or check).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The documents of the store served (as of the last commit or check).
    pub fn documents(&self) -> usize {
        self.documents.load(Ordering::Relaxed)
    }

    /// Why the external store could not be reached when the follower last looked (every
    /// [`FOLLOW_EVERY`], each look bounded by the store's timeout); `None` when it was, and
    /// always over the embedded index.
    pub fn unreachable(&self) -> Option<String> {
        self.unreachable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Runs `job` and the merges due after it, serving each finished one like a commit. Stops
    /// when none is due, after shutdown (which waits for the merge running), or at an
    /// error (the index is intact; the next write plans the merge again).
    fn run_merges(&self, mut job: MergeJob) {
        loop {
            let merged = job.run();
            let mut guard = self.writer.blocking_lock();
            let Some(writer) = guard.as_mut() else {
                return;
            };
            if !self.finish_merge(writer, merged) || self.stopping.load(Ordering::SeqCst) {
                return;
            }
            match writer.next_merge() {
                Some(next) => job = next,
                None => return,
            }
        }
    }

    /// Lists a finished merge and serves it; false when it failed or panicked (logged and
    /// counted in `/metrics`: the index is unchanged, and the next write plans the merge again).
    fn finish_merge(&self, writer: &mut IndexWriter, merged: MergedSegment) -> bool {
        match writer.finish_merge(merged) {
            Ok(Some(_)) => {
                self.metrics.record_merge(true);
                self.publish(writer.committed().clone());
            }
            Ok(None) => {}
            Err(err) => {
                self.metrics.record_merge(false);
                eprintln!("warning: a segment merge failed, the index is unchanged: {err}");
                return false;
            }
        }
        true
    }

    /// Serves `index` (a new commit) from now on: the next pipeline, with its title index,
    /// is built outside the lock, then swapped in; asks already running finish on the snapshot
    /// they hold.
    fn publish(&self, index: Index) {
        self.swap_in(self.pipeline().with_store(served_index(index)));
    }

    /// Serves `pipeline` from now on.
    fn swap_in(&self, pipeline: Served) {
        let store = pipeline.store().clone();
        let next = Arc::new(with_titles(pipeline));
        let previous = std::mem::replace(
            &mut *self.pipeline.write().unwrap_or_else(|e| e.into_inner()),
            next,
        );
        // The old snapshot is freed here or by the last ask holding it, never under the lock.
        drop(previous);
        if let Err(err) = self.note_size(store.as_ref()) {
            eprintln!(
                "warning: cannot read the size of {}: {err}",
                store.location()
            );
        }
    }
}

/// The embedded index served, for the routes only it can answer (listing and reading documents,
/// labelling); 501 over an external store.
pub(crate) fn embedded(pipeline: &Served) -> Result<&Index, ApiError> {
    pipeline.store().as_index().ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::NOT_IMPLEMENTED,
            format!(
                "this route needs an embedded index (`--index DIR`); the store {} is not one",
                pipeline.store().location()
            ),
        )
    })
}

/// An index snapshot as the store a server serves.
fn served_index(index: Index) -> Arc<dyn DocumentStore> {
    Arc::new(index)
}

/// `pipeline` over its store shared, as a server serves it.
fn served<S: DocumentStore + 'static>(pipeline: Pipeline<S>) -> Served {
    pipeline.map_store(|store| Arc::new(store) as Arc<dyn DocumentStore>)
}

/// `pipeline` with its title index built, so that no multi-hop ask builds it inside a request
/// (over the embedded index it is built with every snapshot, at startup and after each commit or
/// merge). Over an external store, where that means reading every title over the network, the
/// first multi-hop ask after a change builds it.
fn with_titles(pipeline: Served) -> Served {
    if let Some(index) = pipeline.store().as_index() {
        if let Err(err) = pipeline.titles() {
            eprintln!(
                "warning: cannot read the titles of {}: {err}",
                index.dir().display()
            );
        }
    }
    pipeline
}

/// Readies a writer for serving: the embedder of a dense index, and merges left to
/// [`AppState::run_merges`].
fn prepare(
    writer: &mut IndexWriter,
    embedder: Option<&Arc<dyn Embedder>>,
) -> lector_index::Result<()> {
    if let (true, Some(embedder)) = (writer.embeds_itself(), embedder) {
        writer.set_embedder(embedder.clone())?;
    }
    writer.defer_merges(true);
    Ok(())
}

/// The locked writer. [`WriterGuard::commit`] makes staged changes durable and visible.
pub struct WriterGuard {
    guard: OwnedMutexGuard<Option<IndexWriter>>,
    state: Arc<AppState>,
}

impl WriterGuard {
    /// The writer.
    pub fn writer(&mut self) -> &mut IndexWriter {
        self.guard.as_mut().expect("checked when locked")
    }

    /// Commits (fsync'd on return) and serves the new commit to later requests. When the commit
    /// fails, the staged changes are dropped (the writer is reopened at the last commit), so a
    /// failed request never lands with a later one. A merge the commit makes due starts on a
    /// thread of its own unless one is running (which plans the next when it is done).
    pub fn commit(&mut self) -> Result<CommitInfo, ApiError> {
        let writer = self.writer();
        let info = match writer.commit() {
            Ok(info) => info,
            Err(err) => {
                self.reopen();
                return Err(err.into());
            }
        };
        let snapshot = self.writer().committed().clone();
        if snapshot.generation() != self.state.generation() {
            self.state.publish(snapshot);
        }
        if let Some(job) = self.writer().next_merge() {
            self.merge_in_background(job);
        }
        Ok(info)
    }

    /// Hands `job` to a thread of its own; when no thread can be started, merges now.
    fn merge_in_background(&mut self, job: MergeJob) {
        // The job goes over a channel, not into the closure, so that it is still here to run
        // inline when the thread cannot start.
        let (send, receive) = std::sync::mpsc::channel::<MergeJob>();
        let state = self.state.clone();
        let thread = std::thread::Builder::new()
            .name("lector-merge".into())
            .spawn(move || {
                if let Ok(job) = receive.recv() {
                    state.run_merges(job);
                }
            });
        match thread {
            Ok(thread) => {
                send.send(job).expect("the merge thread waits for its job");
                // The thread before it (if any) is past its last use of the writer, which this
                // commit holds, and ends by itself.
                *self
                    .state
                    .merge_thread
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(thread);
            }
            Err(err) => {
                eprintln!("warning: cannot start a merge thread ({err}): merging now");
                let state = self.state.clone();
                state.finish_merge(self.writer(), job.run());
            }
        }
    }
}

impl WriterGuard {
    /// Replaces the writer by a fresh one at the last commit; without one (the index cannot be
    /// opened), later writes get 503.
    fn reopen(&mut self) {
        let dir = self.writer().committed().dir().to_path_buf();
        *self.guard = None; // releases the lock before taking it again
        let reopened = IndexWriter::open(&dir).and_then(|mut w| {
            prepare(&mut w, self.state.embedder.as_ref())?;
            Ok(w)
        });
        match reopened {
            Ok(writer) => *self.guard = Some(writer),
            Err(err) => {
                eprintln!("error: cannot reopen the index writer, writes are disabled: {err}")
            }
        }
    }
}

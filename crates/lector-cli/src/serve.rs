//! `lector serve`: the HTTP API and web page over an index or, read-only, an external store (see
//! the lector-server crate).

use crate::index::IndexDir;
use crate::search::{notify, pipeline_config, RerankOptions, RetrievalOptions};
use anyhow::{Context, Result};
use clap::Args;
use lector_generate::prompt::PromptLibrary;
use lector_generate::Generator;
use lector_ingest::{IsolatedReader, IsolationLimits};
use lector_querylog::LogConfig;
use lector_server::{ApiKey, Config, KeyFile, Limits, Opened};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    dir: IndexDir,
    /// Serve a Redis store instead, read-only: its documents are added with `lector index add
    /// --store`, and every ask reads the store as it is then.
    #[command(flatten)]
    store: crate::store::StoreArgs,
    /// Address to listen on (port 0: any free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Require `Authorization: Bearer KEY` on every route but /healthz and the page. Other
    /// users of this machine can read it in `ps`: prefer --api-key-file or $LECTOR_API_KEY
    /// [default: $LECTOR_API_KEY; none: no authentication, refused beyond loopback].
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Read the API key from FILE (surrounding whitespace dropped).
    #[arg(long, value_name = "FILE", conflicts_with = "api_key")]
    api_key_file: Option<PathBuf>,
    /// Named keys with scopes (ask, write, admin) and tenants, stored hashed in FILE (made by
    /// `lector keys add`); the file is re-read when it changes, so keys rotate without a restart.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["api_key", "api_key_file"])]
    keys: Option<PathBuf>,
    /// Also answer requests sent to this host name (e.g. the name a reverse proxy forwards):
    /// NAME, NAME:PORT or http(s)://NAME[:PORT]; pages may call the server from that one origin
    /// (https and the scheme's default port unless written). Loopback names and the bound
    /// address are always served, others get 403. Repeatable.
    #[arg(long, value_name = "HOST")]
    allowed_host: Vec<String>,
    /// Serve beyond loopback without an API key (refused otherwise): anyone who can reach the
    /// address can read and change the index.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Serve without taking the index's writer lock: document writes get 403, and another
    /// process (a writing `lector serve`, `lector index add`) commits to the index meanwhile;
    /// each new commit is served whole within about 200 ms (a replica over a shared volume).
    #[arg(long)]
    read_only: bool,
    /// Largest POST /v1/ask body, in bytes.
    #[arg(long, default_value_t = lector_server::limit::DEFAULT_MAX_ASK_BYTES)]
    max_ask_bytes: usize,
    /// Largest POST /v1/documents body, in bytes.
    #[arg(long, default_value_t = lector_server::limit::DEFAULT_MAX_DOCUMENTS_BYTES)]
    max_documents_bytes: usize,
    /// Longest a request may wait for a worker and run, in seconds (504 beyond).
    #[arg(long, value_parser = crate::values::seconds, default_value_t = lector_server::limit::DEFAULT_TIMEOUT.as_secs_f64())]
    timeout_secs: f64,
    /// Address space of each worker process that reads an uploaded PDF or Word file, in MiB (a
    /// file that needs more is refused; the server is unaffected).
    #[arg(long, value_name = "MIB", value_parser = crate::values::at_least_one, default_value_t = 2048)]
    upload_memory_mb: usize,
    /// CPU seconds of each upload-reading worker (its wall time is --timeout-secs).
    #[arg(long, value_name = "SECS", value_parser = crate::values::at_least_one, default_value_t = 60)]
    upload_cpu_secs: usize,
    /// Asks, searches and document writes running at once [default: the number of CPUs].
    #[arg(long, value_parser = crate::values::at_least_one)]
    workers: Option<usize>,
    /// Requests allowed to wait for a worker (503 beyond).
    #[arg(long, default_value_t = lector_server::limit::DEFAULT_MAX_QUEUED)]
    queue: usize,
    /// Request body bytes buffered at once, all requests together (503 unread beyond).
    #[arg(long, default_value_t = lector_server::limit::DEFAULT_MAX_BUFFERED_BYTES)]
    max_buffered_bytes: usize,
    /// Longest an admitted request may take to send its body, in seconds (408 beyond).
    #[arg(long, value_parser = crate::values::seconds, default_value_t = lector_server::limit::DEFAULT_BODY_TIMEOUT.as_secs_f64())]
    body_timeout_secs: f64,
    /// Longest a client may take to send a request's head, or idle on a keep-alive
    /// connection, in seconds (the connection is closed beyond).
    #[arg(long, value_parser = crate::values::seconds, default_value_t = lector_server::limit::DEFAULT_HEADER_TIMEOUT.as_secs_f64())]
    header_timeout_secs: f64,
    /// Connections open at once (further clients wait to be accepted).
    #[arg(long, value_parser = crate::values::at_least_one, default_value_t = lector_server::limit::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// Reader checkpoint directory [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Load a generator: `"mode": "generative"` asks and POST /v1/chat/completions (501
    /// without it) [default model: the registry's SmolLM2-135M-Instruct, fetched like
    /// `lector models pull generator`].
    #[arg(long)]
    generate: bool,
    /// The generator's GGUF model file (implies --generate).
    #[arg(long, value_name = "GGUF")]
    generator_model: Option<PathBuf>,
    /// A folder of prompt files (TOML or YAML) that generative asks may name (`"prompt"`),
    /// besides the shipped default and chain-of-thought; a file named `default` replaces the
    /// default.
    #[arg(long, value_name = "DIR")]
    prompts: Option<PathBuf>,
    /// Take a whole prompt from a request (`"prompt_toml"`); without it such requests get 403.
    #[arg(long)]
    allow_client_prompts: bool,
    #[command(flatten)]
    log: QueryLogOptions,
}

/// The query log (opt-in).
#[derive(Args)]
struct QueryLogOptions {
    /// Log every ask (question, settings, answer, passages, timings, request id) and every
    /// feedback as JSON lines in DIR; enables POST /v1/feedback and the labelling page (/label).
    #[arg(long, value_name = "DIR")]
    log_queries: Option<PathBuf>,
    /// Mask e-mail addresses, phone numbers and runs of 6 or more digits in logged questions
    /// and feedback (see the README for what is not masked).
    #[arg(long, requires = "log_queries")]
    redact: bool,
    /// Start a new log file when the current one reaches this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20, requires = "log_queries")]
    log_file_bytes: u64,
    /// Start a new log file when the current one is this many seconds old.
    #[arg(long, value_name = "SECS", value_parser = crate::values::seconds, default_value_t = 86_400.0, requires = "log_queries")]
    log_file_age_secs: f64,
    /// Log files kept (the oldest are deleted): the log holds at most this many times
    /// --log-file-bytes.
    #[arg(long, value_name = "N", value_parser = crate::values::at_least_one, default_value_t = 16, requires = "log_queries")]
    log_files: usize,
}

impl QueryLogOptions {
    fn config(&self) -> Option<LogConfig> {
        let dir = self.log_queries.clone()?;
        Some(LogConfig {
            redact: self.redact,
            max_file_bytes: self.log_file_bytes,
            max_file_age: Duration::from_secs_f64(self.log_file_age_secs),
            max_files: self.log_files,
            ..LogConfig::new(dir)
        })
    }
}

pub fn run(args: ServeArgs) -> Result<()> {
    let dir = args.dir.path();
    let api_key = match args.keys {
        Some(_) => None,
        None => api_key(&args)?,
    };
    let keys = match &args.keys {
        Some(path) => Some(Arc::new(KeyFile::open(path)?)),
        None => None,
    };
    let authenticates = api_key.is_some() || keys.is_some();
    warn_if_exposed(args.addr, authenticates, args.insecure_no_auth)?;
    let prompts = match &args.prompts {
        Some(dir) => PromptLibrary::with_folder(dir)?,
        None => PromptLibrary::default(),
    };
    let config = |search| Config {
        api_key,
        keys,
        allowed_hosts: args.allowed_host.clone(),
        insecure_no_auth: args.insecure_no_auth,
        search,
        limits: limits(&args),
        query_log: args.log.config(),
        upload_reader: upload_reader(&args),
        prompts,
        client_prompts: args.allow_client_prompts,
    };
    let pipeline = pipeline_config(args.model.as_deref(), &args.retrieval, &args.rerank);
    let store = args.store.store(args.dir.given())?;
    let read_only = args.read_only || store.is_some();
    let Opened {
        mut state,
        warnings,
    } = match &store {
        Some((url, connect)) => {
            let store = lector_redis::RedisStore::open(url, connect)?;
            lector_server::open_store(store, &pipeline, config, &notify)?
        }
        None => lector_server::open(&dir, &pipeline, read_only, config, &notify)?,
    };
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    let served = state.pipeline().store().location();
    let size = state.gauges();
    if args.generate || args.generator_model.is_some() {
        let generator = crate::generate::load_local(args.generator_model.as_deref())?;
        eprintln!(
            "generator: {} (context window {} tokens)",
            generator.name(),
            generator.context_window()
        );
        state = state.with_generator(Arc::new(generator));
    }
    let state = Arc::new(state);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        let addr = listener.local_addr()?;
        println!(
            "serving {served} ({} documents, {} passages, generation {}) at http://{addr}/{}",
            size.documents,
            size.passages,
            size.generation,
            if read_only { " (read-only)" } else { "" }
        );
        let done = lector_server::serve(listener, state, lector_server::shutdown_signal()).await?;
        match done {
            Some(info) => println!(
                "shut down; index committed at generation {} ({} documents)",
                info.generation, info.documents
            ),
            None => println!("shut down"),
        }
        anyhow::Ok(())
    })
}

/// `--api-key`, else `--api-key-file`, else `$LECTOR_API_KEY` (see [`ApiKey::from_sources`]).
fn api_key(args: &ServeArgs) -> Result<Option<ApiKey>> {
    Ok(ApiKey::from_sources(
        args.api_key.as_deref(),
        args.api_key_file.as_deref(),
    )?)
}

/// Uploads are read by this binary run as `lector ingest-worker`, one process per file, within
/// the upload limits (in this process only where the binary cannot be found).
fn upload_reader(args: &ServeArgs) -> Option<Arc<IsolatedReader>> {
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => {
            eprintln!("warning: uploads are read in the server's process (lector's path: {e})");
            return None;
        }
    };
    let limits = IsolationLimits {
        memory_bytes: (args.upload_memory_mb as u64) << 20,
        cpu_seconds: args.upload_cpu_secs as u64,
        wall: Duration::from_secs_f64(args.timeout_secs),
    };
    Some(Arc::new(IsolatedReader::new(
        program,
        ["ingest-worker"],
        limits,
    )))
}

/// Values were checked when parsed (crate::values).
fn limits(args: &ServeArgs) -> Limits {
    Limits {
        max_ask_bytes: args.max_ask_bytes,
        max_documents_bytes: args.max_documents_bytes,
        timeout: Duration::from_secs_f64(args.timeout_secs),
        max_running: args
            .workers
            .unwrap_or_else(lector_server::limit::default_running),
        max_queued: args.queue,
        max_buffered_bytes: args.max_buffered_bytes,
        body_timeout: Duration::from_secs_f64(args.body_timeout_secs),
        header_timeout: Duration::from_secs_f64(args.header_timeout_secs),
        max_connections: args.max_connections,
    }
}

/// Refuses to serve beyond loopback without a key (before the server itself would), and warns
/// when --insecure-no-auth allows it.
fn warn_if_exposed(addr: SocketAddr, authenticates: bool, insecure_no_auth: bool) -> Result<()> {
    lector_server::access::check_exposure(addr, authenticates, insecure_no_auth)?;
    if !addr.ip().is_loopback() && !authenticates {
        eprintln!(
            "warning: listening on {addr}, beyond this machine, without an API key (--insecure-no-auth): anyone who can reach it can read and change the index"
        );
    }
    Ok(())
}

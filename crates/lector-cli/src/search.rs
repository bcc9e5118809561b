//! `lector search`: ranked passages for a query, as a table or JSON; and the retrieval options
//! every command that searches an index shares.

use crate::embedder::{self, IndexEmbedder};
use crate::index::IndexDir;
use crate::reranker::RerankOptions;
use crate::table::print_table;
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use lector_index::{Bm25Params, Embedder, Fusion, Index, Mode, SearchOptions, DEFAULT_EF};
use serde_json::json;
use std::path::PathBuf;

#[derive(Args)]
pub struct SearchArgs {
    /// The query.
    query: String,
    #[command(flatten)]
    dir: IndexDir,
    /// Passages to return.
    #[arg(long, default_value_t = 10)]
    k: usize,
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// Print JSON (full passage text, offsets, per-retriever scores) instead of a table.
    #[arg(long)]
    json: bool,
}

/// How hybrid retrieval combines its two rankings.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FusionKind {
    /// Reciprocal rank fusion: sum of 1 / (rrf-k + rank).
    Rrf,
    /// Weighted sum of min-max-normalised scores (--weights).
    Weighted,
}

/// Retriever choice and parameters.
#[derive(Args, Clone)]
pub struct RetrievalOptions {
    /// Retriever: bm25, dense or hybrid [default: hybrid when the index has passage vectors, else bm25].
    #[arg(long)]
    pub mode: Option<Mode>,
    /// BM25 k1 [default: the index's].
    #[arg(long)]
    k1: Option<f64>,
    /// BM25 b [default: the index's].
    #[arg(long)]
    b: Option<f64>,
    /// Hybrid fusion.
    #[arg(long, value_enum, default_value_t = FusionKind::Rrf)]
    fusion: FusionKind,
    /// The k of reciprocal rank fusion.
    #[arg(long, default_value_t = 60.0)]
    rrf_k: f64,
    /// Weights of BM25 and dense for weighted fusion.
    #[arg(long, value_delimiter = ',', num_args = 2, default_values_t = [0.5, 0.5])]
    weights: Vec<f64>,
    /// HNSW beam width for dense search (higher: better recall, slower).
    #[arg(long, default_value_t = DEFAULT_EF)]
    ef: usize,
    /// Dense search by exact scan instead of the HNSW graph.
    #[arg(long)]
    exact: bool,
    /// Embedder checkpoint for dense search [default: the registry's all-MiniLM-L6-v2].
    #[arg(long, value_name = "DIR")]
    pub embedder: Option<PathBuf>,
}

impl RetrievalOptions {
    /// The mode asked for, else hybrid for an index with vectors and bm25 otherwise.
    pub fn mode_for(&self, index: &Index) -> Mode {
        self.mode.unwrap_or(if index.dense_meta().is_some() {
            Mode::Hybrid
        } else {
            Mode::Bm25
        })
    }

    /// Search options for `index`, and the embedder when the mode needs one.
    pub fn resolve(&self, index: &Index) -> Result<(SearchOptions, Option<IndexEmbedder>)> {
        let mode = self.mode_for(index);
        let mut options = SearchOptions::for_index(index, mode);
        options.bm25 = bm25_params(index, self.k1, self.b)?;
        options.fusion = match self.fusion {
            FusionKind::Rrf if self.rrf_k >= 0.0 => Fusion::Rrf { k: self.rrf_k },
            FusionKind::Rrf => bail!("--rrf-k must not be negative"),
            FusionKind::Weighted => Fusion::Weighted(self.weights.clone()),
        };
        options.ef = (!self.exact).then_some(self.ef.max(1));
        let embedder = if mode.is_dense() {
            embedder::for_index(index, self.embedder.as_deref())?
        } else {
            None
        };
        Ok((options, embedder))
    }
}

/// The embedder as the index's trait object.
pub fn as_dyn(embedder: &Option<IndexEmbedder>) -> Option<&dyn Embedder> {
    embedder.as_ref().map(|e| e as &dyn Embedder)
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
    let index = Index::open(args.dir.path())?;
    let (options, embedder) = args.retrieval.resolve(&index)?;
    let retriever = index.retriever(&options, as_dyn(&embedder))?;
    let hits = args
        .rerank
        .retrieve(retriever.as_ref(), &args.query, args.k)?;
    if args.json {
        let params = options.bm25;
        let out = json!({"query": args.query, "mode": options.mode.name(), "k1": params.k1, "b": params.b, "hits": hits});
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

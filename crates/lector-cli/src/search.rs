//! `lector search`: ranked passages for a query, as a table or JSON; and the retrieval options
//! every command that searches an index shares.

use crate::index::IndexDir;
use crate::table::print_table;
use anyhow::Result;
use clap::{Args, ValueEnum};
use lector_index::{Filter, Fusion, Hit, Mode, Retriever, DEFAULT_EF, DEFAULT_RERANK_DEPTH};
use lector_pipeline::{PipelineConfig, RerankConfig, RetrievalConfig};
use serde_json::json;
use std::path::PathBuf;

#[derive(Args)]
pub struct SearchArgs {
    /// The query.
    query: String,
    #[command(flatten)]
    dir: IndexDir,
    #[command(flatten)]
    store: crate::store::StoreArgs,
    /// Passages to return.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 10)]
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
    #[arg(value_parser = crate::values::non_negative, long)]
    k1: Option<f64>,
    /// BM25 b [default: the index's].
    #[arg(value_parser = crate::values::unit_interval, long)]
    b: Option<f64>,
    /// Hybrid fusion.
    #[arg(long, value_enum, default_value_t = FusionKind::Rrf)]
    fusion: FusionKind,
    /// The k of reciprocal rank fusion.
    #[arg(value_parser = crate::values::non_negative, long, default_value_t = 60.0)]
    rrf_k: f64,
    /// Weights of BM25 and dense for weighted fusion.
    #[arg(long, value_delimiter = ',', num_args = 2, default_values_t = [0.5, 0.5])]
    weights: Vec<f64>,
    /// HNSW beam width for dense search (higher: better recall, slower).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = DEFAULT_EF)]
    ef: usize,
    /// Dense search by exact scan instead of the HNSW graph.
    #[arg(long)]
    exact: bool,
    /// Embedder checkpoint for dense search [default: the registry's all-MiniLM-L6-v2].
    #[arg(long, value_name = "DIR")]
    pub embedder: Option<PathBuf>,
    /// Only documents whose fields pass, e.g. 'year >= 2023 and product in ["a", "b"]'
    /// (fields: id, title, date, metadata keys; ==, !=, <, <=, >, >=, in, not in, and, or, not).
    #[arg(long, value_parser = parse_filter)]
    pub filter: Option<Filter>,
}

fn parse_filter(text: &str) -> Result<Filter, String> {
    Filter::parse(text).map_err(|e| e.0)
}

impl RetrievalOptions {
    /// The library's retrieval configuration.
    pub fn config(&self) -> RetrievalConfig {
        RetrievalConfig {
            mode: self.mode,
            k1: self.k1,
            b: self.b,
            fusion: match self.fusion {
                FusionKind::Rrf => Fusion::Rrf { k: self.rrf_k },
                FusionKind::Weighted => Fusion::Weighted(self.weights.clone()),
            },
            ef: (!self.exact).then_some(self.ef),
            embedder: self.embedder.clone(),
            filter: self.filter.clone(),
        }
    }
}

/// Reranking options of the commands that read passages.
#[derive(Args, Clone)]
pub struct RerankOptions {
    /// Cross-encoder checkpoint that reorders the retrieved passages (a one-label
    /// BertForSequenceClassification, such as `lector train reranker` makes).
    #[arg(long, value_name = "DIR")]
    pub rerank: Option<PathBuf>,
    /// Passages retrieved for the reranker to choose from (with --rerank).
    #[arg(value_parser = crate::values::at_least_one, long, value_name = "N", default_value_t = DEFAULT_RERANK_DEPTH, requires = "rerank")]
    pub rerank_depth: usize,
}

impl RerankOptions {
    /// The library's reranking configuration, when --rerank is given.
    pub fn config(&self) -> Option<RerankConfig> {
        self.rerank.clone().map(|model| RerankConfig {
            model,
            depth: self.rerank_depth,
        })
    }

    /// The best `k` passages for `query` from `retriever`, reranked from the depth when --rerank
    /// is given (outside a pipeline: `lector search`, `ask --generate`).
    pub fn retrieve(&self, retriever: &dyn Retriever, query: &str, k: usize) -> Result<Vec<Hit>> {
        Ok(match self.config() {
            Some(rerank) => rerank.load()?.retrieve(retriever, rerank.depth, query, k)?,
            None => retriever.retrieve(query, k)?,
        })
    }
}

/// Pipeline configuration from the shared options of the commands that answer questions.
pub fn pipeline_config(
    model: Option<&std::path::Path>,
    retrieval: &RetrievalOptions,
    rerank: &RerankOptions,
) -> PipelineConfig {
    PipelineConfig {
        reader: model.map(|m| m.to_path_buf()),
        retrieval: retrieval.config(),
        rerank: rerank.config(),
    }
}

/// Tells the user on stderr (model fetches, warnings from building a pipeline).
pub fn notify(message: &str) {
    eprintln!("{message}");
}

pub fn run(args: SearchArgs) -> Result<()> {
    let store = args.store.open(&args.dir)?;
    let (options, embedder) = args.retrieval.config().resolve(store.as_ref(), &notify)?;
    let retriever = store.retriever(&options, embedder.as_deref())?;
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

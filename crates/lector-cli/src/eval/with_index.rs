//! `lector eval retrieval --index DIR --queries FILE`: runs the queries through lector's own
//! retriever, builds the run in memory and scores it like a run file.

use super::{score_answers, score_run, write_jsonl, RetrievalArgs};
use crate::search::bm25_params;
use anyhow::{bail, Context, Result};
use lector_eval::retrieval::{self, AnswerItem, Passage, Run};
use lector_index::{Index, Retriever};
use serde_json::Value;
use std::path::Path;

/// A query with its optional gold answers.
pub(super) struct Query {
    pub id: String,
    pub text: String,
    pub answers: Vec<String>,
}

pub(super) fn run(args: &RetrievalArgs) -> Result<()> {
    args.mode.check_available()?;
    let (Some(dir), Some(queries_path)) = (&args.index, &args.queries) else {
        bail!("--index needs --queries");
    };
    let index = Index::open(dir)?;
    let retriever = index.bm25(bm25_params(&index, args.k1, args.b)?);
    let queries = read_queries(queries_path)?;
    if queries.is_empty() {
        bail!("{}: no queries", queries_path.display());
    }
    if let Some(qrels_path) = &args.qrels {
        let qrels = retrieval::read_qrels(qrels_path)?;
        // Qrels judge documents: each document is ranked by its best passage (MaxP).
        let run = Run::from_rankings(queries.iter().map(|q| {
            let ranking = retriever
                .documents(&q.text, args.depth)
                .into_iter()
                .map(|h| (h.doc_id, h.score))
                .collect();
            (q.id.clone(), ranking)
        }));
        if let Some(out) = &args.run_out {
            write_run(&run, out)?;
        }
        return score_run(&run, queries_path, &qrels, qrels_path, args);
    }
    if queries.iter().all(|q| q.answers.is_empty()) {
        bail!(
            "{}: the queries carry no answers; give --qrels to score document rankings",
            queries_path.display()
        );
    }
    let items = answer_items(&queries, &retriever, args.max_k)?;
    if let Some(out) = &args.run_out {
        write_jsonl(out, &items)?;
    }
    score_answers(&items, queries_path, args)
}

fn answer_items(
    queries: &[Query],
    retriever: &impl Retriever,
    depth: usize,
) -> Result<Vec<AnswerItem>> {
    queries
        .iter()
        .map(|q| {
            let hits = retriever.retrieve(&q.text, depth)?;
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

fn write_run(run: &Run, path: &Path) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    run.write_trec("lector-bm25", &mut out)
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

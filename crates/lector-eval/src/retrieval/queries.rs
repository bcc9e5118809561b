//! Question sets for retrieval and open-domain evaluation: BEIR-style JSON lines, NQ-open lines,
//! or a SQuAD dataset.

use crate::input::{invalid, read_jsonl};
use crate::squad::read_dataset;
use crate::Result;
use serde_json::Value;
use std::path::Path;

/// A query with its gold answers (none for BEIR queries, which are judged by qrels).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledQuery {
    pub id: String,
    pub text: String,
    pub answers: Vec<String>,
}

/// BEIR-style JSON lines (`_id`/`id`/`qid`, `text`/`query`/`question`, optional `answers` or
/// `answer`), or a SQuAD dataset (`.json`) whose answerable questions become queries.
pub fn read_queries(path: &Path) -> Result<Vec<LabelledQuery>> {
    if path.extension().is_some_and(|e| e == "json") {
        return squad_queries(path);
    }
    let lines: Vec<Value> = read_jsonl(path)?;
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| query_line(path, i + 1, line))
        .collect()
}

fn query_line(path: &Path, number: usize, line: &Value) -> Result<LabelledQuery> {
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
    let text = pick(&["text", "query", "question"]).ok_or_else(|| {
        invalid(
            path,
            format!("record {number}: no `text` (or `query`, `question`) field"),
        )
    })?;
    let answers = match line.get("answers").or_else(|| line.get("answer")) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    Ok(LabelledQuery { id, text, answers })
}

fn squad_queries(path: &Path) -> Result<Vec<LabelledQuery>> {
    let dataset = read_dataset(path)?;
    // Unanswerable (SQuAD v2.0) questions have no answer to find and are left out.
    Ok(dataset
        .questions
        .into_iter()
        .filter(|q| q.has_answer())
        .map(|q| LabelledQuery {
            id: q.id,
            text: q.question,
            answers: q.answers,
        })
        .collect())
}

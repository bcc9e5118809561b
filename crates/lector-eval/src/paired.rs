//! Per-question score files of two systems, paired by question id for
//! [`crate::stats::compare_paired`] (`lector eval compare`).

use crate::input::{invalid, read_jsonl};
use crate::{Error, Result};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The value of `metric` per question id, in file order, from JSON lines with an `id` field
/// (`eval squad --per-question`, `eval odqa --per-question`, ...), or a `qid` with the metric in
/// `values` (`eval retrieval --per-query`). Booleans count as 0/1.
pub fn read_scores(path: &Path, metric: &str) -> Result<Vec<(String, f64)>> {
    let lines: Vec<Value> = read_jsonl(path)?;
    scores_of(&lines, metric, path)
}

/// [`read_scores`] of records already read; `source` names them in errors.
pub fn scores_of(lines: &[Value], metric: &str, source: &Path) -> Result<Vec<(String, f64)>> {
    let path = source;
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let record = i + 1;
            let id = match line.get("id").or_else(|| line.get("qid")) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => {
                    return Err(invalid(
                        path,
                        format!("record {record}: no string `id` (or `qid`) field"),
                    ))
                }
            };
            let found = line
                .get(metric)
                .or_else(|| line.get("values").and_then(|v| v.get(metric)));
            let value = match found {
                Some(Value::Bool(b)) => f64::from(u8::from(*b)),
                Some(v) => v.as_f64().ok_or_else(|| {
                    invalid(path, format!("record {record}: `{metric}` is not a number"))
                })?,
                None => {
                    return Err(invalid(
                        path,
                        format!("record {record}: no `{metric}` field"),
                    ))
                }
            };
            Ok((id, value))
        })
        .collect()
}

/// The two systems' scores in the order of `a`, paired by question id; refuses duplicate ids and
/// question sets that differ (a paired comparison needs the same questions).
pub fn align(
    path_a: &Path,
    a: &[(String, f64)],
    path_b: &Path,
    b: &[(String, f64)],
) -> Result<(Vec<f64>, Vec<f64>)> {
    let b_by_id: HashMap<&str, f64> = b.iter().map(|(id, v)| (id.as_str(), *v)).collect();
    let a_ids: HashSet<&str> = a.iter().map(|(id, _)| id.as_str()).collect();
    if a_ids.len() != a.len() || b_by_id.len() != b.len() {
        return Err(Error::Mismatch(
            "duplicate question ids: each file must score every question once".into(),
        ));
    }
    let only_a: Vec<&str> = a
        .iter()
        .map(|(id, _)| id.as_str())
        .filter(|id| !b_by_id.contains_key(id))
        .collect();
    let only_b: Vec<&str> = b
        .iter()
        .map(|(id, _)| id.as_str())
        .filter(|id| !a_ids.contains(id))
        .collect();
    if !only_a.is_empty() || !only_b.is_empty() {
        return Err(Error::Mismatch(format!(
            "the two files score different questions: {} only in {} (e.g. {:?}), {} only in {} (e.g. {:?}); \
             a paired comparison needs the same question set",
            only_a.len(),
            path_a.display(),
            only_a.iter().take(3).collect::<Vec<_>>(),
            only_b.len(),
            path_b.display(),
            only_b.iter().take(3).collect::<Vec<_>>()
        )));
    }
    let ys = a.iter().map(|(id, _)| b_by_id[id.as_str()]).collect();
    Ok((a.iter().map(|(_, v)| *v).collect(), ys))
}

/// What `lector eval compare --json` prints: both systems' means of `metric` over the same
/// questions, the difference `b - a` with its paired-bootstrap interval at `confidence`, and the
/// randomisation p-value.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    pub metric: String,
    pub questions: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    pub difference: crate::stats::Interval,
    pub confidence: f64,
    pub p_value: f64,
    pub trials: usize,
}

/// Pairs the two systems' per-question scores by id (see [`align`]) and compares them with
/// [`crate::stats::compare_paired`].
pub fn compare(
    (source_a, a): (&Path, &[(String, f64)]),
    (source_b, b): (&Path, &[(String, f64)]),
    metric: &str,
    settings: &crate::stats::Bootstrap,
    trials: usize,
) -> Result<Comparison> {
    let (xs, ys) = align(source_a, a, source_b, b)?;
    let result = crate::stats::compare_paired(&xs, &ys, settings, trials);
    Ok(Comparison {
        metric: metric.to_string(),
        questions: xs.len(),
        mean_a: result.mean_a,
        mean_b: result.mean_b,
        difference: result.difference,
        confidence: settings.confidence,
        p_value: result.p_value,
        trials: result.trials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
        pairs.iter().map(|(id, v)| (id.to_string(), *v)).collect()
    }

    #[test]
    fn pairs_by_id_in_the_first_files_order() {
        let a = scores(&[("q1", 1.0), ("q2", 0.0)]);
        let b = scores(&[("q2", 0.5), ("q1", 0.25)]);
        let (xs, ys) = align(Path::new("a"), &a, Path::new("b"), &b).unwrap();
        assert_eq!(xs, vec![1.0, 0.0]);
        assert_eq!(ys, vec![0.25, 0.5]);
    }

    #[test]
    fn refuses_different_or_duplicated_questions() {
        let a = scores(&[("q1", 1.0), ("q2", 0.0)]);
        let b = scores(&[("q1", 1.0), ("q3", 0.0)]);
        let err = align(Path::new("a"), &a, Path::new("b"), &b).unwrap_err();
        assert!(err.to_string().contains("1 only in a"), "{err}");
        let dup = scores(&[("q1", 1.0), ("q1", 0.0)]);
        assert!(align(Path::new("a"), &dup, Path::new("b"), &dup).is_err());
    }

    #[test]
    fn reads_retrieval_per_query_lines() {
        let lines: Vec<Value> = [
            r#"{"qid": "1", "values": {"ndcg@10": 0.5}}"#,
            r#"{"qid": 7, "values": {"ndcg@10": 1.0}}"#,
        ]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
        let got = scores_of(&lines, "ndcg@10", Path::new("run")).unwrap();
        assert_eq!(got, scores(&[("1", 0.5), ("7", 1.0)]));
        let err = scores_of(&lines, "map", Path::new("run")).unwrap_err();
        assert!(
            err.to_string().contains("record 1: no `map` field"),
            "{err}"
        );
    }
}

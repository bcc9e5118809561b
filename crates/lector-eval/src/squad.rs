//! SQuAD evaluation, identical to the official `evaluate-v1.1.py` and `evaluate-v2.0.py` scripts.
//!
//! The dataset's `version` field picks the rules: "1.1" data is scored like evaluate-v1.1.py (keys
//! `exact_match`, `f1`), anything else like evaluate-v2.0.py (keys `exact`, `f1`, `total`, HasAns/NoAns
//! breakdowns and, with no-answer probabilities, the best-threshold sweep). Sums run in dataset order
//! with the same floating-point expressions as the scripts, so the values agree to the last bit.
//!
//! One deliberate extension: a question with no prediction scores 0 and counts in every total (the v1.1
//! script's rule; the v2.0 script would crash on it). [`Evaluation::missing`] lists such questions.

use crate::error::Result;
use crate::input::{invalid, read_json};
use crate::normalize::normalized_tokens;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Which official script's rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SquadVersion {
    /// SQuAD v1.1: every question has answers; `exact_match` and `f1` only.
    V1_1,
    /// SQuAD v2.0: unanswerable questions, HasAns/NoAns breakdowns, no-answer thresholds.
    V2_0,
}

/// One question of a SQuAD dataset, with its gold answers.
#[derive(Debug, Clone)]
pub struct Question {
    pub id: String,
    pub question: String,
    /// Gold answer texts in file order (empty for unanswerable v2.0 questions).
    pub answers: Vec<String>,
    /// The context paragraph the question is asked about.
    pub context: String,
    /// The article title.
    pub title: String,
}

impl Question {
    /// `bool(qa['answers'])` in the official v2.0 script.
    pub fn has_answer(&self) -> bool {
        !self.answers.is_empty()
    }
}

/// A SQuAD dataset file: the questions in file order.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub version: SquadVersion,
    pub questions: Vec<Question>,
}

/// Reads a SQuAD json file (`{"version", "data": [{"title", "paragraphs": [{"context", "qas"}]}]}`).
pub fn read_dataset(path: &Path) -> Result<Dataset> {
    let root: Value = read_json(path)?;
    let version = match root.get("version").and_then(Value::as_str) {
        Some("1.1") => SquadVersion::V1_1,
        _ => SquadVersion::V2_0,
    };
    let articles = root.get("data").and_then(Value::as_array).ok_or_else(|| {
        invalid(
            path,
            "no `data` array at the top level: not a SQuAD dataset",
        )
    })?;
    let mut questions = Vec::new();
    for (a, article) in articles.iter().enumerate() {
        let title = article.get("title").and_then(Value::as_str).unwrap_or("");
        let paragraphs = field_array(path, article, "paragraphs", &format!("data[{a}]"))?;
        for (p, paragraph) in paragraphs.iter().enumerate() {
            let at = format!("data[{a}].paragraphs[{p}]");
            let context = field_str(path, paragraph, "context", &at)?;
            for (q, qa) in field_array(path, paragraph, "qas", &at)?.iter().enumerate() {
                let at = format!("{at}.qas[{q}]");
                questions.push(read_question(path, qa, &at, title, context)?);
            }
        }
    }
    Ok(Dataset { version, questions })
}

fn read_question(
    path: &Path,
    qa: &Value,
    at: &str,
    title: &str,
    context: &str,
) -> Result<Question> {
    let id = field_str(path, qa, "id", at)?.to_string();
    let question = qa.get("question").and_then(Value::as_str).unwrap_or("");
    let answers = field_array(path, qa, "answers", at)?
        .iter()
        .enumerate()
        .map(|(i, answer)| {
            Ok(field_str(path, answer, "text", &format!("{at}.answers[{i}]"))?.to_string())
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Question {
        id,
        question: question.to_string(),
        answers,
        context: context.to_string(),
        title: title.to_string(),
    })
}

fn field_array<'v>(path: &Path, value: &'v Value, key: &str, at: &str) -> Result<&'v Vec<Value>> {
    value
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(path, format!("{at}: missing or non-array field `{key}`")))
}

fn field_str<'v>(path: &Path, value: &'v Value, key: &str, at: &str) -> Result<&'v str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(path, format!("{at}: missing or non-string field `{key}`")))
}

/// Predictions: question id -> answer text ("" means no answer), in file order.
pub type Predictions = Vec<(String, String)>;

/// Reads a prediction file `{"qid": "answer", ...}`; a non-string value is an error naming the id.
pub fn read_predictions(path: &Path) -> Result<Predictions> {
    let map: Map<String, Value> = read_json(path)?;
    map.into_iter()
        .map(|(id, value)| match value {
            Value::String(answer) => Ok((id, answer)),
            other => Err(invalid(
                path,
                format!(
                    "prediction for `{id}` is {}, expected a string",
                    kind(&other)
                ),
            )),
        })
        .collect()
}

/// No-answer probabilities: question id -> P(no answer), in file order (the sweep's tie order).
pub type NaProbs = Vec<(String, f64)>;

/// Reads a no-answer probability file `{"qid": p, ...}` with every p a number in [0, 1].
pub fn read_na_probs(path: &Path) -> Result<NaProbs> {
    let map: Map<String, Value> = read_json(path)?;
    map.into_iter()
        .map(|(id, value)| match value.as_f64() {
            Some(p) if (0.0..=1.0).contains(&p) => Ok((id, p)),
            Some(p) => Err(invalid(
                path,
                format!("no-answer probability for `{id}` is {p}, outside [0, 1]"),
            )),
            None => Err(invalid(
                path,
                format!(
                    "no-answer probability for `{id}` is {}, expected a number",
                    kind(&value)
                ),
            )),
        })
        .collect()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// How one question scored.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionScore {
    pub id: String,
    /// The prediction, or `None` when the prediction file has no entry for this question.
    pub prediction: Option<String>,
    /// The gold answer with the highest F1 (the first on ties); "" for unanswerable questions.
    pub best_gold: String,
    /// Exact match after the no-answer threshold (0 or 1).
    pub em: f64,
    /// F1 after the no-answer threshold.
    pub f1: f64,
    pub has_ans: bool,
    pub na_prob: Option<f64>,
}

/// The result of [`evaluate`]: the official summary plus per-question scores.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub version: SquadVersion,
    /// The official output: the same keys, order and values as the official script's JSON.
    pub summary: Map<String, Value>,
    /// One entry per dataset question, in dataset order.
    pub questions: Vec<QuestionScore>,
    /// Ids of dataset questions without a prediction (scored 0).
    pub missing: Vec<String>,
}

/// Options of the v2.0 script: the no-answer probabilities and the threshold above which a question
/// is predicted unanswerable.
#[derive(Debug, Clone, Default)]
pub struct NoAnswer<'a> {
    pub probs: Option<&'a NaProbs>,
    pub threshold: f64,
}

/// Scores `predictions` against `dataset` with the official script of the dataset's version.
///
/// For v2.0 data, every predicted question must have a no-answer probability when `probs` is given.
pub fn evaluate(
    dataset: &Dataset,
    predictions: &Predictions,
    no_answer: &NoAnswer,
) -> Result<Evaluation> {
    let preds: HashMap<&str, &str> = predictions
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let probs: Option<HashMap<&str, f64>> = no_answer
        .probs
        .map(|p| p.iter().map(|(k, v)| (k.as_str(), *v)).collect());
    let mut raw = Vec::with_capacity(dataset.questions.len());
    let mut missing = Vec::new();
    for question in &dataset.questions {
        let prediction = preds.get(question.id.as_str()).copied();
        if prediction.is_none() {
            missing.push(question.id.clone());
        }
        let na_prob = match (&probs, prediction) {
            (Some(probs), Some(_)) => Some(*probs.get(question.id.as_str()).ok_or_else(|| {
                crate::Error::Mismatch(format!(
                    "the no-answer probability file has no entry for question `{}`",
                    question.id
                ))
            })?),
            _ => None,
        };
        raw.push(score_question(
            dataset.version,
            question,
            prediction,
            na_prob,
        ));
    }
    let summary = match dataset.version {
        SquadVersion::V1_1 => summary_v1(&raw),
        SquadVersion::V2_0 => summary_v2(dataset, &raw, no_answer, &preds),
    };
    let questions = raw
        .into_iter()
        .map(|r| apply_threshold(r, dataset.version, no_answer.threshold))
        .collect();
    Ok(Evaluation {
        version: dataset.version,
        summary,
        questions,
        missing,
    })
}

/// Raw (pre-threshold) scores of one question.
fn score_question(
    version: SquadVersion,
    q: &Question,
    prediction: Option<&str>,
    na_prob: Option<f64>,
) -> QuestionScore {
    let golds: Vec<&str> = match version {
        SquadVersion::V1_1 => q.answers.iter().map(String::as_str).collect(),
        SquadVersion::V2_0 => {
            let kept: Vec<&str> = q
                .answers
                .iter()
                .map(String::as_str)
                .filter(|a| !normalized_tokens(a).is_empty())
                .collect();
            if kept.is_empty() {
                vec![""]
            } else {
                kept
            }
        }
    };
    let (mut em, mut f1, mut best_gold) = (0.0, 0.0, golds.first().copied().unwrap_or(""));
    if let Some(pred) = prediction {
        let pred_tokens = normalized_tokens(pred);
        let mut best_f1 = f64::NEG_INFINITY;
        for gold in &golds {
            let gold_tokens = normalized_tokens(gold);
            em = f64::max(em, f64::from(u8::from(gold_tokens == pred_tokens)));
            let f = match version {
                SquadVersion::V1_1 => f1_v1(&pred_tokens, &gold_tokens),
                SquadVersion::V2_0 => f1_v2(&pred_tokens, &gold_tokens),
            };
            if f > best_f1 {
                best_f1 = f;
                best_gold = gold;
            }
        }
        f1 = best_f1.max(0.0);
    }
    QuestionScore {
        id: q.id.clone(),
        prediction: prediction.map(str::to_string),
        best_gold: best_gold.to_string(),
        em,
        f1,
        has_ans: q.has_answer(),
        na_prob,
    }
}

/// Exact match compares normalised strings; equal token lists are equal strings since tokens are
/// joined by single spaces.
fn common_count(pred: &[String], gold: &[String]) -> usize {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for token in gold {
        *counts.entry(token).or_default() += 1;
    }
    pred.iter()
        .filter(|t| match counts.get_mut(t.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .count()
}

/// `f1_score` of evaluate-v1.1.py.
fn f1_v1(pred: &[String], gold: &[String]) -> f64 {
    let same = common_count(pred, gold);
    if same == 0 {
        return 0.0;
    }
    harmonic(same, pred.len(), gold.len())
}

/// `compute_f1` of evaluate-v2.0.py: an empty side scores 1 only when both are empty.
fn f1_v2(pred: &[String], gold: &[String]) -> f64 {
    if pred.is_empty() || gold.is_empty() {
        return f64::from(u8::from(pred == gold));
    }
    f1_v1(pred, gold)
}

fn harmonic(same: usize, pred_len: usize, gold_len: usize) -> f64 {
    let precision = 1.0 * same as f64 / pred_len as f64;
    let recall = 1.0 * same as f64 / gold_len as f64;
    (2.0 * precision * recall) / (precision + recall)
}

/// `apply_no_ans_threshold`: above the threshold the prediction counts as "no answer".
fn apply_threshold(mut s: QuestionScore, version: SquadVersion, threshold: f64) -> QuestionScore {
    // Without a probability file the official script uses 0.0 for every predicted question.
    let na_prob = s.na_prob.or(s.prediction.as_ref().map(|_| 0.0));
    if version == SquadVersion::V2_0 && na_prob.is_some_and(|p| p > threshold) {
        let score = f64::from(u8::from(!s.has_ans));
        s.em = score;
        s.f1 = score;
    }
    s
}

fn summary_v1(raw: &[QuestionScore]) -> Map<String, Value> {
    let total = raw.len() as f64;
    let (em, f1) = raw
        .iter()
        .fold((0.0, 0.0), |(e, f), s| (e + s.em, f + s.f1));
    let mut out = Map::new();
    out.insert("exact_match".into(), (100.0 * em / total).into());
    out.insert("f1".into(), (100.0 * f1 / total).into());
    out
}

fn summary_v2(
    dataset: &Dataset,
    raw: &[QuestionScore],
    no_answer: &NoAnswer,
    preds: &HashMap<&str, &str>,
) -> Map<String, Value> {
    let scored: Vec<QuestionScore> = raw
        .iter()
        .cloned()
        .map(|s| apply_threshold(s, SquadVersion::V2_0, no_answer.threshold))
        .collect();
    let mut out = eval_dict(&scored, "");
    let has_ans: Vec<QuestionScore> = scored.iter().filter(|s| s.has_ans).cloned().collect();
    let no_ans: Vec<QuestionScore> = scored.iter().filter(|s| !s.has_ans).cloned().collect();
    if !has_ans.is_empty() {
        out.extend(eval_dict(&has_ans, "HasAns_"));
    }
    if !no_ans.is_empty() {
        out.extend(eval_dict(&no_ans, "NoAns_"));
    }
    if let Some(probs) = no_answer.probs {
        let num_no_ans = dataset.questions.iter().filter(|q| !q.has_answer()).count();
        let sweep = |metric: fn(&QuestionScore) -> f64| {
            best_threshold(raw, probs, preds, num_no_ans, metric)
        };
        let (best_exact, exact_thresh) = sweep(|s| s.em);
        let (best_f1, f1_thresh) = sweep(|s| s.f1);
        out.insert("best_exact".into(), best_exact.into());
        out.insert("best_exact_thresh".into(), exact_thresh.into());
        out.insert("best_f1".into(), best_f1.into());
        out.insert("best_f1_thresh".into(), f1_thresh.into());
    }
    out
}

/// `make_eval_dict`, with an optional key prefix.
fn eval_dict(scores: &[QuestionScore], prefix: &str) -> Map<String, Value> {
    let total = scores.len();
    let (em, f1) = scores
        .iter()
        .fold((0.0, 0.0), |(e, f), s| (e + s.em, f + s.f1));
    let mut out = Map::new();
    out.insert(format!("{prefix}exact"), (100.0 * em / total as f64).into());
    out.insert(format!("{prefix}f1"), (100.0 * f1 / total as f64).into());
    out.insert(format!("{prefix}total"), total.into());
    out
}

/// `find_best_thresh`: sweep the questions in ascending no-answer probability (stable, file order on
/// ties), predicting "no answer" for everything above the cut, and keep the best cut.
fn best_threshold(
    raw: &[QuestionScore],
    probs: &NaProbs,
    preds: &HashMap<&str, &str>,
    num_no_ans: usize,
    metric: fn(&QuestionScore) -> f64,
) -> (f64, f64) {
    let by_id: HashMap<&str, &QuestionScore> = raw
        .iter()
        .filter(|s| s.prediction.is_some())
        .map(|s| (s.id.as_str(), s))
        .collect();
    let mut order: Vec<&(String, f64)> = probs.iter().collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut current = num_no_ans as f64;
    let (mut best, mut best_thresh) = (current, 0.0);
    for (id, prob) in order {
        let Some(score) = by_id.get(id.as_str()) else {
            continue;
        };
        let diff = if score.has_ans {
            metric(score)
        } else if preds.get(id.as_str()).is_some_and(|p| !p.is_empty()) {
            -1.0
        } else {
            0.0
        };
        current += diff;
        if current > best {
            best = current;
            best_thresh = *prob;
        }
    }
    (100.0 * best / by_id.len() as f64, best_thresh)
}

/// Ids that appear in the predictions but not in the dataset (ignored, as by the official scripts).
pub fn unknown_predictions<'a>(dataset: &Dataset, predictions: &'a Predictions) -> Vec<&'a str> {
    let known: HashSet<&str> = dataset.questions.iter().map(|q| q.id.as_str()).collect();
    predictions
        .iter()
        .map(|(id, _)| id.as_str())
        .filter(|id| !known.contains(id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        normalized_tokens(s)
    }

    #[test]
    fn f1_counts_token_multisets() {
        assert_eq!(f1_v1(&toks("the cat sat"), &toks("a cat sat down")), 0.8);
        assert_eq!(f1_v1(&toks("cat cat"), &toks("cat")), 2.0 * 0.5 * 1.0 / 1.5);
        assert_eq!(f1_v1(&toks("dog"), &toks("cat")), 0.0);
    }

    #[test]
    fn v2_f1_treats_empty_sides_as_exact_match() {
        assert_eq!(f1_v2(&toks(""), &toks("")), 1.0);
        assert_eq!(f1_v2(&toks("the"), &toks("")), 1.0);
        assert_eq!(f1_v2(&toks("x"), &toks("")), 0.0);
        assert_eq!(f1_v1(&toks(""), &toks("")), 0.0);
    }

    #[test]
    fn threshold_turns_predictions_into_abstentions() {
        let s = QuestionScore {
            id: "q".into(),
            prediction: Some("x".into()),
            best_gold: String::new(),
            em: 0.0,
            f1: 0.0,
            has_ans: false,
            na_prob: Some(0.9),
        };
        assert_eq!(apply_threshold(s.clone(), SquadVersion::V2_0, 0.5).em, 1.0);
        assert_eq!(apply_threshold(s.clone(), SquadVersion::V2_0, 0.9).em, 0.0);
        assert_eq!(apply_threshold(s, SquadVersion::V1_1, 0.5).em, 0.0);
    }
}

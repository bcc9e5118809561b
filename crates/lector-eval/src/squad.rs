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
use crate::input::{invalid, parse_json, read_json_entries};
use crate::normalize::{normalize_answer, tokens_of};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

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
    /// The context paragraph the question is asked about (shared by the paragraph's questions).
    pub context: Arc<str>,
    /// The article title.
    pub title: Arc<str>,
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

impl Dataset {
    /// Keeps only the questions `predictions` answers: the `--skip-no-answer` rule of the MRQA
    /// script, where a question without a prediction leaves the total instead of scoring 0.
    pub fn retain_predicted(&mut self, predictions: &Predictions) {
        let ids: FxHashSet<&str> = predictions.iter().map(|(id, _)| id.as_str()).collect();
        self.questions.retain(|q| ids.contains(q.id.as_str()));
    }

    /// The questions' texts, in order (what a pipeline is asked).
    pub fn question_texts(&self) -> Vec<&str> {
        self.questions.iter().map(|q| q.question.as_str()).collect()
    }
}

/// A SQuAD file as written: articles, their paragraphs and questions. The one SQuAD parser of
/// lector: evaluation reads questions from it, ingestion reads paragraphs. Fields the official
/// scripts do not read (answer_start, is_impossible, ...) are ignored.
#[derive(Debug, Deserialize)]
pub struct SquadFile {
    pub version: Option<String>,
    pub data: Option<Vec<Article>>,
}

/// One article: a title and its paragraphs.
#[derive(Debug, Deserialize)]
pub struct Article {
    #[serde(default)]
    pub title: String,
    pub paragraphs: Vec<Paragraph>,
}

/// One paragraph and the questions asked about it.
#[derive(Debug, Deserialize)]
pub struct Paragraph {
    pub context: String,
    #[serde(default)]
    pub qas: Vec<Qa>,
}

/// One question with its gold answers.
#[derive(Debug, Deserialize)]
pub struct Qa {
    pub id: String,
    #[serde(default)]
    pub question: String,
    // Question files for `lector read` may carry no answers; they then score as unanswerable.
    #[serde(default)]
    pub answers: Vec<GoldAnswer>,
}

/// A gold answer's text, and where it starts in the context (characters) when the file says.
#[derive(Debug, Deserialize)]
pub struct GoldAnswer {
    pub text: String,
    /// Read by training (`lector train reader`), which needs the answer's position; evaluation
    /// ignores it, as the official scripts do.
    #[serde(default)]
    pub answer_start: Option<i64>,
}

/// Parses the SQuAD file `text` (read from `path`, named in errors); errors name the line.
pub fn parse_file(path: &Path, text: &str) -> Result<SquadFile> {
    parse_json(path, text, 0)
}

impl SquadFile {
    /// The articles; an error naming `path` when the top level has no `data` array.
    pub fn into_articles(self, path: &Path) -> Result<Vec<Article>> {
        self.data.ok_or_else(|| {
            invalid(
                path,
                "no `data` array at the top level: not a SQuAD dataset",
            )
        })
    }
}

/// Reads a SQuAD json file (`{"version", "data": [{"title", "paragraphs": [{"context", "qas"}]}]}`),
/// or an MRQA file (named `.jsonl` or `.jsonl.gz`: [`crate::mrqa`]), scored by its own rules.
pub fn read_dataset(path: &Path) -> Result<Dataset> {
    if crate::mrqa::is_mrqa_path(path) {
        return crate::mrqa::read_dataset(path);
    }
    parse_dataset(path, &crate::input::read_text(path)?)
}

/// [`read_dataset`] of the file's text (`path` names it in errors).
pub fn parse_dataset(path: &Path, text: &str) -> Result<Dataset> {
    let file: SquadFile = parse_json(path, text, 0)?;
    let version = match file.version.as_deref() {
        Some("1.1") => SquadVersion::V1_1,
        _ => SquadVersion::V2_0,
    };
    let mut questions = Vec::new();
    for article in file.into_articles(path)? {
        let title: Arc<str> = article.title.into();
        for paragraph in article.paragraphs {
            let context: Arc<str> = paragraph.context.into();
            questions.extend(paragraph.qas.into_iter().map(|qa| Question {
                id: qa.id,
                question: qa.question,
                answers: qa.answers.into_iter().map(|a| a.text).collect(),
                context: Arc::clone(&context),
                title: Arc::clone(&title),
            }));
        }
    }
    Ok(Dataset { version, questions })
}

/// Predictions: question id -> answer text ("" means no answer), in file order.
pub type Predictions = Vec<(String, String)>;

/// Reads a prediction file `{"qid": "answer", ...}`; a non-string value is an error naming the id.
pub fn read_predictions(path: &Path) -> Result<Predictions> {
    read_json_entries(path)?
        .into_iter()
        .map(|(id, value)| match value {
            Value::String(answer) => Ok((id, answer)),
            other => Err(invalid(
                path,
                format!(
                    "prediction for `{id}` is {}, expected a string",
                    crate::input::json_kind(&other)
                ),
            )),
        })
        .collect()
}

/// No-answer probabilities: question id -> P(no answer), in file order (the sweep's tie order).
pub type NaProbs = Vec<(String, f64)>;

/// Reads a no-answer probability file `{"qid": p, ...}` with every p a number in [0, 1].
pub fn read_na_probs(path: &Path) -> Result<NaProbs> {
    read_json_entries(path)?
        .into_iter()
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
                    crate::input::json_kind(&value)
                ),
            )),
        })
        .collect()
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
    let preds: FxHashMap<&str, &str> = predictions
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let probs: Option<FxHashMap<&str, f64>> = no_answer
        .probs
        .map(|p| p.iter().map(|(k, v)| (k.as_str(), *v)).collect());
    let mut inputs = Vec::with_capacity(dataset.questions.len());
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
        inputs.push((question, prediction, na_prob));
    }
    let raw = score_all(dataset.version, &inputs);
    let summary = match dataset.version {
        SquadVersion::V1_1 => summary_v1(&raw),
        SquadVersion::V2_0 => summary_v2(dataset, &raw, no_answer),
    };
    let questions = raw
        .into_iter()
        .map(|mut r| {
            (r.em, r.f1) = thresholded(&r, dataset.version, no_answer.threshold);
            r
        })
        .collect();
    Ok(Evaluation {
        version: dataset.version,
        summary,
        questions,
        missing,
    })
}

/// Scores every question, in order, split over the available cores (each score is independent).
fn score_all(
    version: SquadVersion,
    inputs: &[(&Question, Option<&str>, Option<f64>)],
) -> Vec<QuestionScore> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = inputs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = inputs
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|&(q, pred, na)| score_question(version, q, pred, na))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("scoring thread panicked"))
            .collect()
    })
}

/// Raw (pre-threshold) scores of one question.
fn score_question(
    version: SquadVersion,
    q: &Question,
    prediction: Option<&str>,
    na_prob: Option<f64>,
) -> QuestionScore {
    // Each gold answer normalised once; v2.0 drops golds that normalise to nothing.
    let mut golds: Vec<(&str, String)> = q
        .answers
        .iter()
        .map(|a| (a.as_str(), normalize_answer(a)))
        .filter(|(_, normalized)| version == SquadVersion::V1_1 || !normalized.is_empty())
        .collect();
    if version == SquadVersion::V2_0 && golds.is_empty() {
        golds.push(("", String::new()));
    }
    let (mut em, mut f1, mut best_gold) = (0.0, 0.0, golds.first().map_or("", |g| g.0));
    if let Some(pred) = prediction {
        let pred_norm = normalize_answer(pred);
        let pred_tokens = sorted_tokens(&pred_norm);
        let mut best_f1 = f64::NEG_INFINITY;
        for (gold, gold_norm) in &golds {
            em = f64::max(em, f64::from(u8::from(*gold_norm == pred_norm)));
            let gold_tokens = sorted_tokens(gold_norm);
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

/// SQuAD v1.1's F1 of one prediction against one gold answer (`f1_score` of evaluate-v1.1.py).
pub fn answer_f1(prediction: &str, gold: &str) -> f64 {
    let (pred, gold) = (normalize_answer(prediction), normalize_answer(gold));
    f1_v1(&sorted_tokens(&pred), &sorted_tokens(&gold))
}

/// Tokens of a normalised answer, sorted so that multiset intersections are a linear merge.
fn sorted_tokens(normalized: &str) -> Vec<&str> {
    let mut tokens = tokens_of(normalized);
    tokens.sort_unstable();
    tokens
}

/// Size of the multiset intersection of two sorted token lists (`Counter(a) & Counter(b)`).
fn common_count(pred: &[&str], gold: &[&str]) -> usize {
    let (mut i, mut j, mut same) = (0, 0, 0);
    while i < pred.len() && j < gold.len() {
        match pred[i].cmp(gold[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                same += 1;
                i += 1;
                j += 1;
            }
        }
    }
    same
}

/// `f1_score` of evaluate-v1.1.py.
fn f1_v1(pred: &[&str], gold: &[&str]) -> f64 {
    let same = common_count(pred, gold);
    if same == 0 {
        return 0.0;
    }
    harmonic(same, pred.len(), gold.len())
}

/// `compute_f1` of evaluate-v2.0.py: an empty side scores 1 only when both are empty.
fn f1_v2(pred: &[&str], gold: &[&str]) -> f64 {
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
/// Returns the (exact, f1) that count.
fn thresholded(s: &QuestionScore, version: SquadVersion, threshold: f64) -> (f64, f64) {
    // Without a probability file the official script uses 0.0 for every predicted question.
    let na_prob = s.na_prob.or(s.prediction.as_ref().map(|_| 0.0));
    if version == SquadVersion::V2_0 && na_prob.is_some_and(|p| p > threshold) {
        let score = f64::from(u8::from(!s.has_ans));
        return (score, score);
    }
    (s.em, s.f1)
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
) -> Map<String, Value> {
    let scored: Vec<(f64, f64, bool)> = raw
        .iter()
        .map(|s| {
            let t = thresholded(s, SquadVersion::V2_0, no_answer.threshold);
            (t.0, t.1, s.has_ans)
        })
        .collect();
    let mut out = eval_dict(scored.iter(), "");
    if scored.iter().any(|s| s.2) {
        out.extend(eval_dict(scored.iter().filter(|s| s.2), "HasAns_"));
    }
    if scored.iter().any(|s| !s.2) {
        out.extend(eval_dict(scored.iter().filter(|s| !s.2), "NoAns_"));
    }
    if let Some(probs) = no_answer.probs {
        let num_no_ans = dataset.questions.iter().filter(|q| !q.has_answer()).count();
        let [(best_exact, exact_thresh), (best_f1, f1_thresh)] =
            best_thresholds(raw, probs, num_no_ans);
        out.insert("best_exact".into(), best_exact.into());
        out.insert("best_exact_thresh".into(), exact_thresh.into());
        out.insert("best_f1".into(), best_f1.into());
        out.insert("best_f1_thresh".into(), f1_thresh.into());
    }
    out
}

/// `make_eval_dict` over (exact, f1, has_ans) triples, with an optional key prefix.
fn eval_dict<'a>(
    scores: impl Iterator<Item = &'a (f64, f64, bool)>,
    prefix: &str,
) -> Map<String, Value> {
    let (mut total, mut em, mut f1) = (0usize, 0.0, 0.0);
    for s in scores {
        total += 1;
        em += s.0;
        f1 += s.1;
    }
    let mut out = Map::new();
    out.insert(format!("{prefix}exact"), (100.0 * em / total as f64).into());
    out.insert(format!("{prefix}f1"), (100.0 * f1 / total as f64).into());
    out.insert(format!("{prefix}total"), total.into());
    out
}

/// `find_best_thresh` for exact and F1 in one pass: sweep the questions in ascending no-answer
/// probability (stable, file order on ties), predicting "no answer" for everything above the cut,
/// and keep the best cut. Uses the raw (pre-threshold) scores, like the official script.
fn best_thresholds(raw: &[QuestionScore], probs: &NaProbs, num_no_ans: usize) -> [(f64, f64); 2] {
    let by_id: FxHashMap<&str, &QuestionScore> = raw
        .iter()
        .filter(|s| s.prediction.is_some())
        .map(|s| (s.id.as_str(), s))
        .collect();
    let mut order: Vec<&(String, f64)> = probs.iter().collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let start = num_no_ans as f64;
    let mut current = [start, start];
    let mut best = [(start, 0.0), (start, 0.0)];
    for (id, prob) in order {
        let Some(score) = by_id.get(id.as_str()) else {
            continue;
        };
        let answered = score.prediction.as_deref().is_some_and(|p| !p.is_empty());
        for (i, metric) in [score.em, score.f1].into_iter().enumerate() {
            current[i] += match (score.has_ans, answered) {
                (true, _) => metric,
                (false, true) => -1.0,
                (false, false) => 0.0,
            };
            if current[i] > best[i].0 {
                best[i] = (current[i], *prob);
            }
        }
    }
    best.map(|(score, thresh)| (100.0 * score / by_id.len() as f64, thresh))
}

/// Ids that appear in the predictions but not in the dataset (ignored, as by the official scripts).
pub fn unknown_predictions<'a>(dataset: &Dataset, predictions: &'a Predictions) -> Vec<&'a str> {
    let known: FxHashSet<&str> = dataset.questions.iter().map(|q| q.id.as_str()).collect();
    predictions
        .iter()
        .map(|(id, _)| id.as_str())
        .filter(|id| !known.contains(id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<&'static str> {
        sorted_tokens(Box::leak(normalize_answer(s).into_boxed_str()))
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
        assert_eq!(thresholded(&s, SquadVersion::V2_0, 0.5), (1.0, 1.0));
        assert_eq!(thresholded(&s, SquadVersion::V2_0, 0.9), (0.0, 0.0));
        assert_eq!(thresholded(&s, SquadVersion::V1_1, 0.5), (0.0, 0.0));
    }
}

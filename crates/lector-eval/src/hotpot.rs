//! HotpotQA evaluation, identical to the official `hotpot_evaluate_v1.py` of the HotpotQA authors.
//!
//! A gold file is the official list of questions (`_id`, `question`, `answer`, `type`, `level`,
//! `supporting_facts: [[title, sentence index]]`, `context: [[title, [sentences]]]`); a prediction
//! file is `{"answer": {id: text}, "sp": {id: [[title, sentence index], ...]}}`.
//!
//! Twelve metrics, each the mean over the gold questions ([`METRIC_KEYS`]):
//!
//! - `em`, `f1`, `prec`, `recall`: the answer, SQuAD-normalised and compared token by token, except
//!   that a prediction or gold answer normalising to "yes", "no" or "noanswer" scores 0 unless both
//!   normalise to the same text;
//! - `sp_*`: the supporting facts, compared as *sets* of (title, sentence) pairs (a fact predicted
//!   twice counts once); `sp_em` is 1 when the sets are equal;
//! - `joint_*`: `joint_prec = prec * sp_prec`, `joint_recall = recall * sp_recall`, `joint_f1` their
//!   harmonic mean, `joint_em = em * sp_em`.
//!
//! A question missing from the prediction's `answer` (or `sp`) map scores 0 on the answer (or
//! supporting-fact) metrics and 0 on the joint metrics, and still counts in the denominator, as in
//! the official script. Per-question values ([`QuestionScores`]) follow the same rule, so every
//! metric of [`HotpotEval::metrics`] is exactly the mean of the per-question values of that key
//! (summed in gold order, like the script, so the values agree to the last bit).
//!
//! Inputs are checked more strictly than the script does: a supporting fact must be a
//! `[title, non-negative integer]` pair, and an answer a string. A prediction file may leave out
//! `answer` or `sp` entirely (every question then misses that part), where the script would crash.

use crate::error::Result;
use crate::input::{invalid, parse_json, read_json, read_text};
use crate::normalize::{normalize_answer, tokens_of};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;

/// The official metric names, in the official script's order.
pub const METRIC_KEYS: [&str; 12] = [
    "em",
    "f1",
    "prec",
    "recall",
    "sp_em",
    "sp_f1",
    "sp_prec",
    "sp_recall",
    "joint_em",
    "joint_f1",
    "joint_prec",
    "joint_recall",
];

/// One context paragraph: a Wikipedia title and its sentences ((de)serialised as the official
/// `[title, [sentences]]` pair).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(String, Vec<String>)", into = "(String, Vec<String>)")]
pub struct Paragraph {
    pub title: String,
    pub sentences: Vec<String>,
}

impl Paragraph {
    /// Sentences concatenated as HotpotQA does (they carry their own leading spaces).
    pub fn text(&self) -> String {
        self.sentences.concat()
    }

    /// Byte ranges of each sentence in [`Paragraph::text`].
    pub fn sentence_spans(&self) -> Vec<Range<usize>> {
        let mut start = 0;
        self.sentences
            .iter()
            .map(|sentence| {
                let span = start..start + sentence.len();
                start = span.end;
                span
            })
            .collect()
    }
}

impl From<(String, Vec<String>)> for Paragraph {
    fn from((title, sentences): (String, Vec<String>)) -> Self {
        Self { title, sentences }
    }
}

impl From<Paragraph> for (String, Vec<String>) {
    fn from(paragraph: Paragraph) -> Self {
        (paragraph.title, paragraph.sentences)
    }
}

/// The HotpotQA question type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuestionType {
    /// The answer is found by following an entity from one paragraph to the next.
    Bridge,
    /// Two entities are compared (yes/no questions are comparison questions).
    Comparison,
}

/// One supporting fact: a sentence of a context paragraph ((de)serialised as the official
/// `[title, sentence index]` pair).
#[derive(Clone, PartialEq, Eq, Hash, Ord, PartialOrd, Debug, Serialize, Deserialize)]
#[serde(from = "(String, usize)", into = "(String, usize)")]
pub struct SupportingFact {
    pub title: String,
    /// The sentence's index in its paragraph, from 0.
    pub sentence: usize,
}

impl From<(String, usize)> for SupportingFact {
    fn from((title, sentence): (String, usize)) -> Self {
        Self { title, sentence }
    }
}

impl From<SupportingFact> for (String, usize) {
    fn from(fact: SupportingFact) -> Self {
        (fact.title, fact.sentence)
    }
}

/// One HotpotQA question with its gold answer, supporting facts and context paragraphs
/// ((de)serialised in the official format: `_id`, `type`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    #[serde(rename = "_id")]
    pub id: String,
    pub question: String,
    pub answer: String,
    #[serde(rename = "type")]
    pub kind: QuestionType,
    /// "easy", "medium" or "hard" where the file says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    pub supporting_facts: Vec<SupportingFact>,
    pub context: Vec<Paragraph>,
}

impl Question {
    /// "yes"/"no" gold answers (normalised).
    pub fn is_yes_no(&self) -> bool {
        matches!(normalize_answer(&self.answer).as_str(), "yes" | "no")
    }

    /// The distinct titles of the supporting facts, in first-seen order (the gold paragraphs; 2 in
    /// HotpotQA).
    pub fn gold_titles(&self) -> Vec<&str> {
        let mut titles: Vec<&str> = Vec::with_capacity(2);
        for fact in &self.supporting_facts {
            if !titles.contains(&fact.title.as_str()) {
                titles.push(&fact.title);
            }
        }
        titles
    }

    /// "bridge", "comparison" or "yes/no" (yes/no questions are comparison questions in HotpotQA;
    /// the breakdown reports them apart).
    pub fn breakdown_type(&self) -> &'static str {
        match self.kind {
            _ if self.is_yes_no() => "yes/no",
            QuestionType::Bridge => "bridge",
            QuestionType::Comparison => "comparison",
        }
    }
}

/// Reads an official HotpotQA file (a JSON list of questions). Errors name the file and, for a
/// malformed question, its index, `_id` and field; a file without questions is an error.
pub fn read_dataset(path: &Path) -> Result<Vec<Question>> {
    parse_dataset(path, &read_text(path)?)
}

/// [`read_dataset`] of the file's text (`path` names it in errors).
pub fn parse_dataset(path: &Path, text: &str) -> Result<Vec<Question>> {
    let entries: Vec<Value> = parse_json(path, text, 0)?;
    if entries.is_empty() {
        return Err(invalid(path, "no questions: the list is empty"));
    }
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| question_from_json(index, entry).map_err(|e| invalid(path, e)))
        .collect()
}

/// One question of the file, or a message naming it and the faulty field.
fn question_from_json(index: usize, entry: Value) -> std::result::Result<Question, String> {
    let Value::Object(mut fields) = entry else {
        return Err(format!(
            "question {index}: expected an object, found {}",
            crate::input::json_kind(&entry)
        ));
    };
    let id: String = take(&mut fields, "_id").map_err(|e| format!("question {index}: {e}"))?;
    let named = |e: String| format!("question {index} (`_id` {id:?}): {e}");
    Ok(Question {
        question: take(&mut fields, "question").map_err(named)?,
        answer: take(&mut fields, "answer").map_err(named)?,
        kind: take(&mut fields, "type").map_err(named)?,
        level: take_optional::<Option<String>>(&mut fields, "level")
            .map_err(named)?
            .flatten(),
        supporting_facts: take_each(&mut fields, "supporting_facts").map_err(named)?,
        context: take_each(&mut fields, "context").map_err(named)?,
        id,
    })
}

/// Removes the required field `name` and converts it; the message names the field.
fn take<T: DeserializeOwned>(
    fields: &mut Map<String, Value>,
    name: &str,
) -> std::result::Result<T, String> {
    take_optional(fields, name)?.ok_or_else(|| format!("field `{name}` is missing"))
}

/// Removes field `name`, when present, and converts it; the message names the field.
fn take_optional<T: DeserializeOwned>(
    fields: &mut Map<String, Value>,
    name: &str,
) -> std::result::Result<Option<T>, String> {
    fields
        .remove(name)
        .map(|value| serde_json::from_value(value).map_err(|e| format!("field `{name}`: {e}")))
        .transpose()
}

/// Removes the list field `name` and converts each element; the message names the element.
fn take_each<T: DeserializeOwned>(
    fields: &mut Map<String, Value>,
    name: &str,
) -> std::result::Result<Vec<T>, String> {
    let items: Vec<Value> = take(fields, name)?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| serde_json::from_value(item).map_err(|e| format!("`{name}[{i}]`: {e}")))
        .collect()
}

/// Official prediction file: `{"answer": {id: text}, "sp": {id: [[title, idx], ...]}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Predictions {
    /// Question id -> predicted answer (`"answer"` in the file).
    #[serde(rename = "answer", default)]
    pub answers: BTreeMap<String, String>,
    /// Question id -> predicted supporting facts (`"sp"` in the file).
    #[serde(rename = "sp", default)]
    pub supporting_facts: BTreeMap<String, Vec<SupportingFact>>,
}

/// Reads an official prediction file; errors name the line and column of a malformed entry.
pub fn read_predictions(path: &Path) -> Result<Predictions> {
    read_json(path)
}

impl Predictions {
    /// Writes the predictions in the official format.
    pub fn write(&self, path: &Path) -> Result<()> {
        let io_error = |source| crate::Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::create(path).map_err(io_error)?;
        let mut writer = std::io::BufWriter::new(file);
        serde_json::to_writer(&mut writer, self).map_err(|e| io_error(e.into()))?;
        std::io::Write::flush(&mut writer).map_err(io_error)
    }
}

/// How one question scored: the twelve official values (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionScores {
    pub id: String,
    pub em: f64,
    pub f1: f64,
    pub prec: f64,
    pub recall: f64,
    pub sp_em: f64,
    pub sp_f1: f64,
    pub sp_prec: f64,
    pub sp_recall: f64,
    pub joint_em: f64,
    pub joint_f1: f64,
    pub joint_prec: f64,
    pub joint_recall: f64,
    /// Whether the prediction file has an answer for this question (else the answer and joint
    /// values are 0).
    pub answered: bool,
    /// Whether the prediction file has supporting facts for this question (else the `sp_*` and
    /// joint values are 0).
    pub has_sp: bool,
}

impl QuestionScores {
    /// The value of one of the [`METRIC_KEYS`]; `None` for another name.
    pub fn get(&self, key: &str) -> Option<f64> {
        Some(match key {
            "em" => self.em,
            "f1" => self.f1,
            "prec" => self.prec,
            "recall" => self.recall,
            "sp_em" => self.sp_em,
            "sp_f1" => self.sp_f1,
            "sp_prec" => self.sp_prec,
            "sp_recall" => self.sp_recall,
            "joint_em" => self.joint_em,
            "joint_f1" => self.joint_f1,
            "joint_prec" => self.joint_prec,
            "joint_recall" => self.joint_recall,
            _ => return None,
        })
    }
}

/// The result of [`evaluate`].
#[derive(Debug, Clone, PartialEq)]
pub struct HotpotEval {
    /// One entry per gold question, in gold order.
    pub questions: Vec<QuestionScores>,
    /// The official 12 keys ([`METRIC_KEYS`]) with the script's values: the mean of the
    /// per-question values (0 when there is no gold question, where the script divides by zero).
    pub metrics: BTreeMap<String, f64>,
    /// Gold questions without a predicted answer.
    pub missing_answers: usize,
    /// Gold questions without predicted supporting facts.
    pub missing_sp: usize,
}

/// Scores `predictions` against `gold` like the official script. Predictions for ids that are not
/// gold questions are ignored.
pub fn evaluate(gold: &[Question], predictions: &Predictions) -> HotpotEval {
    let questions: Vec<QuestionScores> = gold
        .iter()
        .map(|question| score_question(question, predictions))
        .collect();
    let metrics = METRIC_KEYS
        .iter()
        .map(|&key| (key.to_string(), mean_of(&questions, key)))
        .collect();
    HotpotEval {
        missing_answers: questions.iter().filter(|q| !q.answered).count(),
        missing_sp: questions.iter().filter(|q| !q.has_sp).count(),
        questions,
        metrics,
    }
}

/// The sum in gold order divided by the number of questions, as the script computes it.
fn mean_of(questions: &[QuestionScores], key: &str) -> f64 {
    if questions.is_empty() {
        return 0.0;
    }
    let sum: f64 = questions.iter().filter_map(|q| q.get(key)).sum();
    sum / questions.len() as f64
}

/// Exact match, F1, precision and recall of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Prf {
    em: f64,
    f1: f64,
    prec: f64,
    recall: f64,
}

fn score_question(question: &Question, predictions: &Predictions) -> QuestionScores {
    let answer = predictions
        .answers
        .get(&question.id)
        .map(|prediction| answer_scores(prediction, &question.answer));
    let sp = predictions
        .supporting_facts
        .get(&question.id)
        .map(|prediction| sp_scores(prediction, &question.supporting_facts));
    let joint = match (answer, sp) {
        (Some(answer), Some(sp)) => joint_scores(answer, sp),
        _ => Prf::default(),
    };
    let (a, s) = (answer.unwrap_or_default(), sp.unwrap_or_default());
    QuestionScores {
        id: question.id.clone(),
        em: a.em,
        f1: a.f1,
        prec: a.prec,
        recall: a.recall,
        sp_em: s.em,
        sp_f1: s.f1,
        sp_prec: s.prec,
        sp_recall: s.recall,
        joint_em: joint.em,
        joint_f1: joint.f1,
        joint_prec: joint.prec,
        joint_recall: joint.recall,
        answered: answer.is_some(),
        has_sp: sp.is_some(),
    }
}

/// `exact_match_score` and `f1_score` of the official script.
fn answer_scores(prediction: &str, gold: &str) -> Prf {
    let (prediction, gold) = (normalize_answer(prediction), normalize_answer(gold));
    let em = f64::from(u8::from(prediction == gold));
    // A yes/no (or "noanswer") answer on either side is right or wrong, never partly right.
    let special = |text: &str| matches!(text, "yes" | "no" | "noanswer");
    if prediction != gold && (special(&prediction) || special(&gold)) {
        return Prf {
            em,
            ..Prf::default()
        };
    }
    let (prediction_tokens, gold_tokens) = (tokens_of(&prediction), tokens_of(&gold));
    let same = common_tokens(&prediction_tokens, &gold_tokens);
    if same == 0 {
        return Prf {
            em,
            ..Prf::default()
        };
    }
    let prec = 1.0 * same as f64 / prediction_tokens.len() as f64;
    let recall = 1.0 * same as f64 / gold_tokens.len() as f64;
    Prf {
        em,
        f1: (2.0 * prec * recall) / (prec + recall),
        prec,
        recall,
    }
}

/// Size of the multiset intersection of two token lists (`Counter(a) & Counter(b)`).
fn common_tokens(a: &[&str], b: &[&str]) -> usize {
    let mut remaining: BTreeMap<&str, usize> = BTreeMap::new();
    for token in b {
        *remaining.entry(token).or_default() += 1;
    }
    a.iter()
        .filter(|token| match remaining.get_mut(*token) {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        })
        .count()
}

/// `update_sp` of the official script: facts compared as sets.
fn sp_scores(prediction: &[SupportingFact], gold: &[SupportingFact]) -> Prf {
    let predicted: BTreeSet<&SupportingFact> = prediction.iter().collect();
    let gold: BTreeSet<&SupportingFact> = gold.iter().collect();
    let tp = predicted.intersection(&gold).count();
    let (fp, fn_) = (predicted.len() - tp, gold.len() - tp);
    let ratio = |part: usize, whole: usize| {
        if whole > 0 {
            1.0 * part as f64 / whole as f64
        } else {
            0.0
        }
    };
    let prec = ratio(tp, tp + fp);
    let recall = ratio(tp, tp + fn_);
    Prf {
        em: f64::from(u8::from(fp + fn_ == 0)),
        f1: harmonic_or_zero(prec, recall),
        prec,
        recall,
    }
}

/// The joint metrics: products of the answer and supporting-fact values.
fn joint_scores(answer: Prf, sp: Prf) -> Prf {
    let prec = answer.prec * sp.prec;
    let recall = answer.recall * sp.recall;
    Prf {
        em: answer.em * sp.em,
        f1: harmonic_or_zero(prec, recall),
        prec,
        recall,
    }
}

fn harmonic_or_zero(prec: f64, recall: f64) -> f64 {
    if prec + recall > 0.0 {
        2.0 * prec * recall / (prec + recall)
    } else {
        0.0
    }
}

/// Both-gold-paragraphs recall at k: 1.0 when every gold title is among the first k ranked titles,
/// else 0.0 (1.0 for no gold title, vacuously).
pub fn both_found(gold_titles: &[&str], ranked_titles: &[&str], k: usize) -> f64 {
    let top = &ranked_titles[..k.min(ranked_titles.len())];
    f64::from(u8::from(
        gold_titles.iter().all(|title| top.contains(title)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(title: &str, sentence: usize) -> SupportingFact {
        SupportingFact {
            title: title.into(),
            sentence,
        }
    }

    #[test]
    fn yes_no_answers_are_all_or_nothing() {
        // Token overlap would give partial credit; the special case gives none.
        let wrong_yes = answer_scores("yes it is", "yes");
        assert_eq!(wrong_yes, Prf::default());
        assert_eq!(answer_scores("no", "no way"), Prf::default());
        assert_eq!(answer_scores("noanswer today", "noanswer"), Prf::default());
        assert_eq!(answer_scores("no", "No!").f1, 1.0);
        let right = answer_scores("Yes.", "yes");
        assert_eq!(
            (right.em, right.f1, right.prec, right.recall),
            (1.0, 1.0, 1.0, 1.0)
        );
    }

    #[test]
    fn answer_f1_counts_token_multisets() {
        let s = answer_scores("the cat sat sat", "a cat sat down");
        assert_eq!((s.em, s.prec, s.recall), (0.0, 2.0 / 3.0, 2.0 / 3.0));
        assert!((s.f1 - 2.0 / 3.0).abs() < 1e-15);
        assert_eq!(answer_scores("dog", "cat"), Prf::default());
    }

    #[test]
    fn supporting_facts_are_sets() {
        let gold = [fact("A", 0), fact("B", 2)];
        let twice = sp_scores(&[fact("A", 0), fact("A", 0), fact("B", 2)], &gold);
        assert_eq!(
            (twice.em, twice.prec, twice.recall, twice.f1),
            (1.0, 1.0, 1.0, 1.0)
        );
        let extra = sp_scores(&[fact("A", 0), fact("A", 0), fact("C", 1)], &gold);
        assert_eq!((extra.em, extra.prec, extra.recall), (0.0, 0.5, 0.5));
        assert_eq!(sp_scores(&[], &gold), Prf::default());
    }

    #[test]
    fn joint_values_multiply_answer_and_facts() {
        let answer = Prf {
            em: 0.0,
            f1: 0.5,
            prec: 0.5,
            recall: 0.5,
        };
        let sp = Prf {
            em: 1.0,
            f1: 0.8,
            prec: 1.0,
            recall: 2.0 / 3.0,
        };
        let joint = joint_scores(answer, sp);
        assert_eq!((joint.em, joint.prec, joint.recall), (0.0, 0.5, 1.0 / 3.0));
        assert!((joint.f1 - 0.4).abs() < 1e-15);
        assert_eq!(joint_scores(Prf::default(), sp), Prf::default());
    }

    #[test]
    fn missing_predictions_score_zero_and_count() {
        let question = Question {
            id: "q".into(),
            question: "?".into(),
            answer: "Paris".into(),
            kind: QuestionType::Bridge,
            level: None,
            supporting_facts: vec![fact("A", 0)],
            context: Vec::new(),
        };
        let mut predictions = Predictions::default();
        predictions.answers.insert("q".into(), "Paris".into());
        let eval = evaluate(std::slice::from_ref(&question), &predictions);
        assert_eq!((eval.missing_answers, eval.missing_sp), (0, 1));
        assert_eq!(eval.metrics["em"], 1.0);
        assert_eq!(eval.metrics["joint_em"], 0.0);
        assert_eq!(eval.metrics.len(), 12);
        assert!(eval.questions[0].answered && !eval.questions[0].has_sp);
    }

    #[test]
    fn both_found_needs_every_gold_title_in_the_top_k() {
        let ranked = ["A", "X", "B", "Y"];
        assert_eq!(both_found(&["A", "B"], &ranked, 3), 1.0);
        assert_eq!(both_found(&["A", "B"], &ranked, 2), 0.0);
        assert_eq!(both_found(&["B", "Z"], &ranked, 10), 0.0);
        assert_eq!(both_found(&["A"], &ranked, 0), 0.0);
    }

    #[test]
    fn paragraph_spans_index_the_text() {
        let paragraph = Paragraph {
            title: "T".into(),
            sentences: vec!["Première.".into(), " Second one.".into()],
        };
        let text = paragraph.text();
        let spans = paragraph.sentence_spans();
        assert_eq!(&text[spans[0].clone()], "Première.");
        assert_eq!(&text[spans[1].clone()], " Second one.");
        assert_eq!(spans[1].end, text.len());
    }

    #[test]
    fn question_helpers() {
        let mut question: Question = serde_json::from_str(
            r#"{"_id": "x", "question": "?", "answer": "No.", "type": "comparison",
                "supporting_facts": [["B", 1], ["A", 0], ["B", 0]], "context": [["A", ["s"]]]}"#,
        )
        .unwrap();
        assert_eq!(question.gold_titles(), ["B", "A"]);
        assert!(question.is_yes_no());
        assert_eq!(question.breakdown_type(), "yes/no");
        question.answer = "Nowhere".into();
        assert_eq!(question.breakdown_type(), "comparison");
    }
}

//! The no-answer threshold: choosing it on held-out questions, and storing it with an index.
//!
//! The pipeline abstains when its no-answer probability `na_prob` is above a threshold `t`.
//! Without calibration `t` is [`DEFAULT_THRESHOLD`] (0.5): the reader's own rule, "the null
//! score beats the best span". Calibration reads questions with their gold paragraphs
//! (answerable and unanswerable, SQuAD v2.0), and for each question keeps the best span, whether
//! it is right (EM, F1) and `na_prob`. Sorting the questions by `na_prob`, every cut `t` answers
//! exactly the questions with `na_prob <= t` ([`curve`]): coverage is their share, precision the
//! share of them answered exactly right (a span given to an unanswerable question is wrong), and
//! F1 the SQuAD v2.0 F1 over all questions (an abstention scores 1 on an unanswerable question,
//! 0 on an answerable one).
//!
//! - `max-f1`: the cut with the highest F1 (the official script's best-threshold sweep).
//! - `precision=P`: the most permissive cut whose precision is at least `P` (highest coverage;
//!   in terms of the confidence `1 - na_prob`, the lowest confidence still answered).
//!
//! The questions are read either with their gold paragraphs (the reader alone, as above), or, with
//! [`Reading::from_response`], as the pipeline really answers them: the top `k` passages retrieved
//! from the index, aggregated; the threshold then applies to the pipeline's `na_prob`.
//!
//! **Confidence.** The same questions fit a *confidence map* ([`fit_confidence`]): from the
//! answer's [`Candidate::log_odds`](crate::Candidate::log_odds) to the probability that the answer is right, an exact match
//! with a gold answer after SQuAD normalisation (lowercased, punctuation and articles removed,
//! whitespace collapsed: [`lector_eval::normalize`]); a span given to an unanswerable question is
//! wrong. Every question with a span counts, answered or not at the threshold, since the pipeline
//! shows candidates also when it abstains. Whether *abstaining* is right is not in scope: the
//! confidence is the probability that the given answer is right. The feature is the log-odds, not
//! the score: the score is its logistic, so it orders answers the same way, but scores crowd
//! just under 1 (9.2 and 7.4 in log-odds are 0.9999 and 0.9994) and beyond log-odds 37 they
//! round to exactly 1.0 in f64, erasing the order a map needs; log-odds keep it, spread out. The
//! map is isotonic regression or Platt scaling ([`lector_eval::calibration`]), and the pipeline
//! applies it to every candidate ([`Calibration::confidence_for`]).
//!
//! The chosen value and the map are stored as `calibration.json` in the index directory
//! ([`Calibration`]).

use crate::aggregate::{self, answer_score};
use crate::error::{io, Error, Result};
use crate::Response;
use lector_eval::calibration::{self as math, ReliabilityBin, DEFAULT_BINS};
/// The confidence maps, re-exported for crates that store or fit one without lector-eval.
pub use lector_eval::calibration::{ConfidenceMap, Method};
use lector_eval::report::Report;
use lector_eval::squad::{self, Dataset, NoAnswer, SquadVersion};
use lector_index::DocumentStore;
use lector_reader::{Prediction, ReadParams};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file name of a calibration inside an index directory. lector-index only ever deletes its
/// own segment and temporary files, so it leaves this file (and its `.tmp`) alone.
pub const CALIBRATION_FILE: &str = "calibration.json";

/// The threshold used without calibration: abstain when `na_prob > 0.5`, i.e. `null > best`.
pub const DEFAULT_THRESHOLD: f64 = 0.5;

const FORMAT_NAME: &str = "lector-calibration";
/// Version 2 adds `retrieved` and `confidence`; version-1 files load without them.
const FORMAT_VERSION: u32 = 2;
const READABLE_VERSIONS: [u32; 2] = [1, 2];

/// The feature a confidence map reads: [`Candidate::log_odds`](crate::Candidate::log_odds).
pub const CONFIDENCE_FEATURE: &str = "log_odds";

/// Folds of the cross-validated ECE [`fit_confidence`] reports.
pub const CROSS_VALIDATION_FOLDS: usize = 5;

/// A stored no-answer threshold and how it was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Always `lector-calibration`.
    pub format: String,
    /// The file format version.
    pub version: u32,
    /// Abstain when `na_prob` is above this.
    pub threshold: f64,
    /// The target it was chosen for (`max-f1` or `precision=P`).
    pub target: String,
    /// The reader checkpoint it was calibrated with (directory name).
    pub reader: String,
    /// The calibration data (file name).
    pub data: String,
    /// Questions read.
    pub questions: usize,
    /// At the threshold, in percent: SQuAD v2.0 EM and F1 over all questions, the share of
    /// questions answered, and the share of answered questions answered exactly right (`None`
    /// when the threshold answers nothing).
    pub exact: f64,
    pub f1: f64,
    pub coverage: f64,
    pub precision: Option<f64>,
    /// Passages read per question, retrieved from the index as `lector ask --k` retrieves them;
    /// `None`: each question's gold paragraph alone (and every version-1 file).
    #[serde(default)]
    pub retrieved: Option<usize>,
    /// The map from an answer's log-odds to the probability that it is right; `None` without one
    /// (version-1 files, `lector calibrate --confidence none`).
    #[serde(default)]
    pub confidence: Option<Confidence>,
}

/// A confidence map and what it was fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confidence {
    /// What the map reads: always [`CONFIDENCE_FEATURE`].
    pub feature: String,
    /// The map, tagged with its method.
    pub map: ConfidenceMap,
    /// Answers (questions with a span) it was fitted on, and how many of them were right.
    pub answers: usize,
    pub right: usize,
    /// Expected calibration error on those answers ([`DEFAULT_BINS`] bins) of the raw score
    /// (the candidate's `score` taken as a probability)...
    pub ece_raw: f64,
    /// ...and of the map, cross-validated over [`CROSS_VALIDATION_FOLDS`] folds of consecutive
    /// questions (each fold mapped by a map fitted on the others: an estimate for unseen
    /// questions); `None` with fewer than two answers.
    pub ece_cross_validated: Option<f64>,
}

impl Calibration {
    /// A calibration at `point`, chosen for `target`.
    pub fn new(
        point: &CurvePoint,
        target: Target,
        reader: &str,
        data: &str,
        questions: usize,
    ) -> Self {
        Calibration {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            threshold: point.threshold,
            target: target.to_string(),
            reader: reader.into(),
            data: data.into(),
            questions,
            exact: 100.0 * point.exact,
            f1: 100.0 * point.f1,
            coverage: 100.0 * point.coverage,
            precision: (point.answered > 0).then_some(100.0 * point.precision),
            retrieved: None,
            confidence: None,
        }
    }

    /// The probability that an answer with these log-odds is right, from the confidence map;
    /// `None` without one.
    pub fn confidence_for(&self, log_odds: f64) -> Option<f64> {
        self.confidence.as_ref().map(|c| c.map.apply(log_odds))
    }

    /// The calibration stored in `index_dir`, or `None` when there is none.
    pub fn load(index_dir: &Path) -> Result<Option<Calibration>> {
        let path = index_dir.join(CALIBRATION_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// The calibration kept with `store` (any document store), or `None` when there is none.
    pub fn load_from(store: &(impl DocumentStore + ?Sized)) -> Result<Option<Calibration>> {
        let path = Path::new(&store.location()).join(CALIBRATION_FILE);
        match store.read_file(CALIBRATION_FILE)? {
            Some(text) => Self::parse(&text, &path).map(Some),
            None => Ok(None),
        }
    }

    /// Keeps the calibration with `store` ([`DocumentStore::write_file`]).
    pub fn save_to(&self, store: &(impl DocumentStore + ?Sized)) -> Result<()> {
        Ok(store.write_file(CALIBRATION_FILE, &self.to_text())?)
    }

    fn to_text(&self) -> String {
        serde_json::to_string_pretty(self).expect("calibration serialises") + "\n"
    }

    /// A calibration from its JSON text (read from `path`, named in errors), checked.
    fn parse(text: &str, path: &Path) -> Result<Calibration> {
        let invalid = |message: String| Error::Calibration {
            path: path.to_path_buf(),
            message,
        };
        let calibration: Calibration = serde_json::from_str(text).map_err(|e| {
            invalid(format!(
                "not a lector calibration: {e} (run `lector calibrate` again)"
            ))
        })?;
        if calibration.format != FORMAT_NAME || !READABLE_VERSIONS.contains(&calibration.version) {
            return Err(invalid(format!(
                "format `{}` version {} is not supported (this lector reads {FORMAT_NAME} versions 1 and {FORMAT_VERSION})",
                calibration.format, calibration.version
            )));
        }
        if let Some(confidence) = &calibration.confidence {
            if confidence.feature != CONFIDENCE_FEATURE {
                return Err(invalid(format!(
                    "confidence.feature `{}` is not supported (only `{CONFIDENCE_FEATURE}`)",
                    confidence.feature
                )));
            }
            confidence
                .map
                .validate()
                .map_err(|e| invalid(format!("confidence.map: {e}")))?;
        }
        if !(0.0..=1.0).contains(&calibration.threshold) {
            return Err(invalid(format!(
                "threshold {} is outside [0, 1]",
                calibration.threshold
            )));
        }
        Ok(calibration)
    }

    /// Stores the calibration in `index_dir` durably (temporary file, fsync, rename, fsync of
    /// the directory: a crash leaves either the old file or the new one) under the index's
    /// writer lock, so it fails, naming the lock, while a writer holds the index. Read-only
    /// servers of the index load the new file within a second.
    pub fn save(&self, index_dir: &Path) -> Result<()> {
        Ok(lector_index::write_locked(
            index_dir,
            CALIBRATION_FILE,
            self.to_text().as_bytes(),
        )?)
    }
}

/// What a calibration optimises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// The highest SQuAD v2.0 F1.
    MaxF1,
    /// The highest coverage whose answered precision (exact match) is at least this.
    Precision(f64),
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "max-f1" {
            return Ok(Target::MaxF1);
        }
        match s.strip_prefix("precision=").map(str::parse::<f64>) {
            Some(Ok(p)) if p > 0.0 && p <= 1.0 => Ok(Target::Precision(p)),
            Some(_) => Err(format!("`{s}`: the precision must be a number in (0, 1]")),
            None => Err(format!(
                "unknown target `{s}` (max-f1 or precision=P, e.g. precision=0.9)"
            )),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Target::MaxF1 => f.write_str("max-f1"),
            Target::Precision(p) => write!(f, "precision={p}"),
        }
    }
}

/// One calibration question: the reader's no-answer probability and how its best span scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    /// The reader's `na_prob`.
    pub na_prob: f64,
    /// Whether the question has a gold answer.
    pub has_answer: bool,
    /// Exact match of the best span (0 or 1; 0 for unanswerable questions).
    pub exact: f64,
    /// F1 of the best span (0 for unanswerable questions).
    pub f1: f64,
}

/// The outcome of answering exactly the questions with `na_prob <= threshold`. Shares are
/// fractions in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    pub threshold: f64,
    /// Questions answered.
    pub answered: usize,
    /// Share of questions answered.
    pub coverage: f64,
    /// Share of answered questions answered exactly right (NaN when none is answered).
    pub precision: f64,
    /// SQuAD v2.0 exact match over all questions.
    pub exact: f64,
    /// SQuAD v2.0 F1 over all questions.
    pub f1: f64,
}

/// Every distinct cut, ascending: a first point at threshold 0, then one per distinct `na_prob`.
pub fn curve(questions: &[Judged]) -> Vec<CurvePoint> {
    let mut sorted: Vec<&Judged> = questions.iter().collect();
    sorted.sort_by(|a, b| a.na_prob.total_cmp(&b.na_prob));
    let n = questions.len().max(1) as f64;
    let no_answer = questions.iter().filter(|q| !q.has_answer).count() as f64;
    // Abstaining on everything: every unanswerable question is right.
    let (mut answered, mut right, mut exact, mut f1) = (0usize, 0.0, no_answer, no_answer);
    let mut points = Vec::new();
    let mut i = 0;
    let mut threshold = 0.0;
    loop {
        while i < sorted.len() && sorted[i].na_prob <= threshold {
            let q = sorted[i];
            answered += 1;
            right += q.exact;
            // Answering replaces an abstention's score with the span's.
            let abstained = f64::from(u8::from(!q.has_answer));
            exact += q.exact - abstained;
            f1 += q.f1 - abstained;
            i += 1;
        }
        points.push(CurvePoint {
            threshold,
            answered,
            coverage: answered as f64 / n,
            precision: right / answered as f64,
            exact: exact / n,
            f1: f1 / n,
        });
        match sorted.get(i) {
            Some(q) => threshold = q.na_prob,
            None => return points,
        }
    }
}

/// The point of `curve` that `target` picks: the highest F1 (the lowest threshold on ties), or
/// the highest threshold whose precision reaches `P`. `None` when no cut reaches the precision.
pub fn choose(target: Target, curve: &[CurvePoint]) -> Option<CurvePoint> {
    match target {
        Target::MaxF1 => curve
            .iter()
            .fold(None, |best: Option<&CurvePoint>, p| match best {
                Some(b) if b.f1 >= p.f1 => Some(b),
                _ => Some(p),
            })
            .copied(),
        Target::Precision(min) => curve
            .iter()
            .rev()
            .find(|p| p.answered > 0 && p.precision >= min)
            .copied(),
    }
}

/// The point of `curve` in effect at `threshold` (the last cut at or below it).
pub fn point_at(curve: &[CurvePoint], threshold: f64) -> Option<CurvePoint> {
    curve
        .iter()
        .take_while(|p| p.threshold <= threshold)
        .last()
        .copied()
}

/// The reader settings calibration reads with: `handle_impossible_answer` makes the reader score
/// the null answer, and the best span is kept next to it (the threshold decides, not the 0.5 rule).
pub fn read_params() -> ReadParams {
    ReadParams {
        top_k: 2,
        handle_impossible_answer: true,
        ..ReadParams::default()
    }
}

/// A threshold fitted on labelled questions: the whole curve, the chosen cut and the default's.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub curve: Vec<CurvePoint>,
    pub chosen: CurvePoint,
    pub default: CurvePoint,
}

/// What was answered to one calibration question: the best span and how sure of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The best span ("" when there is none).
    pub span: String,
    /// The no-answer probability the threshold is compared with.
    pub na_prob: f64,
    /// The span's log-odds against "no answer" (the confidence map's feature; -inf without a span).
    pub log_odds: f64,
    /// The span's score (0 without a span).
    pub score: f64,
}

impl Reading {
    /// The reader alone on a gold paragraph, read with [`read_params`]: the best non-empty span,
    /// with the log-odds and score the pipeline gives a span read in the passage at rank 1.
    pub fn from_prediction(p: &Prediction) -> Reading {
        let best = p.answers.iter().find(|a| !a.answer.is_empty());
        Reading {
            span: best.map_or_else(String::new, |a| a.answer.clone()),
            na_prob: p.na_prob,
            log_odds: best.map_or(f64::NEG_INFINITY, |a| {
                aggregate::log_odds(a.score, p.null_score)
            }),
            score: best.map_or(0.0, |a| answer_score(a.score, p.null_score)),
        }
    }

    /// The pipeline's response: its first candidate (also when it abstained) and its `na_prob`.
    pub fn from_response(r: &Response) -> Reading {
        let top = r.candidates.first();
        Reading {
            span: top.map_or_else(String::new, |c| c.text.clone()),
            na_prob: r.na_prob,
            log_odds: top.map_or(f64::NEG_INFINITY, |c| c.log_odds),
            score: top.map_or(0.0, |c| c.score),
        }
    }
}

/// One answer to a calibration question: its log-odds, its raw score and whether it is right.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub log_odds: f64,
    pub score: f64,
    /// An exact match with a gold answer after SQuAD normalisation.
    pub right: bool,
}

/// Calibration questions judged against their gold answers.
#[derive(Debug, Clone)]
pub struct Judgement {
    /// Every question, for the threshold sweep.
    pub questions: Vec<Judged>,
    /// Every question with a span, in order, for the confidence map.
    pub answers: Vec<Scored>,
    /// The official script's max-F1 threshold (SQuAD v2.0 data only).
    pub official_threshold: Option<f64>,
}

/// Judges `readings` (one per question of `dataset`, in order) against the gold answers.
pub fn judge(dataset: &Dataset, readings: &[Reading]) -> Result<Judgement> {
    if readings.len() != dataset.questions.len() {
        return Err(Error::Options(format!(
            "{} readings for {} questions",
            readings.len(),
            dataset.questions.len()
        )));
    }
    let spans: squad::Predictions = dataset
        .questions
        .iter()
        .zip(readings)
        .map(|(q, r)| (q.id.clone(), r.span.clone()))
        .collect();
    let probs: squad::NaProbs = dataset
        .questions
        .iter()
        .zip(readings)
        .map(|(q, r)| (q.id.clone(), r.na_prob))
        .collect();
    let no_answer = NoAnswer {
        probs: Some(&probs),
        threshold: 1.0,
    };
    let evaluation = squad::evaluate(dataset, &spans, &no_answer)?;
    let official_threshold = match dataset.version {
        SquadVersion::V2_0 => evaluation
            .summary
            .get("best_f1_thresh")
            .and_then(|v| v.as_f64()),
        SquadVersion::V1_1 => None,
    };
    let questions: Vec<Judged> = evaluation
        .questions
        .iter()
        .zip(readings)
        .map(|(s, r)| Judged {
            na_prob: r.na_prob,
            has_answer: s.has_ans,
            exact: if s.has_ans { s.em } else { 0.0 },
            f1: if s.has_ans { s.f1 } else { 0.0 },
        })
        .collect();
    let answers = questions
        .iter()
        .zip(readings)
        .filter(|(_, r)| !r.span.is_empty())
        .map(|(q, r)| Scored {
            log_odds: r.log_odds,
            score: r.score,
            right: q.exact == 1.0,
        })
        .collect();
    Ok(Judgement {
        questions,
        answers,
        official_threshold,
    })
}

/// Fits the threshold for `target` on judged questions. max-f1 takes the official script's
/// sweep where it applies (SQuAD v2.0); precision=P the most permissive cut that reaches P.
pub fn fit(judgement: &Judgement, target: Target) -> Result<Fitted> {
    let curve = curve(&judgement.questions);
    let chosen = match (target, judgement.official_threshold) {
        (Target::MaxF1, Some(thresh)) => point_at(&curve, thresh),
        _ => choose(target, &curve),
    };
    let Some(chosen) = chosen else {
        let best = curve
            .iter()
            .filter(|p| p.answered > 0)
            .map(|p| p.precision)
            .fold(0.0, f64::max);
        return Err(Error::Options(format!(
            "no threshold reaches {target}: the highest precision on this data is {best:.4}"
        )));
    };
    let default = point_at(&curve, DEFAULT_THRESHOLD).expect("the curve starts at 0");
    Ok(Fitted {
        curve,
        chosen,
        default,
    })
}

/// Fits a confidence map of `method` to the answers, with the raw score's ECE and the map's
/// cross-validated ECE on them.
pub fn fit_confidence(method: Method, answers: &[Scored]) -> Result<Confidence> {
    if answers.is_empty() {
        return Err(Error::Options(
            "no calibration question got an answer span: nothing to fit the confidence map on"
                .into(),
        ));
    }
    let samples: Vec<(f64, bool)> = answers.iter().map(|a| (a.log_odds, a.right)).collect();
    let fit_error =
        |e: math::CalibrationError| Error::Options(format!("cannot fit the confidence map: {e}"));
    let map = ConfidenceMap::fit(method, &samples).map_err(fit_error)?;
    let held_out =
        math::cross_validate(method, &samples, CROSS_VALIDATION_FOLDS).map_err(fit_error)?;
    let ece_cross_validated = (!held_out.is_empty()).then(|| {
        let pairs: Vec<(f64, bool)> = held_out
            .iter()
            .zip(answers)
            .map(|(&p, a)| (p, a.right))
            .collect();
        math::expected_calibration_error(&pairs, DEFAULT_BINS)
    });
    Ok(Confidence {
        feature: CONFIDENCE_FEATURE.into(),
        map,
        answers: answers.len(),
        right: answers.iter().filter(|a| a.right).count(),
        ece_raw: math::expected_calibration_error(&raw_pairs(answers), DEFAULT_BINS),
        ece_cross_validated,
    })
}

fn raw_pairs(answers: &[Scored]) -> Vec<(f64, bool)> {
    answers.iter().map(|a| (a.score, a.right)).collect()
}

/// How well confidences match a set of answers: the raw score, and a map's confidences.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfidenceCheck {
    /// Answers checked, and how many of them are right.
    pub answers: usize,
    pub right: usize,
    /// ECE ([`DEFAULT_BINS`] bins) of the raw score taken as a probability.
    pub ece_raw: f64,
    /// ECE of the map's confidences (`None` without a map).
    pub ece_calibrated: Option<f64>,
    /// The reliability bins behind both.
    pub bins_raw: Vec<ReliabilityBin>,
    pub bins_calibrated: Option<Vec<ReliabilityBin>>,
}

/// Checks the raw scores of `answers` and, when given, `map`'s confidences against whether the
/// answers are right.
pub fn check_confidence(map: Option<&ConfidenceMap>, answers: &[Scored]) -> ConfidenceCheck {
    let bins_raw = math::reliability(&raw_pairs(answers), DEFAULT_BINS);
    let bins_calibrated = map.map(|m| {
        let pairs: Vec<(f64, bool)> = answers
            .iter()
            .map(|a| (m.apply(a.log_odds), a.right))
            .collect();
        math::reliability(&pairs, DEFAULT_BINS)
    });
    ConfidenceCheck {
        answers: answers.len(),
        right: answers.iter().filter(|a| a.right).count(),
        ece_raw: math::ece_of_bins(&bins_raw),
        ece_calibrated: bins_calibrated.as_deref().map(math::ece_of_bins),
        bins_raw,
        bins_calibrated,
    }
}

impl ConfidenceCheck {
    /// Adds the reliability diagram (raw and calibrated) and the ECE table to `report`;
    /// `cross_validated` is the fit's held-out estimate, when the map was fitted on these answers
    /// (the calibrated row is then in-sample, and says so).
    pub fn add_to(&self, report: &mut Report, cross_validated: Option<f64>) {
        let mut series: Vec<(&str, &[ReliabilityBin])> = vec![("raw score", &self.bins_raw)];
        if let Some(bins) = &self.bins_calibrated {
            series.push(("calibrated confidence", bins));
        }
        report.reliability(
            "Reliability: accuracy of the answers against their confidence",
            &series,
        );
        let ece = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.4}"));
        let mut rows = vec![
            vec!["raw score".to_string(), ece(Some(self.ece_raw))],
            vec![
                match cross_validated {
                    Some(_) => "calibrated (on the answers it was fitted on)",
                    None => "calibrated",
                }
                .to_string(),
                ece(self.ece_calibrated),
            ],
        ];
        if cross_validated.is_some() {
            rows.push(vec![
                format!("calibrated, {CROSS_VALIDATION_FOLDS}-fold cross-validated"),
                ece(cross_validated),
            ]);
        }
        report.table("Expected calibration error", &["confidence", "ECE"], &rows);
        report.note(&format!(
            "{} answers (questions with a span), {} right (exact match with a gold answer after SQuAD \
             normalisation; a span for an unanswerable question is wrong). ECE: answers in {DEFAULT_BINS} \
             equal-width confidence bins, the mean |accuracy - confidence| of the bins weighted by their \
             counts. Raw score: the candidate's score taken as a probability.",
            self.answers, self.right
        ));
    }
}

/// At most this many points per chart: a curve over 10,000 cuts would be a 1 MB SVG.
const CHART_POINTS: usize = 400;

impl Fitted {
    /// The HTML report: accuracy and F1 against coverage, and the chosen and default cuts.
    pub fn html_report(&self, data: &Path, target: Target) -> Report {
        let step = self.curve.len().div_ceil(CHART_POINTS).max(1);
        let sampled: Vec<&CurvePoint> = self
            .curve
            .iter()
            .step_by(step)
            .chain(self.curve.last())
            .filter(|p| p.answered > 0)
            .collect();
        let mut report = Report::new(format!("No-answer calibration: {}", data.display()));
        let accuracy: Vec<(f64, f64)> = sampled.iter().map(|p| (p.coverage, p.precision)).collect();
        report.curve(
            "Accuracy of the answered questions against coverage",
            &accuracy,
            1.0,
            "coverage (share answered)",
            "exact-match precision",
        );
        let f1: Vec<(f64, f64)> = sampled.iter().map(|p| (p.coverage, p.f1)).collect();
        report.curve(
            "SQuAD v2.0 F1 (all questions) against coverage",
            &f1,
            1.0,
            "coverage (share answered)",
            "F1",
        );
        let percent = |v: f64| format!("{:.2}", 100.0 * v);
        let row = |label: &str, threshold: f64, p: &CurvePoint| {
            vec![
                label.to_string(),
                format!("{threshold}"),
                percent(p.coverage),
                p.precision_percent(),
                percent(p.exact),
                percent(p.f1),
            ]
        };
        report.table(
            "Thresholds",
            &[
                "",
                "threshold",
                "coverage (%)",
                "precision (%)",
                "exact (%)",
                "F1 (%)",
            ],
            &[
                row(
                    &format!("chosen ({target})"),
                    self.chosen.threshold,
                    &self.chosen,
                ),
                row("default", DEFAULT_THRESHOLD, &self.default),
            ],
        );
        report.note(
            "A question is answered when its no-answer probability is at most the threshold. Precision: \
             answered questions whose best span matches a gold answer exactly (a span for an unanswerable \
             question is wrong). F1: SQuAD v2.0 F1 over all questions, an abstention scoring 1 on an \
             unanswerable question and 0 on an answerable one.",
        );
        report
    }
}

impl CurvePoint {
    /// Precision in percent with two decimals, or "-" when the cut answers nothing.
    pub fn precision_percent(&self) -> String {
        if self.answered > 0 {
            format!("{:.2}", 100.0 * self.precision)
        } else {
            "-".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(na_prob: f64, has_answer: bool, exact: f64) -> Judged {
        Judged {
            na_prob,
            has_answer,
            exact,
            f1: exact,
        }
    }

    #[test]
    fn curve_counts_answers_and_abstentions() {
        let questions = [
            q(0.1, true, 1.0),
            q(0.2, true, 0.0),
            q(0.2, true, 1.0),
            q(0.7, false, 0.0),
        ];
        let c = curve(&questions);
        let at: Vec<(f64, usize)> = c.iter().map(|p| (p.threshold, p.answered)).collect();
        assert_eq!(at, [(0.0, 0), (0.1, 1), (0.2, 3), (0.7, 4)]);
        assert_eq!(c[0].f1, 0.25);
        assert!(c[0].precision.is_nan());
        assert_eq!((c[1].precision, c[1].f1), (1.0, 0.5));
        assert_eq!((c[2].precision, c[2].f1), (2.0 / 3.0, 0.75));
        assert_eq!((c[3].precision, c[3].f1, c[3].coverage), (0.5, 0.5, 1.0));
        assert_eq!(choose(Target::MaxF1, &c).unwrap().threshold, 0.2);
        assert_eq!(choose(Target::Precision(0.6), &c).unwrap().threshold, 0.2);
        assert_eq!(choose(Target::Precision(0.9), &c).unwrap().threshold, 0.1);
        assert_eq!(point_at(&c, 0.5).unwrap().threshold, 0.2);
        let hopeless = curve(&[q(0.3, true, 0.0)]);
        assert_eq!(choose(Target::Precision(0.5), &hopeless), None);
    }

    #[test]
    fn targets_parse() {
        assert_eq!("max-f1".parse::<Target>(), Ok(Target::MaxF1));
        assert_eq!(
            "precision=0.9".parse::<Target>(),
            Ok(Target::Precision(0.9))
        );
        assert!("precision=1.5".parse::<Target>().is_err());
        assert!("recall=0.9".parse::<Target>().is_err());
        assert_eq!(Target::Precision(0.9).to_string(), "precision=0.9");
    }

    /// A version-1 file as lector wrote it before confidence maps.
    const VERSION_1: &str = r#"{
  "format": "lector-calibration",
  "version": 1,
  "threshold": 0.25,
  "target": "max-f1",
  "reader": "reader-minilm-squad",
  "data": "dev-v2.0.json",
  "questions": 60,
  "exact": 61.5,
  "f1": 64.2,
  "coverage": 55.0,
  "precision": 80.1
}"#;

    #[test]
    fn version_one_files_still_load_without_a_map() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CALIBRATION_FILE), VERSION_1).unwrap();
        let loaded = Calibration::load(dir.path()).unwrap().unwrap();
        assert_eq!((loaded.version, loaded.threshold), (1, 0.25));
        assert_eq!((loaded.retrieved, loaded.confidence.clone()), (None, None));
        assert_eq!(loaded.confidence_for(3.0), None);
        // Saved again, it is a version-2 file.
        let mut saved = loaded;
        saved.version = FORMAT_VERSION;
        saved.save(dir.path()).unwrap();
        assert_eq!(Calibration::load(dir.path()).unwrap(), Some(saved));
        std::fs::write(
            dir.path().join(CALIBRATION_FILE),
            VERSION_1.replace("\"version\": 1", "\"version\": 3"),
        )
        .unwrap();
        let err = Calibration::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("version 3 is not supported"), "{err}");
    }

    fn answer(log_odds: f64, right: bool) -> Scored {
        Scored {
            log_odds,
            score: 1.0 / (1.0 + (-log_odds).exp()),
            right,
        }
    }

    #[test]
    fn the_confidence_map_round_trips_and_applies_to_log_odds() {
        // Log-odds 1 and 2 right once in two, 8 and 9 always: isotonic gives 0.5 and 1.
        let answers = [
            answer(1.0, true),
            answer(2.0, false),
            answer(8.0, true),
            answer(9.0, true),
        ];
        let confidence = fit_confidence(Method::Isotonic, &answers).unwrap();
        assert_eq!((confidence.answers, confidence.right), (4, 3));
        assert_eq!(confidence.feature, "log_odds");
        // Raw scores 0.73, 0.88 in bins 7 and 8, 0.9997, 0.9999 in bin 9.
        let raw = (1.0 - answers[0].score)
            + answers[1].score
            + (1.0 - answers[2].score)
            + (1.0 - answers[3].score);
        assert!((confidence.ece_raw - raw / 4.0).abs() < 1e-12);
        let dir = tempfile::tempdir().unwrap();
        let points = curve(&[q(0.1, true, 1.0)]);
        let mut calibration = Calibration::new(&points[1], Target::MaxF1, "reader", "d.json", 4);
        calibration.retrieved = Some(5);
        calibration.confidence = Some(confidence);
        calibration.save(dir.path()).unwrap();
        let loaded = Calibration::load(dir.path()).unwrap().unwrap();
        assert_eq!(loaded, calibration);
        assert_eq!(loaded.version, 2);
        assert_eq!(loaded.confidence_for(1.5), Some(0.5));
        assert_eq!(loaded.confidence_for(5.0), Some(0.75));
        assert_eq!(loaded.confidence_for(20.0), Some(1.0));
        let check = check_confidence(loaded.confidence.as_ref().map(|c| &c.map), &answers);
        assert_eq!(check.ece_calibrated, Some(0.0));
        assert!((check.ece_raw - raw / 4.0).abs() < 1e-12);

        let text = std::fs::read_to_string(dir.path().join(CALIBRATION_FILE)).unwrap();
        let broken = text.replace("\"log_odds\"", "\"score\"");
        std::fs::write(dir.path().join(CALIBRATION_FILE), broken).unwrap();
        let err = Calibration::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("confidence.feature `score` is not supported"),
            "{err}"
        );
        assert!(fit_confidence(Method::Platt, &[])
            .unwrap_err()
            .to_string()
            .contains("nothing to fit the confidence map on"));
    }

    #[test]
    fn saves_atomically_and_refuses_broken_files() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Calibration::load(dir.path()).unwrap(), None);
        let points = curve(&[q(0.1, true, 1.0)]);
        let nothing = Calibration::new(&points[0], Target::MaxF1, "reader", "data.json", 1);
        assert_eq!(nothing.precision, None);
        let calibration = Calibration::new(&points[1], Target::MaxF1, "reader", "data.json", 1);
        assert_eq!(calibration.precision, Some(100.0));
        calibration.save(dir.path()).unwrap();
        assert_eq!(
            Calibration::load(dir.path()).unwrap(),
            Some(calibration.clone())
        );
        assert!(!dir.path().join("calibration.json.tmp").exists());
        std::fs::write(dir.path().join(CALIBRATION_FILE), "{\"threshold\": 2}").unwrap();
        let err = Calibration::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("calibration.json: not a lector calibration"),
            "{err}"
        );
    }
}

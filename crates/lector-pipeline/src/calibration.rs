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
//! The chosen value is stored as `calibration.json` in the index directory ([`Calibration`]).

use crate::error::{io, Error, Result};
use lector_eval::report::Report;
use lector_eval::squad::{self, Dataset, NoAnswer, SquadVersion};
use lector_reader::{Prediction, ReadParams};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file name of a calibration inside an index directory. lector-index only ever deletes its
/// own segment and temporary files, so it leaves this file (and its `.tmp`) alone.
pub const CALIBRATION_FILE: &str = "calibration.json";

/// The threshold used without calibration: abstain when `na_prob > 0.5`, i.e. `null > best`.
pub const DEFAULT_THRESHOLD: f64 = 0.5;

const FORMAT_NAME: &str = "lector-calibration";
const FORMAT_VERSION: u32 = 1;

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
        }
    }

    /// The calibration stored in `index_dir`, or `None` when there is none.
    pub fn load(index_dir: &Path) -> Result<Option<Calibration>> {
        let path = index_dir.join(CALIBRATION_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path)(e)),
        };
        let invalid = |message: String| Error::Calibration {
            path: path.clone(),
            message,
        };
        let calibration: Calibration = serde_json::from_str(&text).map_err(|e| {
            invalid(format!(
                "not a lector calibration: {e} (run `lector calibrate` again)"
            ))
        })?;
        if calibration.format != FORMAT_NAME || calibration.version != FORMAT_VERSION {
            return Err(invalid(format!(
                "format `{}` version {} is not supported (this lector reads {FORMAT_NAME} version {FORMAT_VERSION})",
                calibration.format, calibration.version
            )));
        }
        if !(0.0..=1.0).contains(&calibration.threshold) {
            return Err(invalid(format!(
                "threshold {} is outside [0, 1]",
                calibration.threshold
            )));
        }
        Ok(Some(calibration))
    }

    /// Stores the calibration in `index_dir` durably: temporary file, fsync, rename, fsync of
    /// the directory. A crash leaves either the old file or the new one.
    pub fn save(&self, index_dir: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("calibration serialises") + "\n";
        let path = index_dir.join(CALIBRATION_FILE);
        lector_index::write_durably(&path, text.as_bytes()).map_err(io(&path))
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

/// Fits the threshold for `target` on `dataset`, read by the reader with [`read_params`] into
/// `predictions` (one per question, in order). max-f1 takes the official script's sweep where
/// it applies (SQuAD v2.0); precision=P the most permissive cut that reaches P.
pub fn fit(dataset: &Dataset, predictions: &[Prediction], target: Target) -> Result<Fitted> {
    let (questions, official) = judge(dataset, predictions)?;
    let curve = curve(&questions);
    let chosen = match (target, official) {
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

/// The per-question inputs of the sweep, and the official script's max-F1 threshold.
fn judge(dataset: &Dataset, predictions: &[Prediction]) -> Result<(Vec<Judged>, Option<f64>)> {
    let spans: squad::Predictions = dataset
        .questions
        .iter()
        .zip(predictions)
        .map(|(q, p)| (q.id.clone(), best_span(p).to_string()))
        .collect();
    let probs: squad::NaProbs = dataset
        .questions
        .iter()
        .zip(predictions)
        .map(|(q, p)| (q.id.clone(), p.na_prob))
        .collect();
    let no_answer = NoAnswer {
        probs: Some(&probs),
        threshold: 1.0,
    };
    let evaluation = squad::evaluate(dataset, &spans, &no_answer)?;
    let official = match dataset.version {
        SquadVersion::V2_0 => evaluation
            .summary
            .get("best_f1_thresh")
            .and_then(|v| v.as_f64()),
        SquadVersion::V1_1 => None,
    };
    let questions = evaluation
        .questions
        .iter()
        .zip(&probs)
        .map(|(s, (_, na_prob))| Judged {
            na_prob: *na_prob,
            has_answer: s.has_ans,
            exact: if s.has_ans { s.em } else { 0.0 },
            f1: if s.has_ans { s.f1 } else { 0.0 },
        })
        .collect();
    Ok((questions, official))
}

/// The best non-empty span ("" when the reader found none).
fn best_span(p: &Prediction) -> &str {
    p.answers
        .iter()
        .map(|a| a.answer.as_str())
        .find(|a| !a.is_empty())
        .unwrap_or("")
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

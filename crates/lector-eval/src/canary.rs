//! The canary (`lector eval canary`): a fixed labelled question set re-asked after every change,
//! whose answers are compared with a stored baseline, so that a re-index, a new model or a
//! configuration change that hurts answer quality is caught before users notice.
//!
//! The questions are a SQuAD v1.1 or v2.0 file ([`QuestionSet`]); every question is asked,
//! unanswerable ones included, and scored with the official rules ([`score`]; v2.0: an
//! abstention is the empty answer, right on an unanswerable question). A [`Baseline`] stores the
//! questions file's sha256, the settings, the scores and every answer. A later run is compared
//! with it ([`compare`]): the alarm goes off when F1 fell by more than [`Bounds::max_f1_drop`]
//! points, or the abstention rate moved either way by more than
//! [`Bounds::max_abstain_change`] points. How the questions are asked (a local pipeline, a
//! running server) is the caller's.

use crate::squad::{self, Dataset, NoAnswer, Question, QuestionScore};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The default bound on the F1 drop, in points of 100.
pub const DEFAULT_MAX_F1_DROP: f64 = 2.0;
/// The default bound on the abstention-rate change (either way), in points of 100.
pub const DEFAULT_MAX_ABSTAIN_CHANGE: f64 = 5.0;
/// What a baseline file's `format` says.
pub const BASELINE_FORMAT: &str = "lector-canary-baseline/1";
/// Differences below this are rounding, not a move past a bound.
const EPSILON: f64 = 1e-9;

/// Why a canary run cannot be made or compared: each names the file (and question) at fault.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// A file could not be read.
    #[error("cannot read {path}", path = .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The baseline could not be written.
    #[error("cannot write {path}", path = .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The questions file is not a SQuAD file, or scoring failed.
    #[error(transparent)]
    Squad(#[from] crate::Error),
    /// The questions file holds no questions.
    #[error("{path}: no questions", path = .path.display())]
    NoQuestions { path: PathBuf },
    /// A question of the questions file is empty.
    #[error("{path}: question `{id}` is empty", path = .path.display())]
    EmptyQuestion { path: PathBuf, id: String },
    /// There is no baseline file.
    #[error("no baseline at {path}: make one with --write-baseline (or name it with --baseline)", path = .path.display())]
    NoBaseline { path: PathBuf },
    /// The baseline file is not a baseline.
    #[error("{path}: not a lector canary baseline", path = .path.display())]
    NotABaseline {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// The baseline file has another format.
    #[error("{path}: format `{format}`, expected `{BASELINE_FORMAT}`", path = .path.display())]
    Format { path: PathBuf, format: String },
    /// The baseline was made from other questions.
    #[error(
        "{path} is the baseline of another questions file ({baseline_questions}, sha256 {baseline_sha256}), \
         not of {questions} (sha256 {sha256}): give its questions, or write a new baseline with --write-baseline",
        path = .path.display(),
        questions = .questions.display()
    )]
    OtherQuestions {
        path: PathBuf,
        baseline_questions: String,
        baseline_sha256: String,
        questions: PathBuf,
        sha256: String,
    },
    /// The baseline's answer to a question is not a string.
    #[error("{path}: the answer to `{id}` is not a string", path = .path.display())]
    AnswerNotText { path: PathBuf, id: String },
    /// The baseline has no answer to a question.
    #[error("{path}: no answer to question `{id}`", path = .path.display())]
    NoAnswer { path: PathBuf, id: String },
}

/// The questions asked, with the digest that ties a baseline to them.
#[derive(Debug, Clone)]
pub struct QuestionSet {
    pub path: PathBuf,
    /// The sha256 of the file's bytes, in hex.
    pub sha256: String,
    pub dataset: Dataset,
}

impl QuestionSet {
    /// Reads the SQuAD file at `path`; refused when it has no question or an empty one.
    pub fn read(path: &Path) -> Result<QuestionSet, CanaryError> {
        let bytes = std::fs::read(path).map_err(|source| CanaryError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let dataset = squad::read_dataset(path)?;
        if dataset.questions.is_empty() {
            return Err(CanaryError::NoQuestions {
                path: path.to_path_buf(),
            });
        }
        if let Some(q) = dataset
            .questions
            .iter()
            .find(|q| q.question.trim().is_empty())
        {
            return Err(CanaryError::EmptyQuestion {
                path: path.to_path_buf(),
                id: q.id.clone(),
            });
        }
        Ok(QuestionSet {
            path: path.to_path_buf(),
            sha256: sha256_hex(&bytes),
            dataset,
        })
    }

    /// The questions, in file order.
    pub fn questions(&self) -> &[Question] {
        &self.dataset.questions
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Headline scores of one run, in points of 100.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub questions: usize,
    pub exact: f64,
    pub f1: f64,
    /// Questions without an answer.
    pub abstained: usize,
    /// Their share of all questions.
    pub abstention_rate: f64,
}

/// The answers of one run ("" for an abstention, in question order) and how they were obtained.
#[derive(Debug, Clone)]
pub struct Answers {
    pub texts: Vec<String>,
    /// Where they came from, e.g. `{"index": DIR}` or `{"url": URL}` (not compared).
    pub source: Map<String, Value>,
    /// What shapes the answers (compared with the baseline's, as notes).
    pub settings: Map<String, Value>,
    /// How long asking took.
    pub seconds: f64,
}

/// One run: its questions, answers and scores.
#[derive(Debug, Clone)]
pub struct Run {
    pub questions: QuestionSet,
    pub answers: Answers,
    pub scores: Scores,
    pub per_question: Vec<QuestionScore>,
}

impl Run {
    /// Scores `answers` (one per question of `questions`) with the official SQuAD rules.
    pub fn new(questions: QuestionSet, answers: Answers) -> Result<Run, CanaryError> {
        let (scores, per_question) = score(&questions.dataset, &answers.texts)?;
        Ok(Run {
            questions,
            answers,
            scores,
            per_question,
        })
    }
}

/// The official SQuAD scores of `answers` (one per question, "" abstained), and per question.
pub fn score(
    dataset: &Dataset,
    answers: &[String],
) -> Result<(Scores, Vec<QuestionScore>), CanaryError> {
    let predictions: squad::Predictions = dataset
        .questions
        .iter()
        .zip(answers)
        .map(|(q, a)| (q.id.clone(), a.clone()))
        .collect();
    let questions = squad::evaluate(dataset, &predictions, &NoAnswer::default())?.questions;
    let n = questions.len().max(1) as f64;
    let mean = |f: fn(&QuestionScore) -> f64| 100.0 * questions.iter().map(f).sum::<f64>() / n;
    let abstained = answers.iter().filter(|a| a.is_empty()).count();
    let scores = Scores {
        questions: questions.len(),
        exact: mean(|q| q.em),
        f1: mean(|q| q.f1),
        abstained,
        abstention_rate: 100.0 * abstained as f64 / n,
    };
    Ok((scores, questions))
}

/// A stored run to compare later runs with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baseline {
    /// [`BASELINE_FORMAT`].
    pub format: String,
    pub questions_file: String,
    pub questions_sha256: String,
    /// The version of lector that wrote it (the workspace's version).
    pub lector_version: String,
    pub created_unix: u64,
    pub source: Map<String, Value>,
    pub settings: Map<String, Value>,
    pub scores: Scores,
    /// Question id -> answer ("" abstained), the SQuAD predictions format.
    pub predictions: Map<String, Value>,
}

impl Baseline {
    /// `run` as a baseline, made now.
    pub fn new(run: &Run) -> Baseline {
        let (questions, answers) = (&run.questions, &run.answers);
        let predictions = questions
            .questions()
            .iter()
            .zip(&answers.texts)
            .map(|(q, a)| (q.id.clone(), Value::String(a.clone())))
            .collect();
        let created_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Baseline {
            format: BASELINE_FORMAT.into(),
            questions_file: questions.path.display().to_string(),
            questions_sha256: questions.sha256.clone(),
            lector_version: env!("CARGO_PKG_VERSION").into(),
            created_unix,
            source: answers.source.clone(),
            settings: answers.settings.clone(),
            scores: run.scores,
            predictions,
        }
    }

    /// Reads the baseline at `path` and checks that it was made from `questions`.
    pub fn read(path: &Path, questions: &QuestionSet) -> Result<Baseline, CanaryError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CanaryError::NoBaseline {
                    path: path.to_path_buf(),
                })
            }
            Err(source) => {
                return Err(CanaryError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let baseline: Baseline =
            serde_json::from_str(&text).map_err(|source| CanaryError::NotABaseline {
                path: path.to_path_buf(),
                source,
            })?;
        if baseline.format != BASELINE_FORMAT {
            return Err(CanaryError::Format {
                path: path.to_path_buf(),
                format: baseline.format,
            });
        }
        if baseline.questions_sha256 != questions.sha256 {
            return Err(CanaryError::OtherQuestions {
                path: path.to_path_buf(),
                baseline_questions: baseline.questions_file,
                baseline_sha256: baseline.questions_sha256,
                questions: questions.path.clone(),
                sha256: questions.sha256.clone(),
            });
        }
        Ok(baseline)
    }

    /// Writes through a temporary file, so that an interrupted run leaves the old baseline.
    pub fn write(&self, path: &Path) -> Result<(), CanaryError> {
        let mut name = path.as_os_str().to_owned();
        name.push(".tmp");
        let temp = PathBuf::from(name);
        let text = serde_json::to_string_pretty(self).expect("a baseline serialises") + "\n";
        std::fs::write(&temp, text)
            .and_then(|()| std::fs::rename(&temp, path))
            .map_err(|source| CanaryError::Write {
                path: path.to_path_buf(),
                source,
            })
    }

    /// The baseline's answer to every question of `questions`, in their order (`path`: where
    /// the baseline was read from, for errors).
    pub fn answers(
        &self,
        path: &Path,
        questions: &QuestionSet,
    ) -> Result<Vec<String>, CanaryError> {
        let error = |id: &str, missing: bool| {
            let (path, id) = (path.to_path_buf(), id.to_string());
            match missing {
                true => CanaryError::NoAnswer { path, id },
                false => CanaryError::AnswerNotText { path, id },
            }
        };
        questions
            .questions()
            .iter()
            .map(|q| match self.predictions.get(&q.id) {
                Some(Value::String(a)) => Ok(a.clone()),
                Some(_) => Err(error(&q.id, false)),
                None => Err(error(&q.id, true)),
            })
            .collect()
    }
}

/// How far a run may move from its baseline before the alarm goes off, in points of 100.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// F1 may fall by at most this much.
    pub max_f1_drop: f64,
    /// The abstention rate may move, up or down, by at most this much.
    pub max_abstain_change: f64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_f1_drop: DEFAULT_MAX_F1_DROP,
            max_abstain_change: DEFAULT_MAX_ABSTAIN_CHANGE,
        }
    }
}

/// One bound checked against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// `f1_drop` or `abstention_change`.
    pub check: &'static str,
    pub baseline: f64,
    pub current: f64,
    /// Current minus baseline.
    pub change: f64,
    pub bound: f64,
    pub failed: bool,
}

/// A question answered differently from the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub id: String,
    pub question: String,
    pub baseline: String,
    pub current: String,
    pub f1_baseline: f64,
    pub f1_current: f64,
}

/// A run compared with its baseline.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The F1 check, then the abstention check.
    pub checks: Vec<Check>,
    /// The questions answered differently, those that lost the most F1 first.
    pub changes: Vec<Change>,
    /// `key: before -> after` for each setting that differs from the baseline's.
    pub setting_changes: Vec<String>,
}

impl Comparison {
    /// The checks that failed: each one is an alarm.
    pub fn failed(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| c.failed).collect()
    }
}

/// Compares `run` with `baseline` (read from `path`) under `bounds`.
pub fn compare(
    run: &Run,
    baseline: &Baseline,
    path: &Path,
    bounds: Bounds,
) -> Result<Comparison, CanaryError> {
    let questions = &run.questions;
    let before = baseline.answers(path, questions)?;
    let (_, before_scores) = score(&questions.dataset, &before)?;
    Ok(Comparison {
        checks: checks(&baseline.scores, &run.scores, bounds),
        changes: changes(
            questions,
            &before,
            &run.answers.texts,
            &before_scores,
            &run.per_question,
        ),
        setting_changes: setting_changes(&baseline.settings, &run.answers.settings, ""),
    })
}

/// The bounded checks: F1 may not fall, and the abstention rate may not move, beyond its bound.
pub fn checks(baseline: &Scores, current: &Scores, bounds: Bounds) -> Vec<Check> {
    let f1_change = current.f1 - baseline.f1;
    let abstain_change = current.abstention_rate - baseline.abstention_rate;
    vec![
        Check {
            check: "f1_drop",
            baseline: baseline.f1,
            current: current.f1,
            change: f1_change,
            bound: bounds.max_f1_drop,
            failed: -f1_change > bounds.max_f1_drop + EPSILON,
        },
        Check {
            check: "abstention_change",
            baseline: baseline.abstention_rate,
            current: current.abstention_rate,
            change: abstain_change,
            bound: bounds.max_abstain_change,
            failed: abstain_change.abs() > bounds.max_abstain_change + EPSILON,
        },
    ]
}

/// The questions answered differently, those that lost the most F1 first.
pub fn changes(
    questions: &QuestionSet,
    before: &[String],
    after: &[String],
    before_scores: &[QuestionScore],
    after_scores: &[QuestionScore],
) -> Vec<Change> {
    let mut changes: Vec<Change> = questions
        .questions()
        .iter()
        .zip(before.iter().zip(after))
        .zip(before_scores.iter().zip(after_scores))
        .filter(|((_, (b, a)), _)| b != a)
        .map(|((q, (b, a)), (sb, sa))| Change {
            id: q.id.clone(),
            question: q.question.clone(),
            baseline: b.clone(),
            current: a.clone(),
            f1_baseline: 100.0 * sb.f1,
            f1_current: 100.0 * sa.f1,
        })
        .collect();
    changes.sort_by(|x, y| {
        let loss = |c: &Change| c.f1_baseline - c.f1_current;
        loss(y).total_cmp(&loss(x))
    });
    changes
}

/// `key: before -> after` for every setting both runs record with different values (nested
/// objects by their dotted path, under `prefix`); settings only one side records are not
/// comparable.
pub fn setting_changes(
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    prefix: &str,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (key, old) in before {
        let Some(new) = after.get(key) else { continue };
        let path = format!("{prefix}{key}");
        match (old, new) {
            (Value::Object(o), Value::Object(n)) => {
                notes.extend(setting_changes(o, n, &format!("{path}.")));
            }
            _ if old != new => notes.push(format!("{path}: {old} -> {new}")),
            _ => {}
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scores(f1: f64, abstention_rate: f64) -> Scores {
        Scores {
            questions: 100,
            exact: f1,
            f1,
            abstained: abstention_rate as usize,
            abstention_rate,
        }
    }

    #[test]
    fn a_check_fails_only_beyond_its_bound() {
        let bounds = Bounds::default();
        let failed = |current: Scores| -> Vec<&'static str> {
            checks(&scores(80.0, 10.0), &current, bounds)
                .into_iter()
                .filter(|c| c.failed)
                .map(|c| c.check)
                .collect()
        };
        // Exactly at the bounds, and F1 rising by any amount: quiet.
        assert!(failed(scores(78.0, 15.0)).is_empty());
        assert!(failed(scores(99.0, 5.0)).is_empty());
        assert_eq!(failed(scores(77.9, 10.0)), ["f1_drop"]);
        // The abstention rate alarms either way.
        assert_eq!(failed(scores(80.0, 4.9)), ["abstention_change"]);
        assert_eq!(failed(scores(70.0, 15.1)), ["f1_drop", "abstention_change"]);
    }

    #[test]
    fn setting_changes_name_nested_keys_and_skip_one_sided_ones() {
        let object = |v: Value| v.as_object().unwrap().clone();
        let before =
            object(json!({"k": 5, "index_settings": {"passage": 100, "stride": 50}, "old": 1}));
        let after =
            object(json!({"k": 5, "index_settings": {"passage": 20, "stride": 50}, "new": 2}));
        assert_eq!(
            setting_changes(&before, &after, ""),
            ["index_settings.passage: 100 -> 20"]
        );
    }

    #[test]
    fn a_baseline_of_other_questions_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let squad = |question: &str| {
            json!({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "Paris is in France.",
                "qas": [{"id": "q1", "question": question, "answers": [{"text": "France", "answer_start": 12}]}]}]}]})
        };
        let write = |name: &str, value: Value| {
            let path = dir.path().join(name);
            std::fs::write(&path, value.to_string()).unwrap();
            QuestionSet::read(&path).unwrap()
        };
        let questions = write("a.json", squad("Where is Paris?"));
        let other = write("b.json", squad("Where is Paris, really?"));
        let answers = Answers {
            texts: vec!["France".into()],
            source: Map::new(),
            settings: Map::new(),
            seconds: 0.0,
        };
        let run = Run::new(questions, answers).unwrap();
        assert_eq!(run.scores.f1, 100.0);
        let path = dir.path().join("a.baseline.json");
        Baseline::new(&run).write(&path).unwrap();
        let baseline = Baseline::read(&path, &run.questions).unwrap();
        let comparison = compare(&run, &baseline, &path, Bounds::default()).unwrap();
        assert!(comparison.failed().is_empty() && comparison.changes.is_empty());
        let err = Baseline::read(&path, &other).unwrap_err().to_string();
        assert!(
            err.contains("is the baseline of another questions file"),
            "{err}"
        );
        assert!(err.contains(&run.questions.sha256), "{err}");
    }
}

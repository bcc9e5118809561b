//! `lector calibrate` as a library call: labelled questions are read (each in its gold
//! paragraph, or answered from the top k passages of a store as `ask` answers them), then the
//! no-answer threshold is chosen for a target and the confidence map fitted ([`fit`]), or a
//! stored calibration is measured on them ([`evaluate`]). The CLI and the Python package only
//! translate arguments and render what these return; saving is the caller's
//! ([`Calibration::save_to`]), so a dry run is not writing.

use crate::calibration::{
    self, Calibration, ConfidenceCheck, CurvePoint, Fitted, Judgement, Reading, Target,
    DEFAULT_THRESHOLD,
};
use crate::config::{reader_name, PipelineConfig};
use crate::error::Result;
use crate::odqa::gold_queries;
use crate::{AskOptions, Built, Progress, Stage};
use lector_eval::calibration::Method;
use lector_eval::report::{fmt2, Report};
use lector_eval::squad::Dataset;
use lector_index::DocumentStore;
use serde::Serialize;
use std::path::Path;

/// How a calibration is fitted or measured.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// What the threshold optimises.
    pub target: Target,
    /// The confidence map to fit; `None`: answers carry no confidence.
    pub confidence: Option<Method>,
    /// Read each question in the top k passages retrieved from the store and aggregated (as
    /// `ask --k k`), instead of in its gold paragraph alone.
    pub retrieve: Option<usize>,
    /// The reader, and the retrieval and reranking of `retrieve`.
    pub pipeline: PipelineConfig,
    /// The data's name, recorded with the calibration (its file name).
    pub data: String,
}

/// What [`fit`] chose: the calibration to store, the threshold's point on the curve beside the
/// default threshold's, and how well the confidence map fits. Serialized as `lector calibrate
/// --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Fit {
    pub calibration: Calibration,
    pub chosen: CurvePoint,
    pub default: CurvePoint,
    pub confidence: ConfidenceReport,
    /// The whole curve, for plots.
    #[serde(skip)]
    pub fitted: Fitted,
    /// What the user should know (e.g. data without unanswerable questions).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// A confidence check with the map's cross-validated ECE from its fitting.
#[derive(Debug, Clone, Serialize)]
pub struct ConfidenceReport {
    #[serde(flatten)]
    pub check: ConfidenceCheck,
    pub ece_cross_validated: Option<f64>,
}

/// What [`evaluate`] measured: the stored calibration, its threshold and the default one on this
/// data, and its confidence map's check. Serialized as `lector calibrate --evaluate --json`
/// prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    pub evaluated: Calibration,
    pub questions: usize,
    pub stored_threshold: CurvePoint,
    pub default: CurvePoint,
    pub confidence: ConfidenceCheck,
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Fit {
    /// The HTML report for the data at `data`: accuracy and F1 against coverage with the chosen
    /// and default cuts for `target`, and the confidence map's reliability.
    pub fn html(&self, data: &Path, target: Target) -> Report {
        let mut report = self.fitted.html_report(data, target);
        self.confidence
            .check
            .add_to(&mut report, self.confidence.ece_cross_validated);
        report
    }
}

impl Evaluation {
    /// The HTML report of a stored calibration measured on the data at `data`: its threshold
    /// and the default one on this data, and its confidence map's reliability.
    pub fn html(&self, data: &Path) -> Report {
        let mut report = Report::new(format!(
            "Calibration check: {} (fitted on {})",
            data.display(),
            self.evaluated.data
        ));
        let rows = [
            threshold_row("stored", self.evaluated.threshold, &self.stored_threshold),
            threshold_row("default", DEFAULT_THRESHOLD, &self.default),
        ];
        report.table(
            "No-answer thresholds on this data",
            &THRESHOLD_HEADER,
            &rows,
        );
        self.confidence.add_to(&mut report, None);
        report
    }
}

/// The columns of [`threshold_row`].
pub const THRESHOLD_HEADER: [&str; 6] = [
    "threshold",
    "na_prob <=",
    "exact",
    "f1",
    "coverage",
    "precision",
];

/// A threshold's point on the curve as a row under [`THRESHOLD_HEADER`] (percentages).
pub fn threshold_row(label: &str, threshold: f64, p: &CurvePoint) -> Vec<String> {
    vec![
        label.to_string(),
        format!("{threshold}"),
        fmt2(100.0 * p.exact),
        fmt2(100.0 * p.f1),
        fmt2(100.0 * p.coverage),
        p.precision_percent(),
    ]
}

/// Reads `dataset`'s questions and fits a calibration on them. `store` is needed with
/// `retrieve` (its passages are read) and is otherwise not touched. Nothing is saved.
pub fn fit(
    store: Option<&dyn DocumentStore>,
    dataset: &Dataset,
    options: &CalibrateOptions,
    notify: &dyn Fn(&str),
    progress: &mut dyn FnMut(Progress),
) -> Result<Fit> {
    let (judgement, reader) = judged(store, dataset, options, notify, progress)?;
    let fitted = calibration::fit(&judgement, options.target)?;
    let confidence = match options.confidence {
        Some(method) => Some(calibration::fit_confidence(method, &judgement.answers)?),
        None => None,
    };
    let mut stored = Calibration::new(
        &fitted.chosen,
        options.target,
        &reader,
        &options.data,
        dataset.questions.len(),
    );
    stored.retrieved = options.retrieve;
    stored.confidence = confidence;
    let check = calibration::check_confidence(
        stored.confidence.as_ref().map(|c| &c.map),
        &judgement.answers,
    );
    let ece_cross_validated = stored
        .confidence
        .as_ref()
        .and_then(|c| c.ece_cross_validated);
    let warnings = match dataset.questions.iter().all(|q| q.has_answer()) {
        true => vec![format!(
            "{} has no unanswerable question: the threshold will only learn to answer (use SQuAD v2.0 data); the confidence map is fitted as usual",
            options.data
        )],
        false => Vec::new(),
    };
    Ok(Fit {
        calibration: stored,
        chosen: fitted.chosen,
        default: fitted.default,
        confidence: ConfidenceReport {
            check,
            ece_cross_validated,
        },
        fitted,
        warnings,
    })
}

/// Reads `dataset`'s questions and measures `stored` (threshold and confidence map) on them.
pub fn evaluate(
    store: Option<&dyn DocumentStore>,
    stored: &Calibration,
    dataset: &Dataset,
    options: &CalibrateOptions,
    notify: &dyn Fn(&str),
    progress: &mut dyn FnMut(Progress),
) -> Result<Evaluation> {
    let (judgement, _) = judged(store, dataset, options, notify, progress)?;
    let curve = calibration::curve(&judgement.questions);
    let at = |t: f64| calibration::point_at(&curve, t).expect("the curve starts at 0");
    let mut warnings = Vec::new();
    if stored.retrieved != options.retrieve {
        warnings.push(format!(
            "the calibration was fitted on {}, and is evaluated here on {}",
            passages_name(stored.retrieved),
            passages_name(options.retrieve)
        ));
    }
    Ok(Evaluation {
        evaluated: stored.clone(),
        questions: dataset.questions.len(),
        stored_threshold: at(stored.threshold),
        default: at(DEFAULT_THRESHOLD),
        confidence: calibration::check_confidence(
            stored.confidence.as_ref().map(|c| &c.map),
            &judgement.answers,
        ),
        warnings,
    })
}

/// How the passages were chosen, for messages.
pub fn passages_name(retrieved: Option<usize>) -> String {
    match retrieved {
        None => "gold paragraphs".into(),
        Some(k) => format!("the top {k} retrieved passages"),
    }
}

/// Every question read and judged, and the reader's name.
fn judged(
    store: Option<&dyn DocumentStore>,
    dataset: &Dataset,
    options: &CalibrateOptions,
    notify: &dyn Fn(&str),
    progress: &mut dyn FnMut(Progress),
) -> Result<(Judgement, String)> {
    let reader_dir = options.pipeline.reader_dir()?;
    let readings = match (options.retrieve, store) {
        (None, _) => read_gold(&reader_dir, dataset, progress)?,
        (Some(k), Some(store)) => read_retrieved(store, dataset, k, options, notify, progress)?,
        (Some(_), None) => {
            return Err(crate::Error::Options(
                "reading retrieved passages needs a store".into(),
            ))
        }
    };
    Ok((
        calibration::judge(dataset, &readings)?,
        reader_name(&reader_dir),
    ))
}

/// Each question read by the reader alone in its gold paragraph.
fn read_gold(
    reader_dir: &std::path::Path,
    dataset: &Dataset,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<Reading>> {
    let reader = lector_reader::Reader::load(reader_dir)?;
    let queries = gold_queries(dataset);
    let total = queries.len();
    let predictions = reader.answer_batch(&queries, &calibration::read_params(), &mut |done| {
        progress(Progress {
            stage: Stage::ReadGold,
            done,
            total,
        })
    })?;
    Ok(predictions.iter().map(Reading::from_prediction).collect())
}

/// Each question answered by the pipeline over `store` from its top `k` passages, without the
/// store's current calibration (whose threshold and map must not shape what is fitted).
fn read_retrieved(
    store: &dyn DocumentStore,
    dataset: &Dataset,
    k: usize,
    options: &CalibrateOptions,
    notify: &dyn Fn(&str),
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<Reading>> {
    let Built {
        pipeline, search, ..
    } = options.pipeline.build_over(store, None, notify)?;
    let ask = AskOptions {
        search: Some(search),
        k,
        ..AskOptions::default()
    };
    let questions = dataset.question_texts();
    let responses = pipeline.ask_many(&questions, &ask, progress)?;
    Ok(responses.iter().map(Reading::from_response).collect())
}

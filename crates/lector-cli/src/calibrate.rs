//! `lector calibrate`: choose the no-answer threshold and fit the confidence map on labelled
//! questions, and store both with the index (`calibration.json`), where `lector ask` picks them
//! up; or, with `--evaluate`, measure a stored calibration on other questions.

use crate::index::IndexDir;
use crate::read::run_with_progress;
use crate::search::{notify, pipeline_config, RerankOptions, RetrievalOptions};
use crate::table::{fmt2, print_table};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use lector_eval::calibration::Method;
use lector_eval::report::Report;
use lector_eval::squad::{self, Dataset};
use lector_index::DocumentStore;
use lector_pipeline::calibration::{
    self, Calibration, ConfidenceCheck, CurvePoint, Fitted, Judgement, Reading, Target,
    CROSS_VALIDATION_FOLDS, DEFAULT_THRESHOLD,
};
use lector_pipeline::config::reader_name;
use lector_pipeline::odqa::gold_queries;
use lector_pipeline::{AskOptions, Built, Stage};
use lector_reader::Reader;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The confidence map `lector calibrate` fits.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfidenceChoice {
    /// Isotonic regression on the answer's log-odds (monotone, no shape assumed).
    Isotonic,
    /// Platt scaling: a logistic of the answer's log-odds.
    Platt,
    /// No map: answers carry no confidence.
    None,
}

impl ConfidenceChoice {
    fn method(self) -> Option<Method> {
        match self {
            ConfidenceChoice::Isotonic => Some(Method::Isotonic),
            ConfidenceChoice::Platt => Some(Method::Platt),
            ConfidenceChoice::None => None,
        }
    }
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// Labelled questions: SQuAD v2.0 (answerable and unanswerable) to learn the threshold; SQuAD
    /// v1.1 (all answerable) fits only the confidence map.
    #[arg(long, value_name = "DATA.json")]
    squad: PathBuf,
    #[command(flatten)]
    dir: IndexDir,
    #[command(flatten)]
    store: crate::store::StoreArgs,
    /// What to optimise: max-f1 (SQuAD v2.0 F1) or precision=P (the most answers whose exact-match
    /// precision is at least P).
    #[arg(long, default_value = "max-f1")]
    target: Target,
    /// The map from an answer's log-odds to the probability that it is right (shown as the
    /// answer's confidence).
    #[arg(long, value_enum, default_value_t = ConfidenceChoice::Isotonic)]
    confidence: ConfidenceChoice,
    /// Read each question in the top K passages retrieved from the index and aggregated, as
    /// `lector ask --k K` answers it, instead of in its gold paragraph alone. The index must hold
    /// the data's paragraphs (`lector index add DATA.json`). Takes the retrieval and rerank options.
    #[arg(long, value_name = "K", value_parser = crate::values::at_least_one)]
    retrieve: Option<usize>,
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// Measure the index's stored calibration (threshold and confidence map) on this data without
    /// fitting or writing anything: fit on one question set, check on another.
    #[arg(long, conflicts_with_all = ["dry_run", "target", "confidence"])]
    evaluate: bool,
    /// Write a self-contained HTML report: the coverage/accuracy curve and the reliability diagram.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Reader checkpoint directory [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Only the first N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Show the result without writing calibration.json.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

pub fn run(args: CalibrateArgs) -> Result<()> {
    check_retrieval_flags(&args)?;
    // The calibration belongs to an index: refuse early (before minutes of reading) without one.
    // A dry run of gold paragraphs only measures (e.g. to choose a threshold for `eval squad -t`).
    let store = match !args.dry_run || args.retrieve.is_some() {
        true => Some(args.store.open(&args.dir)?),
        false => None,
    };
    let location = store
        .as_ref()
        .map_or_else(|| args.dir.path().display().to_string(), |s| s.location());
    let stored = match (args.evaluate, &store) {
        (true, Some(store)) => Some(Calibration::load_from(store)?.with_context(|| {
            format!("no calibration in {location} to evaluate (run `lector calibrate` first)")
        })?),
        _ => None,
    };
    let dataset = read_questions(&args, stored.is_none())?;
    let reader_dir = lector_models::registry::resolve_reader(args.model.as_deref())?;
    let readings = match args.retrieve {
        None => read_gold(&reader_dir, &dataset)?,
        Some(k) => {
            let store = store.as_deref().context("--retrieve reads from an index")?;
            read_retrieved(&args, store, &dataset, k)?
        }
    };
    let judgement = calibration::judge(&dataset, &readings)?;
    if let Some(stored) = stored {
        return evaluate(&args, &dataset, &stored, &judgement);
    }
    let fitted = calibration::fit(&judgement, args.target)?;
    let confidence = match args.confidence.method() {
        Some(method) => Some(calibration::fit_confidence(method, &judgement.answers)?),
        None => None,
    };
    let mut stored = Calibration::new(
        &fitted.chosen,
        args.target,
        &reader_name(&reader_dir),
        &file_name(&args.squad),
        dataset.questions.len(),
    );
    stored.retrieved = args.retrieve;
    stored.confidence = confidence;
    if let (false, Some(store)) = (args.dry_run, &store) {
        stored.save_to(store)?;
    }
    let check = calibration::check_confidence(
        stored.confidence.as_ref().map(|c| &c.map),
        &judgement.answers,
    );
    if let Some(path) = &args.html {
        let mut report = fitted.html_report(&args.squad, args.target);
        check.add_to(
            &mut report,
            stored
                .confidence
                .as_ref()
                .and_then(|c| c.ece_cross_validated),
        );
        report.write(path)?;
    }
    print_result(&args, &location, &dataset, &stored, &fitted, &check)
}

/// The retrieval and rerank flags only mean something with --retrieve: refuse them without it
/// rather than ignore them.
fn check_retrieval_flags(args: &CalibrateArgs) -> Result<()> {
    let given = args.retrieval.mode.is_some()
        || args.retrieval.embedder.is_some()
        || args.rerank.rerank.is_some();
    if given && args.retrieve.is_none() {
        anyhow::bail!(
            "--mode, --embedder and --rerank choose how passages are retrieved: they need --retrieve K"
        );
    }
    Ok(())
}

/// The questions of `--squad`, the first `--limit`; warns when a threshold is to be fitted on
/// data without unanswerable questions.
fn read_questions(args: &CalibrateArgs, fitting: bool) -> Result<Dataset> {
    let mut dataset = squad::read_dataset(&args.squad)?;
    dataset.questions.truncate(args.limit.unwrap_or(usize::MAX));
    if dataset.questions.is_empty() {
        anyhow::bail!("{}: no questions", args.squad.display());
    }
    if fitting && dataset.questions.iter().all(|q| q.has_answer()) {
        eprintln!(
            "warning: {} has no unanswerable question: the threshold will only learn to answer (use SQuAD v2.0 data); the confidence map is fitted as usual",
            args.squad.display()
        );
    }
    Ok(dataset)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Each question read by the reader alone in its gold paragraph.
fn read_gold(reader_dir: &Path, dataset: &Dataset) -> Result<Vec<Reading>> {
    let reader = Reader::load(reader_dir)
        .with_context(|| format!("loading the reader from {}", reader_dir.display()))?;
    let queries = gold_queries(dataset);
    let predictions = run_with_progress(&reader, &queries, &calibration::read_params())?;
    Ok(predictions.iter().map(Reading::from_prediction).collect())
}

/// Each question answered by the pipeline over the index from its top `k` passages, without the
/// index's current calibration (whose threshold and map must not shape what is fitted).
fn read_retrieved(
    args: &CalibrateArgs,
    store: &dyn DocumentStore,
    dataset: &Dataset,
    k: usize,
) -> Result<Vec<Reading>> {
    let config = pipeline_config(args.model.as_deref(), &args.retrieval, &args.rerank);
    let Built {
        pipeline, search, ..
    } = config.build_over(store, None, &notify)?;
    let options = AskOptions {
        search: Some(search),
        k,
        ..AskOptions::default()
    };
    let questions: Vec<&str> = dataset
        .questions
        .iter()
        .map(|q| q.question.as_str())
        .collect();
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} {msg} [{elapsed_precise}<{eta_precise}]",
        )
        .expect("valid template"),
    );
    let start = std::time::Instant::now();
    let responses = pipeline.ask_many(&questions, &options, &mut |p| {
        bar.set_message(match p.stage {
            Stage::Rerank => "questions reranked",
            Stage::Read | Stage::ReadGold => "passages read",
        });
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
    })?;
    bar.finish_and_clear();
    eprintln!(
        "{} questions, top {k} passages each, in {:.1} s",
        questions.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(responses.iter().map(Reading::from_response).collect())
}

/// How the passages were chosen, for messages.
fn passages_name(retrieved: Option<usize>) -> String {
    match retrieved {
        None => "gold paragraphs".into(),
        Some(k) => format!("the top {k} retrieved passages"),
    }
}

/// `--evaluate`: the stored threshold and map measured on this data.
fn evaluate(
    args: &CalibrateArgs,
    dataset: &Dataset,
    stored: &Calibration,
    judgement: &Judgement,
) -> Result<()> {
    if stored.retrieved != args.retrieve {
        eprintln!(
            "warning: the calibration was fitted on {}, and is evaluated here on {}",
            passages_name(stored.retrieved),
            passages_name(args.retrieve)
        );
    }
    let curve = calibration::curve(&judgement.questions);
    let at = |t: f64| calibration::point_at(&curve, t).expect("the curve starts at 0");
    let (threshold, default) = (at(stored.threshold), at(DEFAULT_THRESHOLD));
    let check = calibration::check_confidence(
        stored.confidence.as_ref().map(|c| &c.map),
        &judgement.answers,
    );
    if let Some(path) = &args.html {
        let mut report = Report::new(format!(
            "Calibration check: {} (fitted on {})",
            args.squad.display(),
            stored.data
        ));
        let rows = [
            threshold_row("stored", stored.threshold, &threshold),
            threshold_row("default", DEFAULT_THRESHOLD, &default),
        ];
        report.table(
            "No-answer thresholds on this data",
            &THRESHOLD_HEADER,
            &rows,
        );
        check.add_to(&mut report, None);
        report.write(path)?;
    }
    if args.json {
        let out = json!({
            "evaluated": stored,
            "questions": dataset.questions.len(),
            "stored_threshold": threshold,
            "default": default,
            "confidence": check,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_questions(dataset, &format!("calibration fitted on {}", stored.data));
    print_table(
        &THRESHOLD_HEADER,
        &[
            threshold_row("stored", stored.threshold, &threshold),
            threshold_row("default (0.5)", DEFAULT_THRESHOLD, &default),
        ],
    );
    println!();
    print_confidence(stored, &check, "calibrated (stored map)", None);
    println!("evaluated only: nothing written");
    Ok(())
}

const THRESHOLD_HEADER: [&str; 6] = [
    "threshold",
    "na_prob <=",
    "exact",
    "f1",
    "coverage",
    "precision",
];

fn threshold_row(label: &str, threshold: f64, p: &CurvePoint) -> Vec<String> {
    vec![
        label.to_string(),
        format!("{threshold}"),
        fmt2(100.0 * p.exact),
        fmt2(100.0 * p.f1),
        fmt2(100.0 * p.coverage),
        p.precision_percent(),
    ]
}

fn print_questions(dataset: &Dataset, what: &str) {
    let answerable = dataset.questions.iter().filter(|q| q.has_answer()).count();
    println!(
        "{} questions ({answerable} answerable, {} unanswerable); {what}",
        dataset.questions.len(),
        dataset.questions.len() - answerable,
    );
}

/// The confidence section of the table output: the map, and ECE raw and calibrated.
fn print_confidence(
    stored: &Calibration,
    check: &ConfidenceCheck,
    calibrated_label: &str,
    cross_validated: Option<f64>,
) {
    let Some(confidence) = &stored.confidence else {
        println!(
            "confidence: no map (raw score ECE {:.4} over {} answers)",
            check.ece_raw, check.answers
        );
        return;
    };
    println!(
        "confidence: {} map of the answer's {}, fitted on {} answers; here {} answers, {} right",
        confidence.map.method(),
        confidence.feature,
        confidence.answers,
        check.answers,
        check.right
    );
    let ece = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.4}"));
    let mut rows = vec![
        vec!["raw score".to_string(), ece(Some(check.ece_raw))],
        vec![calibrated_label.to_string(), ece(check.ece_calibrated)],
    ];
    if cross_validated.is_some() {
        rows.push(vec![
            format!("calibrated, {CROSS_VALIDATION_FOLDS}-fold cross-validated"),
            ece(cross_validated),
        ]);
    }
    print_table(&["confidence", "ECE"], &rows);
}

fn print_result(
    args: &CalibrateArgs,
    location: &str,
    dataset: &Dataset,
    stored: &Calibration,
    fitted: &Fitted,
    check: &ConfidenceCheck,
) -> Result<()> {
    let file = Path::new(location).join(lector_pipeline::calibration::CALIBRATION_FILE);
    let (chosen, default) = (&fitted.chosen, &fitted.default);
    let cross_validated = stored
        .confidence
        .as_ref()
        .and_then(|c| c.ece_cross_validated);
    if args.json {
        let mut confidence = serde_json::to_value(check)?;
        confidence["ece_cross_validated"] = cross_validated.map_or(Value::Null, Value::from);
        let out = json!({
            "calibration": stored,
            "chosen": chosen,
            "default": default,
            "confidence": confidence,
            "written": (!args.dry_run).then(|| file.display().to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_questions(
        dataset,
        &format!(
            "target {}; read in {}",
            args.target,
            passages_name(args.retrieve)
        ),
    );
    print_table(
        &THRESHOLD_HEADER,
        &[
            threshold_row("calibrated", chosen.threshold, chosen),
            threshold_row("default (0.5)", DEFAULT_THRESHOLD, default),
        ],
    );
    println!();
    print_confidence(
        stored,
        check,
        "calibrated (on the answers it was fitted on)",
        cross_validated,
    );
    if args.dry_run {
        println!("dry run: {} not written", file.display());
    } else {
        println!("wrote {}", file.display());
    }
    Ok(())
}

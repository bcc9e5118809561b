//! `lector calibrate`: choose the no-answer threshold and fit the confidence map on labelled
//! questions, and store both with the index (`calibration.json`), where `lector ask` picks them
//! up; or, with `--evaluate`, measure a stored calibration on other questions. The work is
//! `lector_pipeline::calibrate`'s; this parses the arguments and renders the result.

use crate::eval::odqa::{progress_bar, show_progress};
use crate::index::IndexDir;
use crate::search::{notify, pipeline_config, RerankOptions, RetrievalOptions};
use crate::table::print_table;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use lector_eval::calibration::Method;
use lector_eval::squad::{self, Dataset};
use lector_pipeline::calibrate::{
    self, passages_name, threshold_row, CalibrateOptions, Evaluation, Fit, THRESHOLD_HEADER,
};
use lector_pipeline::calibration::{
    Calibration, ConfidenceCheck, Target, CROSS_VALIDATION_FOLDS, DEFAULT_THRESHOLD,
};
use lector_pipeline::Progress;
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
    let dataset = read_questions(&args)?;
    let options = CalibrateOptions {
        target: args.target,
        confidence: args.confidence.method(),
        retrieve: args.retrieve,
        pipeline: pipeline_config(args.model.as_deref(), &args.retrieval, &args.rerank),
        data: file_name(&args.squad),
    };
    let store = store.as_deref();
    let bar = progress_bar(0);
    let start = std::time::Instant::now();
    let mut progress = |p: Progress| show_progress(&bar, p);
    let read = |bar: &indicatif::ProgressBar| {
        bar.finish_and_clear();
        eprintln!(
            "{} questions read in {}, in {:.1} s",
            dataset.questions.len(),
            passages_name(args.retrieve),
            start.elapsed().as_secs_f64()
        );
    };
    if let Some(stored) = stored {
        let evaluation =
            calibrate::evaluate(store, &stored, &dataset, &options, &notify, &mut progress)?;
        read(&bar);
        warn(&evaluation.warnings);
        return show_evaluation(&args, &dataset, &evaluation);
    }
    let fit = calibrate::fit(store, &dataset, &options, &notify, &mut progress)?;
    read(&bar);
    warn(&fit.warnings);
    if let (false, Some(store)) = (args.dry_run, store) {
        fit.calibration.save_to(store)?;
    }
    if let Some(path) = &args.html {
        fit.html(&args.squad, args.target).write(path)?;
    }
    show_fit(&args, &location, &dataset, &fit)
}

fn warn(warnings: &[String]) {
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
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

/// The questions of `--squad`, the first `--limit`.
fn read_questions(args: &CalibrateArgs) -> Result<Dataset> {
    let mut dataset = squad::read_dataset(&args.squad)?;
    dataset.questions.truncate(args.limit.unwrap_or(usize::MAX));
    if dataset.questions.is_empty() {
        anyhow::bail!("{}: no questions", args.squad.display());
    }
    Ok(dataset)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `--evaluate`: the stored threshold and map measured on this data.
fn show_evaluation(args: &CalibrateArgs, dataset: &Dataset, evaluation: &Evaluation) -> Result<()> {
    let stored = &evaluation.evaluated;
    let (threshold, default) = (&evaluation.stored_threshold, &evaluation.default);
    let check = &evaluation.confidence;
    if let Some(path) = &args.html {
        evaluation.html(&args.squad).write(path)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(evaluation)?);
        return Ok(());
    }
    print_questions(dataset, &format!("calibration fitted on {}", stored.data));
    print_table(
        &THRESHOLD_HEADER,
        &[
            threshold_row("stored", stored.threshold, threshold),
            threshold_row("default (0.5)", DEFAULT_THRESHOLD, default),
        ],
    );
    println!();
    print_confidence(stored, check, "calibrated (stored map)", None);
    println!("evaluated only: nothing written");
    Ok(())
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

fn show_fit(args: &CalibrateArgs, location: &str, dataset: &Dataset, fit: &Fit) -> Result<()> {
    let file = Path::new(location).join(lector_pipeline::calibration::CALIBRATION_FILE);
    let (chosen, default) = (&fit.chosen, &fit.default);
    let cross_validated = fit.confidence.ece_cross_validated;
    if args.json {
        let mut out = serde_json::to_value(fit)?;
        out["written"] = serde_json::json!((!args.dry_run).then(|| file.display().to_string()));
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
        &fit.calibration,
        &fit.confidence.check,
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

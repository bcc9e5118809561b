//! `lector calibrate`: choose the no-answer threshold on SQuAD v2.0-style data and store it with
//! the index (`calibration.json`), where `lector ask` picks it up.

use crate::ask::reader_name;
use crate::index::IndexDir;
use crate::read::{gold_queries, run_with_progress};
use crate::table::{fmt2, fmt_prob, print_table};
use anyhow::{Context, Result};
use clap::Args;
use lector_eval::report::Report;
use lector_eval::squad::{self, Dataset, NoAnswer, SquadVersion};
use lector_index::Index;
use lector_pipeline::calibration::{self, Calibration, CurvePoint, Judged, Target};
use lector_pipeline::DEFAULT_THRESHOLD;
use lector_reader::{Prediction, ReadParams, Reader};
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct CalibrateArgs {
    /// SQuAD v2.0 data: questions with their paragraphs, answerable and unanswerable.
    #[arg(long, value_name = "DATA.json")]
    squad: PathBuf,
    #[command(flatten)]
    dir: IndexDir,
    /// What to optimise: max-f1 (SQuAD v2.0 F1) or precision=P (the most answers whose exact-match
    /// precision is at least P).
    #[arg(long, default_value = "max-f1")]
    target: Target,
    /// Write a self-contained HTML report with the coverage/accuracy curve.
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
    let dir = args.dir.path();
    // The calibration belongs to an index: refuse early (before minutes of reading) without one.
    Index::open(&dir)?;
    let mut dataset = squad::read_dataset(&args.squad)?;
    dataset.questions.truncate(args.limit.unwrap_or(usize::MAX));
    if dataset.questions.is_empty() {
        anyhow::bail!("{}: no questions", args.squad.display());
    }
    if dataset.questions.iter().all(|q| q.has_answer()) {
        eprintln!(
            "warning: {} has no unanswerable question: the threshold will only learn to answer (use SQuAD v2.0 data)",
            args.squad.display()
        );
    }
    let reader_dir = lector_models::registry::resolve_reader(args.model.as_deref())?;
    let reader = Reader::load(&reader_dir)
        .with_context(|| format!("loading the reader from {}", reader_dir.display()))?;
    let predictions = read_questions(&reader, &dataset)?;
    let judged = judge(&dataset, &predictions)?;
    let curve = calibration::curve(&judged.questions);
    let chosen = choose(args.target, &curve, judged.official_best_f1_thresh)?;
    let default = calibration::point_at(&curve, DEFAULT_THRESHOLD).expect("the curve starts at 0");
    let file_name = args.squad.file_name().map_or_else(
        || args.squad.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let stored = Calibration::new(
        &chosen,
        args.target,
        &reader_name(&reader_dir),
        &file_name,
        dataset.questions.len(),
    );
    if !args.dry_run {
        stored.save(&dir)?;
    }
    if let Some(path) = &args.html {
        html_report(&args, &curve, &chosen, &default).write(path)?;
    }
    print_result(&args, &dir, &dataset, &stored, &chosen, &default)
}

/// Every question with its gold paragraph; `handle_impossible_answer` makes the reader score the
/// null answer, and the best span is kept next to it (the threshold decides, not the 0.5 rule).
fn read_questions(reader: &Reader, dataset: &Dataset) -> Result<Vec<Prediction>> {
    let queries = gold_queries(dataset);
    let params = ReadParams {
        top_k: 2,
        handle_impossible_answer: true,
        ..ReadParams::default()
    };
    run_with_progress(reader, &queries, &params)
}

/// The per-question inputs of the sweep, and the official script's max-F1 threshold.
struct Judgement {
    questions: Vec<Judged>,
    official_best_f1_thresh: Option<f64>,
}

fn judge(dataset: &Dataset, predictions: &[Prediction]) -> Result<Judgement> {
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
    let official_best_f1_thresh = match dataset.version {
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
    Ok(Judgement {
        questions,
        official_best_f1_thresh,
    })
}

/// The best non-empty span ("" when the reader found none).
fn best_span(p: &Prediction) -> &str {
    p.answers
        .iter()
        .map(|a| a.answer.as_str())
        .find(|a| !a.is_empty())
        .unwrap_or("")
}

/// max-f1 takes the official script's sweep where it applies (SQuAD v2.0); precision=P the most
/// permissive cut that reaches P.
fn choose(target: Target, curve: &[CurvePoint], official: Option<f64>) -> Result<CurvePoint> {
    let point = match (target, official) {
        (Target::MaxF1, Some(thresh)) => calibration::point_at(curve, thresh),
        _ => calibration::choose(target, curve),
    };
    point.with_context(|| {
        let best = curve
            .iter()
            .filter(|p| p.answered > 0)
            .map(|p| p.precision)
            .fold(0.0, f64::max);
        format!(
            "no threshold reaches {target}: the highest precision on this data is {:.4}",
            best
        )
    })
}

fn print_result(
    args: &CalibrateArgs,
    dir: &Path,
    dataset: &Dataset,
    stored: &Calibration,
    chosen: &CurvePoint,
    default: &CurvePoint,
) -> Result<()> {
    let file = dir.join(lector_pipeline::calibration::CALIBRATION_FILE);
    if args.json {
        let out = json!({
            "calibration": stored,
            "chosen": chosen,
            "default": default,
            "written": (!args.dry_run).then(|| file.display().to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let answerable = dataset.questions.iter().filter(|q| q.has_answer()).count();
    println!(
        "{} questions ({answerable} answerable, {} unanswerable); target {}",
        dataset.questions.len(),
        dataset.questions.len() - answerable,
        args.target
    );
    let row = |label: &str, p: &CurvePoint| {
        vec![
            label.to_string(),
            format!("{}", p.threshold),
            fmt2(100.0 * p.exact),
            fmt2(100.0 * p.f1),
            fmt2(100.0 * p.coverage),
            precision(p),
        ]
    };
    print_table(
        &[
            "threshold",
            "na_prob <=",
            "exact",
            "f1",
            "coverage",
            "precision",
        ],
        &[row("calibrated", chosen), row("default (0.5)", default)],
    );
    if args.dry_run {
        println!("dry run: {} not written", file.display());
    } else {
        println!("wrote {}", file.display());
    }
    Ok(())
}

/// At most this many points per chart: a curve over 10,000 cuts would be a 1 MB SVG.
const CHART_POINTS: usize = 400;

fn html_report(
    args: &CalibrateArgs,
    curve: &[CurvePoint],
    chosen: &CurvePoint,
    default: &CurvePoint,
) -> Report {
    let step = curve.len().div_ceil(CHART_POINTS).max(1);
    let sampled: Vec<&CurvePoint> = curve
        .iter()
        .step_by(step)
        .chain(curve.last())
        .filter(|p| p.answered > 0)
        .collect();
    let mut report = Report::new(format!("No-answer calibration: {}", args.squad.display()));
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
    let row = |label: &str, threshold: f64, p: &CurvePoint| {
        vec![
            label.to_string(),
            fmt_prob(threshold),
            fmt2(100.0 * p.coverage),
            precision(p),
            fmt2(100.0 * p.exact),
            fmt2(100.0 * p.f1),
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
                &format!("chosen ({})", args.target),
                chosen.threshold,
                chosen,
            ),
            row("default", DEFAULT_THRESHOLD, default),
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

/// Precision in percent, or "-" when the cut answers nothing.
fn precision(p: &CurvePoint) -> String {
    if p.answered > 0 {
        fmt2(100.0 * p.precision)
    } else {
        "-".into()
    }
}

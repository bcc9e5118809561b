//! `lector calibrate`: choose the no-answer threshold on SQuAD v2.0-style data and store it with
//! the index (`calibration.json`), where `lector ask` picks it up.

use crate::index::IndexDir;
use crate::read::run_with_progress;
use crate::table::{fmt2, print_table};
use anyhow::{Context, Result};
use clap::Args;
use lector_eval::squad::{self, Dataset};
use lector_index::Index;
use lector_pipeline::calibration::{self, Calibration, CurvePoint, Fitted, Target};
use lector_pipeline::config::reader_name;
use lector_pipeline::odqa::gold_queries;
use lector_reader::Reader;
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
    // A dry run only measures (e.g. to choose a threshold for `eval squad -t`), so needs none.
    if !args.dry_run {
        Index::open(&dir)?;
    }
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
    let queries = gold_queries(&dataset);
    let predictions = run_with_progress(&reader, &queries, &calibration::read_params())?;
    let fitted = calibration::fit(&dataset, &predictions, args.target)?;
    let file_name = args.squad.file_name().map_or_else(
        || args.squad.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let stored = Calibration::new(
        &fitted.chosen,
        args.target,
        &reader_name(&reader_dir),
        &file_name,
        dataset.questions.len(),
    );
    if !args.dry_run {
        stored.save(&dir)?;
    }
    if let Some(path) = &args.html {
        fitted.html_report(&args.squad, args.target).write(path)?;
    }
    print_result(&args, &dir, &dataset, &stored, &fitted)
}

fn print_result(
    args: &CalibrateArgs,
    dir: &Path,
    dataset: &Dataset,
    stored: &Calibration,
    fitted: &Fitted,
) -> Result<()> {
    let file = dir.join(lector_pipeline::calibration::CALIBRATION_FILE);
    let (chosen, default) = (&fitted.chosen, &fitted.default);
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
            p.precision_percent(),
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

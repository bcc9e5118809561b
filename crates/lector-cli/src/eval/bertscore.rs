//! `lector eval bertscore`: BERTScore of candidates against references with a local encoder,
//! identical to the `bert-score` package (0.3.13) for the same model, layer and settings.
//! The run is `lector_pipeline::lab::bertscore`'s; this parses the arguments, shows progress
//! and prints.

use super::{write_jsonl, BootstrapArgs};
use crate::table::print_table;
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lector_eval::bertscore;
use lector_pipeline::lab::{self, bertscore::Options, bertscore::Report};
use std::path::PathBuf;

#[derive(Args)]
pub struct BertscoreArgs {
    /// JSON lines `{"id"?: .., "candidate": "...", "references": ["...", ..]}` (or
    /// `"reference": "..."`); a candidate scores its best reference, per metric, as the package.
    items: PathBuf,
    /// Encoder checkpoint directory (BERT, RoBERTa, DistilBERT or XLM-RoBERTa: config.json,
    /// weights, tokenizer.json); a task head is ignored.
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// The hidden layer whose token states are matched: 0 is the embedding output, the model's
    /// layer count its last layer [default: the package's tuned layer when the directory name or
    /// config.json's `_name_or_path` is a model it knows (roberta-large: 17), else the last layer].
    #[arg(long, value_name = "N")]
    layer: Option<usize>,
    /// Weight tokens by their idf over all the items' references (the package's `idf=True`);
    /// without it every token weighs 1 and [CLS]/[SEP] (<s>/</s>) 0.
    #[arg(long)]
    idf: bool,
    /// Rescale P, R and F1 with the baselines of this file, the row of the layer used
    /// (the package's `rescale_baseline/<lang>/<model>.tsv` format: `LAYER,P,R,F`).
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write one JSON line per item: `{"id", "precision", "recall", "f1"}` (for `eval compare`).
    #[arg(long, value_name = "FILE")]
    per_item: Option<PathBuf>,
    #[command(flatten)]
    bootstrap: BootstrapArgs,
}

pub fn run(args: &BertscoreArgs) -> Result<()> {
    let items = bertscore::read_items(&args.items)?;
    if items.is_empty() {
        bail!("{}: no items", args.items.display());
    }
    let options = Options {
        model: args.model.clone(),
        layer: args.layer,
        idf: args.idf,
        baseline: args.baseline.clone(),
        bootstrap: args.bootstrap.settings(),
    };
    let bar = progress_bar();
    let report = lab::bertscore::run(&items, &options, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })
    .with_context(|| format!("BERTScore with the encoder in {}", args.model.display()))?;
    bar.finish_and_clear();
    warn_about_degenerate_items(&report);
    if let Some(path) = &args.per_item {
        write_jsonl(path, &report.per_item(&items))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    let style =
        ProgressStyle::with_template("embedding {wide_bar} {pos}/{len} texts ({per_sec}, {eta})")
            .expect("valid template");
    bar.set_style(style);
    bar
}

/// Says what the package would say about empty texts, and where scores are NaN.
fn warn_about_degenerate_items(report: &Report) {
    if report.empty_candidates > 0 {
        eprintln!(
            "warning: {} empty candidates score P = R = F1 = 0",
            report.empty_candidates
        );
    }
    if report.empty_references > 0 {
        eprintln!(
            "warning: {} items have an empty reference, which scores P = R = F1 = 0",
            report.empty_references
        );
    }
    if report.nan_items > 0 {
        eprintln!(
            "warning: {} items have a NaN precision or recall: every token of a text weighs 0 \
             (with --idf, a text made only of tokens found in every reference), as in the package",
            report.nan_items
        );
    }
}

fn print_report(report: &Report) {
    let on_off = |on: bool| if on { "on" } else { "off" };
    let baseline = match &report.baseline {
        Some(path) => format!("on ({path})"),
        None => "off".into(),
    };
    println!(
        "{} items; model {}, layer {} of {} ({}), idf {}, baseline {}{}",
        report.items,
        report.model,
        report.layer,
        report.layers,
        report.layer_source,
        on_off(report.idf),
        baseline,
        match report.products {
            "f32" => String::new(),
            other => format!(", {other} products"),
        }
    );
    println!("(scores from different models, layers, idf or baseline settings do not compare)");
    let intervals = [
        ("precision", &report.precision),
        ("recall", &report.recall),
        ("f1", &report.f1),
    ];
    let rows: Vec<Vec<String>> = intervals
        .iter()
        .map(|(name, i)| {
            vec![
                name.to_string(),
                format!("{:.4}", i.mean),
                format!("[{:.4}, {:.4}]", i.low, i.high),
            ]
        })
        .collect();
    let ci = format!("{:.0}% CI", report.confidence * 100.0);
    print_table(&["metric", "mean", &ci], &rows);
}
